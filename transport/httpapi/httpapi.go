// Package httpapi is the HTTP face of the admit service: the JSON check API over a
// service.Service, the origin design's /demo endpoint (a built-in configuration decided by the same
// Service, answered by package httplimit's answering layer), health and readiness checks, and the
// metrics endpoint.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/admit-dev/admit/httplimit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/healthz"
	"github.com/admit-dev/admit/internal/lograte"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
)

// DemoSubject is the one fixed account that GET /demo limits, as in the origin design: every
// request to /demo is this subject.
const DemoSubject = "demo-account"

// Options configures a Handler. Demo and Service are required.
type Options struct {
	// Demo is the built-in configuration of GET /demo: each request is one unit of DemoSubject
	// under every one of its policies, decided by Service in place of its loaded configuration
	// (service.Check.Config); required. The policies are the caller's: cmd/admit's is the origin
	// design's 3 requests per 10 seconds, which serves as the loaded configuration too when no
	// file is given.
	Demo *policy.Config
	// Logger receives a record for requests the limiter could not decide, at the bounded rate of
	// httplimit.DefaultLogInterval: the first of a kind at once, then one summary per interval
	// with the count of the others. Nil means slog.Default().
	Logger *slog.Logger
	// Service decides GET /demo, and serves POST /v1/check and GET /v1/policies; required.
	Service *service.Service
	// ClientIP, if not nil, resolves the subject client_ip of the forward-auth form of /v1/check.
	ClientIP *httplimit.ClientIP
	// Ready, if not nil, is called by GET /readyz with a context that ends after ReadyTimeout: nil
	// means the backend can decide. Nil means /readyz answers as /healthz does.
	Ready func(ctx context.Context) error
	// Metrics, if not nil, serves GET /metrics.
	Metrics http.Handler
	// Version, if not empty, follows "ok" in the body of GET /healthz: "ok v1.2.0\n". It must be
	// printable ASCII without spaces. Empty means "ok\n".
	Version string
}

// ReadyTimeout bounds how long GET /readyz waits for Options.Ready.
const ReadyTimeout = time.Second

// A Handler serves the admit HTTP API. It is safe for concurrent use. Make one with [New]; the zero
// value is not usable.
//
// Routes (GET also answers HEAD; any other method is answered 405 with an Allow field):
//
//	GET /demo         the origin design's demo: DemoSubject under the policies of Options.Demo,
//	                  decided by Options.Service and answered as httplimit's middleware answers
//	GET /healthz      200 "ok\n" (or "ok VERSION\n") while the process is alive; it never calls
//	                  the backend
//	GET /readyz       200 "ok\n" when Options.Ready reports, within ReadyTimeout, that the backend
//	                  can decide; else 503 "not ready\n"
//	GET /metrics      Options.Metrics, when set
//	POST /v1/check    decides a CheckRequest: 200 allowed, 429 limited, 400 invalid, 503 undecided
//	ANY /v1/check...  the forward-auth form: the check in the query or else in header fields
//	GET /v1/policies  the loaded policies
//
// What each route answers, with which fields and bounds: docs/operations.md#the-decision-endpoints.
type Handler struct {
	mux *http.ServeMux
}

// New returns a Handler for opts. It reports an error if opts.Demo or opts.Service is nil,
// opts.Demo has no policy, or opts.Version is not printable ASCII without spaces.
func New(opts Options) (*Handler, error) {
	switch {
	case opts.Demo == nil || opts.Service == nil:
		return nil, errors.New("httpapi: New needs a Demo configuration and a Service")
	case len(opts.Demo.Policies) == 0 || len(opts.Demo.Policies) > bound.MaxRequests:
		return nil, fmt.Errorf("httpapi: the Demo configuration has %d policies; want 1-%d", len(opts.Demo.Policies), bound.MaxRequests)
	}
	health, err := healthz.Body(opts.Version)
	if err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	answers := httplimit.NewAnswers(httplimit.DefaultUnavailableRetryAfter, false)
	demoLog := logger(opts.Logger).With(slog.String("limit", policyNames(opts.Demo)))
	mux := http.NewServeMux()
	mux.Handle("GET /demo", newDemo(opts.Service, opts.Demo, answers.Logged(demoLog, httplimit.DefaultLogInterval)))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { text(w, health) })
	mux.HandleFunc("GET /readyz", ready(opts.Ready, logger(opts.Logger)))
	if opts.Metrics != nil {
		mux.Handle("GET /metrics", opts.Metrics)
	}
	chk := &check{svc: opts.Service, clientIP: opts.ClientIP, log: lograte.New(logger(opts.Logger), httplimit.DefaultLogInterval, checkLogKinds...), answers: answers}
	mux.Handle("/v1/check", chk)
	mux.Handle("/v1/check/", chk) // the forward-auth form, below a prefix that appends the original path
	mux.HandleFunc("GET /v1/policies", policies(opts.Service))
	return &Handler{mux: mux}, nil
}

// ServeHTTP routes r to its endpoint.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// logger returns l, or slog.Default() for nil.
func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}

// ready returns the handler of GET /readyz.
func ready(check func(context.Context) error, logger *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if check != nil {
			ctx, cancel := context.WithTimeout(r.Context(), ReadyTimeout)
			defer cancel()
			if err := check(ctx); err != nil {
				logger.Warn("not ready", "error", err)
				hdr := w.Header()
				hdr.Set("Cache-Control", "no-store")
				hdr.Set("Content-Type", "text/plain; charset=utf-8")
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, "not ready\n")
				return
			}
		}
		ok(w, r)
	}
}

// ok answers 200 "ok\n", not to be cached.
func ok(w http.ResponseWriter, _ *http.Request) {
	text(w, "ok\n")
}

// text answers 200 body as plain text, not to be cached.
func text(w http.ResponseWriter, body string) {
	hdr := w.Header()
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Content-Type", "text/plain; charset=utf-8")
	hdr.Set("X-Content-Type-Options", "nosniff")
	io.WriteString(w, body)
}
