package httplimit

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/lograte"
	"github.com/admit-dev/admit/internal/ratelimitfield"
)

// Answers writes the answers to requests that a limiter did not admit, as the package doc lists
// them: 429 with Retry-After, 400, 500, or 503 with a short Retry-After, each in plain text that no
// cache may store. It is the one answering layer of [Middleware], of admit proxy (package
// httpproxy) and of admit serve's /demo; the JSON API of admit serve answers in JSON, with the
// same Retry-After and RateLimit fields ([Answers.SetFields]). Make one with [NewAnswers]; it is
// safe for concurrent use.
type Answers struct {
	unavailable string           // the Retry-After of a 503, whole seconds
	headers     bool             // whether a 429 carries the RateLimit fields
	log         *lograte.Limiter // of the failures, one kind each; nil logs nothing
}

// NewAnswers returns the Answers whose 503 has a Retry-After of unavailableRetryAfter, rounded up
// to whole seconds and at least 1s (zero or less means DefaultUnavailableRetryAfter), and whose
// 429 carries the RateLimit fields unless omitRateLimitHeaders.
func NewAnswers(unavailableRetryAfter time.Duration, omitRateLimitHeaders bool) *Answers {
	if unavailableRetryAfter <= 0 {
		unavailableRetryAfter = DefaultUnavailableRetryAfter
	}
	return &Answers{unavailable: strconv.FormatInt(ratelimitfield.CeilSeconds(unavailableRetryAfter), 10), headers: !omitRateLimitHeaders}
}

// Logged returns Answers that answer as a does, and log each request that Failed answers to
// logger, as [Middleware] logs them: the first record of a kind (a level and a message, such as
// "limiter unavailable" at WARN) at once, then one summary per interval with the number of the
// others (see Middleware.LogInterval: zero means DefaultLogInterval, less than zero logs every
// record).
func (a *Answers) Logged(logger *slog.Logger, interval time.Duration) *Answers {
	if interval == 0 {
		interval = DefaultLogInterval
	}
	b := *a
	b.log = lograte.New(logger, interval, failureKinds()...)
	return &b
}

// UnavailableRetryAfter returns the Retry-After of a 503, in whole seconds.
func (a *Answers) UnavailableRetryAfter() string { return a.unavailable }

// SetFields sets the fields of an answer to a decided request whose Decisions are ds: the
// RateLimit fields, unless the Answers omit them, and, when retry is not 0, the Retry-After of a
// limited request, retry whole seconds (ratelimitfield.RetryAfter of the deciding
// Decision); retry is 0 for an admitted request.
func (a *Answers) SetFields(hdr http.Header, ds []admit.Decision, retry int64) {
	if retry > 0 {
		hdr["Retry-After"] = []string{strconv.FormatInt(retry, 10)}
	}
	if a.headers {
		ratelimitfield.Set(hdr, ds, retry)
	}
}

// Limited answers 429 to a request whose Decisions are ds, with Retry-After retry: the fields of
// SetFields and the body [LimitedBody].
func (a *Answers) Limited(w http.ResponseWriter, ds []admit.Decision, retry int64) {
	if a.headers {
		ratelimitfield.Set(w.Header(), ds, retry)
	}
	ar := fieldArenas.Get().(*fieldArena)
	var buf [20]byte
	writeText(w, ar, http.StatusTooManyRequests, ar.string(strconv.AppendInt(buf[:0], retry, 10)), LimitedBody)
	fieldArenas.Put(ar)
}

// Write answers status with the plain-text body, which no cache may store, and no Retry-After:
// for the answers of a proxy in front of the limiter, such as a 502 or a refused path.
func (a *Answers) Write(w http.ResponseWriter, status int, body string) {
	ar := fieldArenas.Get().(*fieldArena)
	writeText(w, ar, status, "", body)
	fieldArenas.Put(ar)
}

// Failed answers a request that was neither admitted nor limited because of err, found while
// finding its subject when subject is set, and returns the status it answered: 400 Bad Request
// with [BadRequestBody] for a subject error matching [ErrMalformedRequest]; 500 Internal Server
// Error with [InternalErrorBody] for a subject error matching [ErrMisconfigured], or an error
// matching admit.ErrInvalidRequest or admit.ErrInvalidLimit; else 503 Service Unavailable with
// Retry-After and [UnavailableBody].
func (a *Answers) Failed(w http.ResponseWriter, r *http.Request, err error, subject bool) int {
	if subject {
		err = &subjectError{err: err}
	}
	return a.failed(w, r, err)
}

// failed answers r, which was not decided because of err (a *subjectError for the subject
// function's), logs it if a logs, and returns the status it answered.
func (a *Answers) failed(w http.ResponseWriter, r *http.Request, err error) int {
	k := classify(r.Context(), err)
	if a.log != nil {
		a.logFailure(r, k, err)
	}
	ar := fieldArenas.Get().(*fieldArena)
	defer fieldArenas.Put(ar)
	switch k.status() {
	case http.StatusBadRequest:
		writeText(w, ar, http.StatusBadRequest, "", BadRequestBody)
	case http.StatusInternalServerError:
		writeText(w, ar, http.StatusInternalServerError, "", InternalErrorBody)
	default:
		writeText(w, ar, http.StatusServiceUnavailable, a.unavailable, UnavailableBody)
	}
	return k.status()
}

// PanicError is a panic recovered from a subject function or a limiter, with the stack where it
// happened. It matches admit.ErrUnavailable: the limiter could not decide.
type PanicError struct {
	// Where names what panicked: "subject function" or "limiter".
	Where string
	// Value is what the panic raised.
	Value any
	// Stack is the stack of the goroutine where it happened.
	Stack []byte
}

// Error returns "httplimit: panic in " Where, and Value.
func (e *PanicError) Error() string {
	return fmt.Sprintf("httplimit: panic in %s: %v", e.Where, e.Value)
}

// Unwrap returns admit.ErrUnavailable.
func (e *PanicError) Unwrap() error { return admit.ErrUnavailable }

// Recover, deferred by a function that calls a limiter, turns a panic in it (a bug in a Store,
// say) into a *PanicError of the limiter in *err, so that the request is answered 503 and the
// process keeps serving:
//
//	func decide(ctx context.Context) (res service.Result, err error) {
//		defer httplimit.Recover(&err)
//		return svc.Check(ctx, c)
//	}
//
// http.ErrAbortHandler goes on: it is how a handler aborts a response on purpose.
func Recover(err *error) {
	if v := recover(); v != nil {
		if v == http.ErrAbortHandler {
			panic(v)
		}
		*err = &PanicError{Where: "limiter", Value: v, Stack: debug.Stack()}
	}
}
