// Package httplimit is net/http middleware that admits or rejects requests with an [admit.Limiter].
//
// A [SubjectFunc] says who each request is limited as — an authenticated principal ([Principal],
// recorded by your authentication middleware with [WithPrincipal]), a client address resolved
// through trusted proxies ([ClientIP]), or for demos and global limits one [Constant] subject —
// and the Limiter decides that subject under each of its policies, all-or-nothing. None reads a
// header the client controls. An admitted request goes on to the next handler; any other is
// answered here, and the next handler never runs: 429 with Retry-After when a policy rejected it
// (nothing consumed from any), 400 when the request is malformed ([ErrMalformedRequest]), 500 for
// a bug of the server ([ErrMisconfigured], an invalid subject or Request), and 503 with a short
// Retry-After when the limiter cannot decide (fail closed). Admitted and 429 responses carry the
// RateLimit-Policy and RateLimit fields of draft-ietf-httpapi-ratelimit-headers-11; every other
// answer is logged at a bounded rate ([Middleware.LogInterval]). Which error gets which answer:
// docs/http.md#error-classes.
package httplimit

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/lograte"
	"github.com/admit-dev/admit/internal/ratelimitfield"
)

// The response bodies the middleware writes.
const (
	// LimitedBody is the body of a 429 response.
	LimitedBody = "rate limit exceeded\n"
	// UnavailableBody is the body of a 503 response.
	UnavailableBody = "limiter unavailable\n"
	// BadRequestBody is the body of a 400 response. It never says what was wrong: that is logged.
	BadRequestBody = "bad request\n"
	// InternalErrorBody is the body of a 500 response. It never says what was wrong: that is logged.
	InternalErrorBody = "internal server error\n"
)

// DefaultUnavailableRetryAfter is the Retry-After of a 503 response when
// [Middleware.UnavailableRetryAfter] is 0.
const DefaultUnavailableRetryAfter = time.Second

// DefaultLogInterval is the log interval when [Middleware.LogInterval] is 0.
const DefaultLogInterval = lograte.DefaultInterval

// ErrMalformedRequest is the error a [SubjectFunc] wraps to say that the request itself is malformed,
// such as a bad forwarding header from a trusted proxy: the middleware answers 400 Bad Request.
// Wrap it with context, as in fmt.Errorf("X-Forwarded-For %q: %w", v, ErrMalformedRequest); the
// middleware matches it with errors.Is.
var ErrMalformedRequest = errors.New("httplimit: malformed request")

// A SubjectFunc returns the subject that r is limited as. The subject must be something the server
// verified, such as an authenticated principal or a client address resolved through trusted
// proxies, never a raw client-supplied header, or a client could choose its own allowance (docs/keys.md).
// The Limiter's KeyBuilder digests it into one key per policy; admit never stores or logs it.
//
// An error means the request's subject cannot be found, and the next handler is not called. An
// error matching [ErrMalformedRequest] is answered 400 Bad Request; one matching [ErrMisconfigured]
// 500 Internal Server Error; any other error 503 Service Unavailable. A subject that the limiter refuses (an empty ID, or one longer than
// 1 MiB) is answered 500.
type SubjectFunc func(r *http.Request) (admit.Subject, error)

// A TierFunc returns the tier that r's subject is in, such as the plan of the authenticated
// account, or "" for none: the Limiter decides each policy with tiers under that tier's Limit
// (admit.NewLimiter). Like a subject, it must be something the server verified, never a raw
// client-supplied header. Its error is answered as a [SubjectFunc]'s is; a tier the Limiter's
// policies do not have is an invalid request, answered 500: a mistake of the server.
type TierFunc func(r *http.Request) (string, error)

// Constant returns a SubjectFunc that makes every request the one subject, so that all requests
// share each policy's allowance. It is for demos and global limits ("this endpoint takes 1000
// requests a second, whoever asks"), not for limiting clients apart. An empty subject is invalid:
// every request is then answered 500.
func Constant(subject string) SubjectFunc {
	s := admit.Subject{ID: subject}
	return func(*http.Request) (admit.Subject, error) { return s, nil }
}

// A Middleware limits requests with Limiter, deciding the subject that Subject returns under every
// policy of the Limiter together. Set its fields, then call [Middleware.Wrap]; Wrap copies them, so later changes have no effect on
// handlers already returned. The handlers Wrap returns are safe for concurrent use.
type Middleware struct {
	// Limiter decides each request, one unit under each of its policies, all-or-nothing; required.
	Limiter *admit.Limiter
	// Subject returns the subject of each request; required.
	Subject SubjectFunc
	// Tier, if not nil, returns the tier of each request's subject, which goes into the Subject
	// passed to the Limiter (admit.Subject.Tier); nil means no tier: the policies' own numbers.
	Tier TierFunc
	// Logger receives a record for requests answered 400, 500 or 503, at the rate LogInterval
	// allows. Nil means slog.Default(). Its handler is called on the request's goroutine, so it
	// should not block; cmd/admit writes through a queue that drops lines rather than wait.
	Logger *slog.Logger
	// LogInterval bounds the log rate of each handler Wrap returns, for each kind of record (a
	// level and a message, such as "limiter unavailable" at WARN). The first record of a kind is
	// logged at once; the records of that kind in the next LogInterval are counted instead, and
	// when it ends one summary record reports their number (suppressed=N) and the last error,
	// starting the next interval. A timer writes the summary, so it may come after the handler's
	// last request. Zero means DefaultLogInterval; less than zero logs every record, without timers.
	LogInterval time.Duration
	// UnavailableRetryAfter is the Retry-After sent with a 503, rounded up to whole seconds and at
	// least 1s. Zero or less means DefaultUnavailableRetryAfter.
	UnavailableRetryAfter time.Duration
	// OmitRateLimitHeaders turns off the RateLimit-Policy and RateLimit fields
	// (draft-ietf-httpapi-ratelimit-headers-11) that admitted and 429 responses otherwise carry.
	OmitRateLimitHeaders bool
	// ProblemDetails makes the body of a 429 response RFC 9457 problem details,
	// application/problem+json, of type [QuotaExceededType] with the extension member
	// violated-policies, the names of the policies that rejected the request, instead of the
	// plain-text [LimitedBody].
	ProblemDetails bool
	// OnShadowLimit, if not nil, is called for each policy in shadow mode (admit.Limit.Shadow) that
	// would have limited an admitted request, with the request and that policy's Decision: a hook
	// for counting and logging them. (A metrics Store counts them too, as result "shadow".) It is
	// called on the request's goroutine before next runs, so it should not block.
	OnShadowLimit func(r *http.Request, d admit.Decision)
	// ShadowHeader, if not empty, names a response field set on an admitted request that policies in
	// shadow mode would have limited: a structured-field list of their names, such as
	// Admit-Shadow-Limited: "per-day". Shadow policies never appear in the RateLimit fields.
	ShadowHeader string
}

// Wrap returns a handler that calls next only for requests the limiter admits, and answers every
// other one itself, with Cache-Control: no-store: 429 with Retry-After (whole seconds, at least 1)
// and [LimitedBody], or with ProblemDetails the problem details that name the policies that
// rejected it; 400 with [BadRequestBody]; 500 with [InternalErrorBody]; 503 with Retry-After from
// UnavailableRetryAfter and [UnavailableBody]. Panics raised by next are not recovered.
//
// Unless OmitRateLimitHeaders is set, an admitted request reaches next with RateLimit-Policy
// (computed once, here) and RateLimit already set, and a 429 carries them: one member per policy,
// in the Limiter's order (docs/http.md#the-ratelimit-fields). With Concurrency policies, an
// admitted request holds a lease of each while next runs, released when next returns, panics or
// the client goes away (docs/http.md#concurrency-policies). Every log record carries the attribute
// limit, the names of the Limiter's policies joined by "," (limit=per-second,per-day).
//
// Wrap panics if m.Limiter, m.Subject or next is nil, or if m.Limiter does not pass
// [admit.Limiter.Validate] (call it first to handle the error): an invalid Limit is a mistake to
// stop on at start, not a 500 for every request.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	if m.Limiter == nil || m.Subject == nil || next == nil {
		panic("httplimit: Wrap needs a Limiter, a Subject function and a next handler")
	}
	if err := m.Limiter.Validate(); err != nil {
		panic("httplimit: Wrap: " + err.Error())
	}
	logger := m.Logger
	if logger == nil {
		logger = slog.Default()
	}
	interval := m.LogInterval
	if interval == 0 {
		interval = DefaultLogInterval
	}
	h := &handler{
		limiter: m.Limiter,
		limits:  m.Limiter.Limits(),
		subject: m.Subject,
		tier:    m.Tier,
		next:    next,
		answers: NewAnswers(m.UnavailableRetryAfter, m.OmitRateLimitHeaders).Logged(logger.With(slog.String("limit", policyNames(m.Limiter))), interval),
		problem: m.ProblemDetails,
	}
	for _, l := range h.limits {
		h.leases = h.leases || l.Algorithm == admit.Concurrency
		h.shadow = h.shadow || l.Shadow && (m.OnShadowLimit != nil || m.ShadowHeader != "")
	}
	h.onShadowLimit, h.shadowHeader = m.OnShadowLimit, http.CanonicalHeaderKey(m.ShadowHeader)
	if !m.OmitRateLimitHeaders {
		h.fields, h.headers = ratelimitfield.NewFields(h.limits)
		h.headers = h.headers && h.fields.Policy() != "" // none when every policy is in shadow mode
	}
	return h
}

// policyNames returns the names of l's policies, joined by ",".
func policyNames(l *admit.Limiter) string {
	limits := l.Limits()
	names := make([]string, len(limits))
	for i, lim := range limits {
		names[i] = lim.Name
	}
	return strings.Join(names, ",")
}

// handler is the http.Handler that Wrap returns.
type handler struct {
	limiter       *admit.Limiter
	limits        []admit.Limit // the Limiter's, in its order
	subject       SubjectFunc
	tier          TierFunc // nil for none
	next          http.Handler
	answers       *Answers               // the answers to requests not admitted
	headers       bool                   // whether to send the RateLimit fields
	fields        *ratelimitfield.Fields // the RateLimit fields' writer, if headers
	problem       bool                   // whether a 429's body is problem details
	leases        bool                   // whether a Concurrency policy leases: admitted requests are released
	shadow        bool                   // whether shadow rejections are reported, by onShadowLimit or shadowHeader
	onShadowLimit func(*http.Request, admit.Decision)
	shadowHeader  string
}

// reportShadow reports the policies in shadow mode that would have limited r, admitted with the
// Decisions ds: to onShadowLimit, and in shadowHeader, whose value a provides.
func (h *handler) reportShadow(w http.ResponseWriter, r *http.Request, a *fieldArena, ds []admit.Decision) {
	var buf [256]byte
	names := buf[:0]
	for i := range ds {
		d := &ds[i]
		if !d.Limit.Shadow || d.Allowed {
			continue
		}
		if h.onShadowLimit != nil {
			h.onShadowLimit(r, *d)
		}
		if h.shadowHeader != "" {
			if len(names) > 0 {
				names = append(names, ", "...)
			}
			names = strconv.AppendQuote(names, d.Limit.Name) // a policy name is a-z, 0-9, '_' and '-': no escapes
		}
	}
	if len(names) > 0 {
		w.Header()[h.shadowHeader] = a.value(a.string(names))
	}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Room for the Decisions on the stack, no more than the Limiter needs: less to clear per request.
	var one [1]admit.Decision
	var ds []admit.Decision
	switch n := len(h.limits); {
	case n <= 1:
		ds = one[:n]
	case n <= 4:
		var few [4]admit.Decision
		ds = few[:n]
	case n <= bound.MaxRequests:
		var many [bound.MaxRequests]admit.Decision
		ds = many[:n]
	} // else the Limiter is invalid, and says so
	release, err := h.decide(r, ds)
	if release != nil {
		defer release() // after next returns, or panics; on a client gone away too
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d := &ds[0] // the Decision that decides them together, as the Limiter returns it
	if len(ds) > 1 {
		d = &ds[admit.Deciding(ds)]
	}
	if !d.Allowed {
		h.limited(w, ds, ratelimitfield.RetryAfter(*d))
		return
	}
	if h.headers || h.shadow {
		a := fieldArenas.Get().(*fieldArena)
		h.setRateLimit(w.Header(), a, ds, 0)
		if h.shadow {
			h.reportShadow(w, r, a, ds)
		}
		fieldArenas.Put(a)
	}
	h.next.ServeHTTP(w, r)
}

// fail answers r, which the middleware could not decide because of err, and logs why.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	h.answers.failed(w, r, err)
}

// limited answers 429 to a request whose Decisions are ds, with Retry-After retry.
func (h *handler) limited(w http.ResponseWriter, ds []admit.Decision, retry int64) {
	a := fieldArenas.Get().(*fieldArena)
	h.setRateLimit(w.Header(), a, ds, retry)
	var buf [20]byte
	retryAfter := a.string(strconv.AppendInt(buf[:0], retry, 10))
	if h.problem {
		var body [512]byte
		writeBody(w, a, http.StatusTooManyRequests, retryAfter, "application/problem+json", a.string(appendProblem(body[:0], h.limits, ds, retry)))
	} else {
		writeText(w, a, http.StatusTooManyRequests, retryAfter, LimitedBody)
	}
	fieldArenas.Put(a)
}

// setRateLimit sets the RateLimit-Policy and RateLimit fields of a response to a request whose
// Decisions are ds, if h sends them, with values from a; retryAfter is the Retry-After of a 429, 0
// otherwise.
func (h *handler) setRateLimit(hdr http.Header, a *fieldArena, ds []admit.Decision, retryAfter int64) {
	if !h.headers {
		return
	}
	if h.tier != nil && tiered(ds) { // not the Limits the fields were computed for, once
		ratelimitfield.Set(hdr, ds, retryAfter)
		return
	}
	b := h.fields.AppendRateLimit(a.buffer(h.fields.MaxRateLimitLen()), ds, retryAfter)
	hdr[ratelimitfield.PolicyName] = a.value(h.fields.Policy()) // computed once, by Wrap
	hdr[ratelimitfield.Name] = a.value(a.take(b))
}

// tiered reports whether any of ds was decided under a tier's Limit.
func tiered(ds []admit.Decision) bool {
	for i := range ds {
		if ds[i].Limit.Tier != "" {
			return true
		}
	}
	return false
}

// subjectError is an error returned by the subject function, or the tier function.
type subjectError struct{ err error }

func (e *subjectError) Error() string { return "httplimit: subject: " + e.err.Error() }
func (e *subjectError) Unwrap() error { return e.err }

// decide runs the subject function and the limiter for r, filling ds with the Decision of each
// policy, and turns a panic in either into an error. With Concurrency policies it returns the
// release of the request's leases; else release is nil.
func (h *handler) decide(r *http.Request, ds []admit.Decision) (release func(), err error) {
	inLimiter := false
	defer func() {
		if v := recover(); v != nil {
			where := "subject function"
			if inLimiter {
				where = "limiter"
			}
			release, err = nil, &PanicError{Where: where, Value: v, Stack: debug.Stack()}
		}
	}()
	s, err := h.subject(r)
	if err == nil && h.tier != nil {
		s.Tier, err = h.tier(r)
	}
	if err != nil {
		return nil, &subjectError{err: err}
	}
	inLimiter = true
	switch {
	case h.leases:
		_, release, err = h.limiter.Admit(r.Context(), s, 1, "", ds)
	case len(ds) == 1:
		ds[0], err = h.limiter.Take(r.Context(), s, 1, "", nil) // straight into ds, with no copy
	default:
		_, err = h.limiter.Take(r.Context(), s, 1, "", ds)
	}
	return release, err
}

// A failure is a kind of request the middleware could not admit, other than over the limit. Each
// has its status, log level and log message.
type failure uint8

const (
	failMalformed     failure = iota // the subject function: ErrMalformedRequest
	failSubject                      // the subject function: any other error
	failMisconfigured                // the subject function: ErrMisconfigured
	failInvalid                      // ErrInvalidLimit or ErrInvalidRequest
	failCorrupt                      // ErrCorruptState
	failPanic                        // a panic in the subject function or the limiter
	failCanceled                     // undecided, and the client went away first
	failUnavailable                  // ErrUnavailable, or anything unclassified
	numFailures
)

// classify returns the kind of failure err is, for a request whose context is ctx.
func classify(ctx context.Context, err error) failure {
	var pe *PanicError
	var se *subjectError
	switch {
	case errors.As(err, &pe):
		return failPanic
	case errors.As(err, &se):
		switch {
		case errors.Is(se.err, ErrMalformedRequest):
			return failMalformed
		case errors.Is(se.err, ErrMisconfigured):
			return failMisconfigured
		}
		return failSubject
	case errors.Is(err, admit.ErrInvalidLimit), errors.Is(err, admit.ErrInvalidRequest):
		return failInvalid
	case errors.Is(err, admit.ErrCorruptState):
		return failCorrupt
	case errors.Is(ctx.Err(), context.Canceled):
		return failCanceled
	}
	return failUnavailable
}

// status returns the HTTP status that answers f.
func (f failure) status() int {
	switch f {
	case failMalformed:
		return http.StatusBadRequest
	case failInvalid, failMisconfigured:
		return http.StatusInternalServerError
	}
	return http.StatusServiceUnavailable
}

// level returns the log level of f: Error for a bug of the server (an invalid policy or subject,
// corrupt state, a panic), Warn for an unavailable backend or a failing subject function, Info for a
// client's doing (a malformed request, a client that went away first).
func (f failure) level() slog.Level {
	switch f {
	case failInvalid, failMisconfigured, failCorrupt, failPanic:
		return slog.LevelError
	case failMalformed, failCanceled:
		return slog.LevelInfo
	}
	return slog.LevelWarn
}

// message returns the log message of f.
func (f failure) message() string {
	switch f {
	case failMalformed:
		return "malformed request"
	case failSubject:
		return "cannot find the request's subject"
	case failInvalid:
		return "invalid limit or request"
	case failMisconfigured:
		return "server misconfigured"
	case failCorrupt:
		return "corrupt limiter state"
	case failPanic:
		return "panic in limiter"
	case failCanceled:
		return "request canceled before the limiter decided"
	}
	return "limiter unavailable"
}

// logFailure logs why r was not admitted, unless the log rate calls for counting it instead.
func (a *Answers) logFailure(r *http.Request, f failure, err error) {
	ctx := r.Context()
	if !a.log.Start(ctx, int(f), err) {
		return
	}
	defer a.log.Done(int(f))
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Any("error", err),
	}
	if pe := (*PanicError)(nil); errors.As(err, &pe) {
		attrs = append(attrs, slog.String("stack", string(pe.Stack)))
	}
	a.log.Logger().LogAttrs(ctx, f.level(), f.message(), attrs...)
}

// failureKinds returns the log kinds of the failures, indexed by failure.
func failureKinds() []lograte.Kind {
	kinds := make([]lograte.Kind, numFailures)
	for f := range numFailures {
		kinds[f] = lograte.Kind{Level: f.level(), Msg: f.message()}
	}
	return kinds
}

// writeText answers with status and a plain-text body that no cache may store, with a Retry-After
// field if retryAfter is not empty, and header values from a.
func writeText(w http.ResponseWriter, a *fieldArena, status int, retryAfter, body string) {
	writeBody(w, a, status, retryAfter, "text/plain; charset=utf-8", body)
}

// writeBody answers with status and a body of contentType that no cache may store, with a
// Retry-After field if retryAfter is not empty, and header values from a. The fields' names are
// canonical already: they are map keys, with no call to http.CanonicalHeaderKey.
func writeBody(w http.ResponseWriter, a *fieldArena, status int, retryAfter, contentType, body string) {
	hdr := w.Header()
	if retryAfter != "" {
		hdr["Retry-After"] = a.value(retryAfter)
	} else {
		delete(hdr, "Retry-After")
	}
	hdr["Cache-Control"] = a.value("no-store")
	hdr["Content-Type"] = a.value(contentType)
	hdr["X-Content-Type-Options"] = a.value("nosniff")
	var buf [20]byte
	hdr["Content-Length"] = a.value(a.string(strconv.AppendInt(buf[:0], int64(len(body)), 10)))
	w.WriteHeader(status)
	io.WriteString(w, body)
}
