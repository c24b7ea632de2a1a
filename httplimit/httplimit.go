// Package httplimit is net/http middleware that admits or rejects requests with an [admit.Limiter].
//
// An admitted request goes on to the next handler. A rejected one is answered 429 Too Many Requests
// with an integer Retry-After; a request the limiter could not decide is answered 503 Service
// Unavailable (fail closed), never passed through.
package httplimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/admit-dev/admit"
)

// The response bodies the middleware writes.
const (
	// LimitedBody is the body of a 429 response.
	LimitedBody = "rate limit exceeded\n"
	// UnavailableBody is the body of a 503 response.
	UnavailableBody = "limiter unavailable\n"
)

// DefaultUnavailableRetryAfter is the Retry-After of a 503 response when
// [Middleware.UnavailableRetryAfter] is 0.
const DefaultUnavailableRetryAfter = time.Second

// A KeyFunc returns the limiter key for r. The key must be derived from something the server
// verified, such as an authenticated principal, never from a raw client-supplied header, or a client
// could choose its own bucket. An error means the request cannot be keyed; the middleware answers
// 503 and does not call the next handler.
type KeyFunc func(r *http.Request) (string, error)

// A Middleware limits requests with Limiter, one bucket per key that Key returns.
// Set its fields, then call [Middleware.Wrap]; Wrap copies them, so later changes have no effect on
// handlers already returned. The handlers Wrap returns are safe for concurrent use.
type Middleware struct {
	// Limiter decides each request; required.
	Limiter *admit.Limiter
	// Key returns the key of each request; required.
	Key KeyFunc
	// Logger receives a record for every request the limiter could not decide.
	// Nil means slog.Default().
	Logger *slog.Logger
	// UnavailableRetryAfter is the Retry-After sent with a 503, rounded up to whole seconds and at
	// least 1s. Zero or less means DefaultUnavailableRetryAfter.
	UnavailableRetryAfter time.Duration
}

// Wrap returns a handler that calls next only for requests the limiter admits.
//
// A rejected request is answered 429 with Retry-After (whole seconds, at least 1),
// Cache-Control: no-store and the body [LimitedBody]. A request that cannot be decided — Key
// returned an error, the limiter returned any error, or either of them panicked — is answered 503
// with Retry-After from UnavailableRetryAfter, Cache-Control: no-store and the body
// [UnavailableBody], and logged. Panics raised by next are not recovered.
//
// Wrap panics if m.Limiter, m.Key or next is nil.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	if m.Limiter == nil || m.Key == nil || next == nil {
		panic("httplimit: Wrap needs a Limiter, a Key and a next handler")
	}
	h := &handler{
		limiter: m.Limiter,
		key:     m.Key,
		logger:  m.Logger,
		next:    next,
	}
	if h.logger == nil {
		h.logger = slog.Default()
	}
	retry := m.UnavailableRetryAfter
	if retry <= 0 {
		retry = DefaultUnavailableRetryAfter
	}
	h.unavailableRetryAfter = strconv.FormatInt(admit.CeilSeconds(retry), 10)
	return h
}

// handler is the http.Handler that Wrap returns.
type handler struct {
	limiter               *admit.Limiter
	key                   KeyFunc
	logger                *slog.Logger
	next                  http.Handler
	unavailableRetryAfter string // whole seconds
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d, err := h.decide(r)
	switch {
	case err != nil:
		h.logUndecided(r, err)
		writeText(w, http.StatusServiceUnavailable, h.unavailableRetryAfter, UnavailableBody)
	case !d.Allowed:
		retry := strconv.FormatInt(d.RetryAfterSeconds(), 10)
		writeText(w, http.StatusTooManyRequests, retry, LimitedBody)
	default:
		h.next.ServeHTTP(w, r)
	}
}

// panicError is a recovered panic, with the stack where it happened.
type panicError struct {
	where string
	value any
	stack []byte
}

func (e *panicError) Error() string {
	return fmt.Sprintf("httplimit: panic in %s: %v", e.where, e.value)
}

// keyError is an error returned by the key function.
type keyError struct{ err error }

func (e *keyError) Error() string { return "httplimit: key: " + e.err.Error() }
func (e *keyError) Unwrap() error { return e.err }

// decide runs the key function and the limiter for r, turning a panic in either into an error.
func (h *handler) decide(r *http.Request) (d admit.Decision, err error) {
	where := "key function"
	defer func() {
		if v := recover(); v != nil {
			d, err = admit.Decision{}, &panicError{where: where, value: v, stack: debug.Stack()}
		}
	}()
	key, err := h.key(r)
	if err != nil {
		return admit.Decision{}, &keyError{err: err}
	}
	where = "limiter"
	return h.limiter.Allow(r.Context(), key)
}

// logUndecided logs why r could not be decided, at a level fitting the cause: Error for a bug of the
// server (invalid limit or request, corrupt state, a panic), Warn for an unavailable backend or a
// failing key function, Info when the client went away first.
func (h *handler) logUndecided(r *http.Request, err error) {
	ctx := r.Context()
	level, msg := slog.LevelWarn, "limiter unavailable"
	var pe *panicError
	var ke *keyError
	switch {
	case errors.As(err, &pe):
		level, msg = slog.LevelError, "panic in limiter"
	case errors.As(err, &ke):
		msg = "cannot key request"
	case errors.Is(err, admit.ErrInvalidLimit), errors.Is(err, admit.ErrInvalidRequest):
		level, msg = slog.LevelError, "invalid limit or request"
	case errors.Is(err, admit.ErrCorruptState):
		level, msg = slog.LevelError, "corrupt limiter state"
	case errors.Is(ctx.Err(), context.Canceled):
		level, msg = slog.LevelInfo, "request canceled before the limiter decided"
	}
	if !h.logger.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.String("limit", h.limiter.Limit().String()),
		slog.Any("error", err),
	}
	if pe != nil {
		attrs = append(attrs, slog.String("stack", string(pe.stack)))
	}
	h.logger.LogAttrs(ctx, level, msg, attrs...)
}

// writeText answers with status and a plain-text body that no cache may store.
func writeText(w http.ResponseWriter, status int, retryAfter, body string) {
	hdr := w.Header()
	hdr["Retry-After"] = []string{retryAfter}
	hdr["Cache-Control"] = []string{"no-store"}
	hdr["Content-Type"] = []string{"text/plain; charset=utf-8"}
	hdr["X-Content-Type-Options"] = []string{"nosniff"}
	hdr["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	io.WriteString(w, body)
}
