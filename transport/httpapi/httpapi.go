// Package httpapi is the HTTP face of the admit service: the origin design's /demo endpoint and
// health checks, built on package httplimit.
package httpapi

import (
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/httplimit"
)

// DemoSubject is the one fixed account that GET /demo limits, as in the origin design: every
// request to /demo is this subject.
const DemoSubject = "demo-account"

// Options configures a Handler. Only Demo is required.
type Options struct {
	// Demo decides each GET /demo as DemoSubject, under its policies; required. The policies are
	// the caller's: cmd/admit's is the origin design's 3 requests per 10 seconds.
	Demo *admit.Limiter
	// Logger receives a record for requests the limiter could not decide, at the bounded rate of
	// httplimit.DefaultLogInterval: the first of a kind at once, then one summary per interval
	// with the count of the others. Nil means slog.Default().
	Logger *slog.Logger
}

// A Handler serves the admit HTTP API. It is safe for concurrent use. Make one with [New]; the zero
// value is not usable.
//
// Routes (GET also answers HEAD; any other method is answered 405 with an Allow field):
//
//	GET /demo     the origin design's demo: one fixed account (DemoSubject) under the policies of
//	              Options.Demo. 200 "ok\n" when admitted, 429 with Retry-After when over the limit,
//	              503 when the limiter cannot decide. A HEAD request counts like a GET.
//	GET /healthz  200 "ok\n" while the process is alive; it never calls the backend.
type Handler struct {
	mux *http.ServeMux
}

// New returns a Handler for opts. It reports an error if opts.Demo is nil.
func New(opts Options) (*Handler, error) {
	if opts.Demo == nil {
		return nil, errors.New("httpapi: no Demo limiter")
	}
	demo := &httplimit.Middleware{
		Limiter: opts.Demo,
		Subject: httplimit.Constant(DemoSubject),
		Logger:  opts.Logger,
	}
	mux := http.NewServeMux()
	mux.Handle("GET /demo", demo.Wrap(http.HandlerFunc(ok)))
	mux.HandleFunc("GET /healthz", ok)
	return &Handler{mux: mux}, nil
}

// ServeHTTP routes r to its endpoint.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// ok answers 200 "ok\n", not to be cached.
func ok(w http.ResponseWriter, _ *http.Request) {
	hdr := w.Header()
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Content-Type", "text/plain; charset=utf-8")
	hdr.Set("X-Content-Type-Options", "nosniff")
	io.WriteString(w, "ok\n")
}
