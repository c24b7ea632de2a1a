package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/httplimit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/syncbuf"
	"github.com/admit-dev/admit/memstore"
)

var demoLimit = admit.Limit{Name: "demo", Algorithm: admit.FixedWindow, Rate: 3, Period: 10 * time.Second}

// testSecret is the HMAC secret of every test's KeyBuilder.
var testSecret = []byte("httplimit test secret, 32 bytes!")

func newKeys(t testing.TB) *admit.KeyBuilder {
	t.Helper()
	keys, err := admit.NewKeyBuilder(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// newLimiter returns a Limiter over limits on store, with a KeyBuilder on testSecret.
func newLimiter(t testing.TB, store admit.Store, limits ...admit.Limit) *admit.Limiter {
	t.Helper()
	return admit.NewLimiter(store, newKeys(t), limits...)
}

// principal is a SubjectFunc that limits each request as its Test-Principal header: a stand-in for
// an authenticated principal (a real subject function never trusts a raw header).
func principal(r *http.Request) (admit.Subject, error) {
	return admit.Subject{ID: r.Header.Get("Test-Principal")}, nil
}

// get sends GET / as principal p through h and returns the response.
func get(h http.Handler, p string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Test-Principal", p)
	h.ServeHTTP(rec, r)
	return rec
}

// want is the response a step expects.
type want struct {
	status     int
	retryAfter string // "" = no Retry-After field
	body       string
	next       bool // whether the next handler ran
}

var (
	wantOK          = want{status: http.StatusOK, body: "next\n", next: true}
	wantLimited     = want{status: http.StatusTooManyRequests, retryAfter: "10", body: "rate limit exceeded\n"}
	wantUnavailable = want{status: http.StatusServiceUnavailable, retryAfter: "1", body: "limiter unavailable\n"}
	// 400 and 500 carry no Retry-After: the same request will fail the same way.
	wantBadRequest    = want{status: http.StatusBadRequest, body: "bad request\n"}
	wantInternalError = want{status: http.StatusInternalServerError, body: "internal server error\n"}
)

// check sends one GET through h, whose next handler is nextHandler(&ran), and checks the response.
func check(t *testing.T, h http.Handler, ran *bool, w want) {
	t.Helper()
	*ran = false
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
	res := rec.Result()
	if res.StatusCode != w.status {
		t.Errorf("status = %d, want %d", res.StatusCode, w.status)
	}
	if got := rec.Body.String(); got != w.body {
		t.Errorf("body = %q, want %q", got, w.body)
	}
	if *ran != w.next {
		t.Errorf("next handler ran = %v, want %v", *ran, w.next)
	}
	if got := res.Header.Values("Retry-After"); w.retryAfter == "" && len(got) != 0 ||
		w.retryAfter != "" && (len(got) != 1 || got[0] != w.retryAfter) {
		t.Errorf("Retry-After = %q, want %q", got, w.retryAfter)
	}
	if w.status == http.StatusOK {
		return
	}
	for field, value := range map[string]string{
		"Cache-Control":          "no-store",
		"Content-Type":           "text/plain; charset=utf-8",
		"Content-Length":         fmt.Sprint(len(w.body)),
		"X-Content-Type-Options": "nosniff",
	} {
		if got := res.Header.Values(field); len(got) != 1 || got[0] != value {
			t.Errorf("%s = %q, want %q", field, got, value)
		}
	}
}

// TestBodies checks that the exported bodies are the ones the tests expect on the wire.
func TestBodies(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{httplimit.LimitedBody, wantLimited.body},
		{httplimit.UnavailableBody, wantUnavailable.body},
		{httplimit.BadRequestBody, wantBadRequest.body},
		{httplimit.InternalErrorBody, wantInternalError.body},
	} {
		if tc.got != tc.want {
			t.Errorf("body constant %q, want %q", tc.got, tc.want)
		}
	}
}

// nextHandler answers "next\n" and records that it ran.
func nextHandler(ran *bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*ran = true
		fmt.Fprintln(w, "next")
	})
}

func newMemstore(t testing.TB) *memstore.Store {
	s := memstore.New(memstore.Options{})
	t.Cleanup(func() { s.Close() })
	return s
}

// TestWrapRefusesInvalidLimiter: a Limiter with an invalid Limit never becomes a handler that
// answers 500 to every request: Wrap refuses it, saying why, and a valid one passes.
func TestWrapRefusesInvalidLimiter(t *testing.T) {
	for name, limits := range map[string][]admit.Limit{
		"rate 0":          {{Name: "a", Algorithm: admit.FixedWindow, Rate: 0, Period: time.Second}},
		"no limits":       nil,
		"too many limits": make([]admit.Limit, bound.MaxRequests+1),
		"repeated name":   {demoLimit, demoLimit},
		"unnamed limit":   {{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Second}},
	} {
		l := newLimiter(t, newMemstore(t), limits...)
		if err := l.Validate(); !errors.Is(err, admit.ErrInvalidLimit) {
			t.Errorf("%s: Validate() = %v; want admit.ErrInvalidLimit", name, err)
		}
		func() {
			defer func() {
				if v := recover(); v == nil || !strings.Contains(fmt.Sprint(v), "invalid limit") {
					t.Errorf("%s: Wrap panicked with %v; want a panic saying the limit is invalid", name, v)
				}
			}()
			h := (&httplimit.Middleware{Limiter: l, Subject: httplimit.Constant("a"), Logger: slog.New(slog.DiscardHandler)}).Wrap(http.NotFoundHandler())
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			t.Errorf("%s: Wrap made a handler, which answered %d", name, rec.Code)
		}()
	}
	l := newLimiter(t, newMemstore(t), demoLimit)
	if err := l.Validate(); err != nil {
		t.Fatalf("a valid Limiter: Validate() = %v", err)
	}
	rec := httptest.NewRecorder()
	(&httplimit.Middleware{Limiter: l, Subject: httplimit.Constant("a")}).Wrap(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("a valid Limiter: %d; want the next handler's 404", rec.Code)
	}
}

func TestMiddlewareLimits(t *testing.T) {
	var ran bool
	m := &httplimit.Middleware{
		Limiter: newLimiter(t, newMemstore(t), demoLimit),
		Subject: httplimit.Constant("a"),
	}
	h := m.Wrap(nextHandler(&ran))
	for i, w := range []want{wantOK, wantOK, wantOK, wantLimited, wantLimited} {
		t.Logf("request %d", i+1)
		check(t, h, &ran, w)
	}
}

func TestMiddlewareLimitsSubjectsSeparately(t *testing.T) {
	var ran bool
	m := &httplimit.Middleware{
		Limiter: newLimiter(t, newMemstore(t), admit.Limit{Name: "test", Algorithm: admit.FixedWindow, Rate: 1, Period: time.Minute}),
		Subject: principal,
	}
	h := m.Wrap(nextHandler(&ran))
	for _, step := range []struct {
		principal string
		want      int
	}{{"a", 200}, {"b", 200}, {"a", 429}, {"b", 429}, {"c", 200}} {
		if got := get(h, step.principal).Code; got != step.want {
			t.Errorf("principal %s: status %d, want %d", step.principal, got, step.want)
		}
	}
}

// TestConstant checks that Constant makes every request its one subject, whatever the request, and
// that two Constant subjects are limited apart.
func TestConstant(t *testing.T) {
	limiter := newLimiter(t, newMemstore(t), admit.Limit{Name: "test", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Minute})
	a := (&httplimit.Middleware{Limiter: limiter, Subject: httplimit.Constant("a")}).Wrap(http.NotFoundHandler())
	b := (&httplimit.Middleware{Limiter: limiter, Subject: httplimit.Constant("b")}).Wrap(http.NotFoundHandler())
	for i, step := range []struct {
		h         http.Handler
		principal string
		want      int
	}{{a, "x", 404}, {a, "y", 404}, {a, "z", 429}, {b, "x", 404}, {b, "x", 404}, {b, "y", 429}} {
		if got := get(step.h, step.principal).Code; got != step.want {
			t.Errorf("step %d: status %d, want %d", i+1, got, step.want)
		}
	}
	for _, subject := range []string{"", "a", "{x}", strings.Repeat("s", 1000)} {
		got, err := httplimit.Constant(subject)(httptest.NewRequest(http.MethodGet, "/", nil))
		if err != nil || got != (admit.Subject{ID: subject}) {
			t.Errorf("Constant(%.10q) = %+v, %v; want {ID: %.10q}, nil", subject, got, err, subject)
		}
	}
}

// TestMiddlewareTakesOneUnitOfTheSubject checks the Request the middleware makes: one unit of the
// subject the subject function returns, slot subject and all, keyed by the Limiter's KeyBuilder
// (its override key too), with no request ID.
func TestMiddlewareTakesOneUnitOfTheSubject(t *testing.T) {
	subject := admit.Subject{ID: "alice", Slot: "tenant-7"}
	wantKey, err := newKeys(t).Key(demoLimit, bound.DefaultVersion, subject)
	if err != nil {
		t.Fatal(err)
	}
	wantOverride, err := newKeys(t).OverrideKey(demoLimit.Name, subject)
	if err != nil {
		t.Fatal(err)
	}
	var calls int
	store := storeFunc(func(_ context.Context, r admit.Request) (admit.Decision, error) {
		calls++
		if want := (admit.Request{Key: wantKey, Limit: demoLimit, Cost: 1, OverrideKey: wantOverride}); r != want {
			t.Errorf("Take(%+v), want Take(%+v)", r, want)
		}
		return admit.Decision{Allowed: true, Limit: r.Limit, Remaining: 2}, nil
	})
	var ran bool
	m := &httplimit.Middleware{
		Limiter: newLimiter(t, store, demoLimit),
		Subject: func(*http.Request) (admit.Subject, error) { return subject, nil },
	}
	check(t, m.Wrap(nextHandler(&ran)), &ran, wantOK)
	if calls != 1 {
		t.Errorf("%d store calls, want 1", calls)
	}
}

// TestMiddlewareTwoPolicies checks a Limiter over two policies: a request is answered 429 when
// either rejects it, with the Retry-After of the one that rejected, and then consumes from neither.
func TestMiddlewareTwoPolicies(t *testing.T) {
	store := newMemstore(t)
	keys := newKeys(t)
	burst := admit.Limit{Name: "burst", Algorithm: admit.FixedWindow, Rate: 2, Period: 10 * time.Second}
	hourly := admit.Limit{Name: "hourly", Algorithm: admit.FixedWindow, Rate: 3, Period: time.Hour}
	var ran bool
	h := (&httplimit.Middleware{Limiter: admit.NewLimiter(store, keys, burst, hourly), Subject: principal}).Wrap(nextHandler(&ran))

	// remaining peeks at what subject p has left under lim, consuming nothing.
	remaining := func(lim admit.Limit, p string) int64 {
		t.Helper()
		d, err := admit.NewLimiter(store, keys, lim).AllowN(context.Background(), admit.Subject{ID: p}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return d.Remaining
	}
	statuses := func(p string, want ...int) {
		t.Helper()
		for i, w := range want {
			rec := get(h, p)
			if rec.Code != w {
				t.Errorf("%s, request %d: status %d, want %d", p, i+1, rec.Code, w)
			}
			if w == http.StatusTooManyRequests {
				if ra := rec.Header().Get("Retry-After"); ra == "" {
					t.Errorf("%s, request %d: 429 without Retry-After", p, i+1)
				}
			}
		}
	}

	// The first policy rejects, the second would admit: nothing is taken from the second.
	statuses("a", 200, 200, 429, 429)
	if rec := get(h, "a"); rec.Header().Get("Retry-After") != "10" {
		t.Errorf("a: Retry-After %q, want the burst policy's 10", rec.Header().Get("Retry-After"))
	}
	if got := remaining(hourly, "a"); got != 1 {
		t.Errorf("a: hourly has %d left after 2 admitted requests and 3 rejected, want 1", got)
	}

	// The second policy rejects, the first would admit: nothing is taken from the first.
	if _, err := admit.NewLimiter(store, keys, hourly).AllowN(context.Background(), admit.Subject{ID: "b"}, 3); err != nil {
		t.Fatal(err)
	}
	statuses("b", 429, 429)
	if rec := get(h, "b"); rec.Header().Get("Retry-After") != "3600" {
		t.Errorf("b: Retry-After %q, want the hourly policy's 3600", rec.Header().Get("Retry-After"))
	}
	if got := remaining(burst, "b"); got != 2 {
		t.Errorf("b: burst has %d left after 3 rejected requests, want all 2", got)
	}
	if ran = false; get(h, "c").Code != 200 || !ran {
		t.Error("c: a fresh subject was not admitted")
	}
}

// storeFunc is a scripted admit.Store, used only for failures a real store cannot be made to show.
// Its TakeAll calls the func for each Request in turn: it is not all-or-nothing.
type storeFunc func(ctx context.Context, r admit.Request) (admit.Decision, error)

func (f storeFunc) Take(ctx context.Context, r admit.Request) (admit.Decision, error) {
	return f(ctx, r)
}

func (f storeFunc) TakeAll(ctx context.Context, rs []admit.Request, ds []admit.Decision) (bool, error) {
	all := true
	for i, r := range rs {
		d, err := f(ctx, r)
		if err != nil {
			return false, err
		}
		ds[i], all = d, all && d.Allowed
	}
	return all, nil
}

func (f storeFunc) Release(context.Context, admit.Lease) error { return errors.ErrUnsupported }

func (f storeFunc) Settle(context.Context, admit.Reservation, int64) (admit.Decision, error) {
	return admit.Decision{}, errors.ErrUnsupported
}

func (f storeFunc) Reset(context.Context, []string) error { return errors.ErrUnsupported }

func failingStore(err error) admit.Store {
	return storeFunc(func(context.Context, admit.Request) (admit.Decision, error) {
		return admit.Decision{}, err
	})
}

// TestMiddlewareNotAdmitted runs every way a request can fail other than over the limit, twice:
// each is answered its status, body and fields, never reaches next, and is logged once at its level
// with the names of the limiter's policies (the second record of a kind within the log interval is
// counted, not written).
func TestMiddlewareNotAdmitted(t *testing.T) {
	malformed := func(*http.Request) (admit.Subject, error) {
		return admit.Subject{}, fmt.Errorf("test: X-Forwarded-For %q: %w", "not-an-ip", httplimit.ErrMalformedRequest)
	}
	second := admit.Limit{Name: "second", Algorithm: admit.FixedWindow, Rate: 5, Period: time.Minute}
	for _, tc := range []struct {
		name      string
		store     admit.Store
		limits    []admit.Limit
		subject   httplimit.SubjectFunc
		want      want
		wantLevel string
		wantMsg   string
		wantLimit string // the limit attribute; "" means demo
	}{{
		name:      "malformed request",
		subject:   malformed,
		want:      wantBadRequest,
		wantLevel: "INFO",
		wantMsg:   `"malformed request"`,
	}, {
		name: "malformed request, wrapped twice",
		subject: func(r *http.Request) (admit.Subject, error) {
			_, err := malformed(r)
			return admit.Subject{}, fmt.Errorf("subject: %w", err)
		},
		want:      wantBadRequest,
		wantLevel: "INFO",
		wantMsg:   `"malformed request"`,
	}, {
		name:      "subject error",
		subject:   func(*http.Request) (admit.Subject, error) { return admit.Subject{}, errors.New("no principal") },
		want:      wantUnavailable,
		wantLevel: "WARN",
		wantMsg:   `"cannot find the request's subject"`,
	}, {
		// Only the subject function's own verdict is a 400, and its other errors are 503s, even
		// ones that would mean 500 from the limiter.
		name: "subject error matching ErrInvalidRequest",
		subject: func(*http.Request) (admit.Subject, error) {
			return admit.Subject{}, fmt.Errorf("test: %w", admit.ErrInvalidRequest)
		},
		want:      wantUnavailable,
		wantLevel: "WARN",
		wantMsg:   `"cannot find the request's subject"`,
	}, {
		name: "subject error matching ErrMisconfigured",
		subject: func(*http.Request) (admit.Subject, error) {
			return admit.Subject{}, fmt.Errorf("test: %w", httplimit.ErrMisconfigured)
		},
		want:      wantInternalError,
		wantLevel: "ERROR",
		wantMsg:   `"server misconfigured"`,
	}, {
		name:      "no principal",
		subject:   httplimit.Principal,
		want:      wantInternalError,
		wantLevel: "ERROR",
		wantMsg:   `"server misconfigured"`,
	}, {
		name:      "client IP of a peer that has none",
		subject:   func(r *http.Request) (admit.Subject, error) { r.RemoteAddr = "@"; return clientIPOfPeer.Subject(r) },
		want:      wantInternalError,
		wantLevel: "ERROR",
		wantMsg:   `"server misconfigured"`,
	}, {
		name:      "subject panic",
		subject:   func(*http.Request) (admit.Subject, error) { panic("boom") },
		want:      wantUnavailable,
		wantLevel: "ERROR",
		wantMsg:   `"panic in limiter"`,
	}, {
		name:      "subject nil-pointer panic",
		subject:   func(r *http.Request) (admit.Subject, error) { var p *admit.Subject; return *p, nil },
		want:      wantUnavailable,
		wantLevel: "ERROR",
		wantMsg:   `"panic in limiter"`,
	}, {
		name: "store panic",
		store: storeFunc(func(context.Context, admit.Request) (admit.Decision, error) {
			panic("store bug")
		}),
		want:      wantUnavailable,
		wantLevel: "ERROR",
		wantMsg:   `"panic in limiter"`,
	}, {
		name:      "unavailable",
		store:     failingStore(fmt.Errorf("teststore: dial: %w", admit.ErrUnavailable)),
		want:      wantUnavailable,
		wantLevel: "WARN",
		wantMsg:   `"limiter unavailable"`,
	}, {
		name:      "unavailable, two policies",
		store:     failingStore(fmt.Errorf("teststore: dial: %w", admit.ErrUnavailable)),
		limits:    []admit.Limit{demoLimit, second},
		want:      wantUnavailable,
		wantLevel: "WARN",
		wantMsg:   `"limiter unavailable"`,
		wantLimit: "demo,second",
	}, {
		name:      "corrupt state",
		store:     failingStore(fmt.Errorf("teststore: %w", admit.ErrCorruptState)),
		want:      wantUnavailable,
		wantLevel: "ERROR",
		wantMsg:   `"corrupt limiter state"`,
	}, {
		name:      "unclassified store error",
		store:     failingStore(errors.New("teststore: surprise")),
		want:      wantUnavailable,
		wantLevel: "WARN",
		wantMsg:   `"limiter unavailable"`,
	}, {
		name:      "store error matching ErrMalformedRequest",
		store:     failingStore(fmt.Errorf("teststore: %w", httplimit.ErrMalformedRequest)),
		want:      wantUnavailable,
		wantLevel: "WARN",
		wantMsg:   `"limiter unavailable"`,
	}, {
		name: "store panic",
		store: storeFunc(func(context.Context, admit.Request) (admit.Decision, error) {
			panic(errors.New("boom"))
		}),
		want:      wantUnavailable,
		wantLevel: "ERROR",
		wantMsg:   `"panic in limiter"`,
	}, {
		name:      "invalid request (empty subject)",
		subject:   httplimit.Constant(""),
		want:      wantInternalError,
		wantLevel: "ERROR",
		wantMsg:   `"invalid limit or request"`,
	}, {
		name:      "invalid request (oversized subject)",
		subject:   httplimit.Constant(strings.Repeat("s", bound.MaxSubjectLen+1)),
		want:      wantInternalError,
		wantLevel: "ERROR",
		wantMsg:   `"invalid limit or request"`,
	}, {
		name: "invalid request (oversized slot subject)",
		subject: func(*http.Request) (admit.Subject, error) {
			return admit.Subject{ID: "a", Slot: strings.Repeat("s", bound.MaxSubjectLen+1)}, nil
		},
		want:      wantInternalError,
		wantLevel: "ERROR",
		wantMsg:   `"invalid limit or request"`,
	}, {
		name:      "invalid request from the store",
		store:     failingStore(fmt.Errorf("teststore: %w", admit.ErrInvalidRequest)),
		want:      wantInternalError,
		wantLevel: "ERROR",
		wantMsg:   `"invalid limit or request"`,
	}, {
		name:      "invalid limit from the store",
		store:     failingStore(fmt.Errorf("teststore: %w", admit.ErrInvalidLimit)),
		want:      wantInternalError,
		wantLevel: "ERROR",
		wantMsg:   `"invalid limit or request"`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.store == nil {
				tc.store = newMemstore(t)
			}
			if tc.limits == nil {
				tc.limits = []admit.Limit{demoLimit}
			}
			if tc.subject == nil {
				tc.subject = httplimit.Constant("a")
			}
			if tc.wantLimit == "" {
				tc.wantLimit = "demo"
			}
			var logs syncbuf.Buffer
			var ran bool
			m := &httplimit.Middleware{
				Limiter: newLimiter(t, tc.store, tc.limits...),
				Subject: tc.subject,
				Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
			}
			h := m.Wrap(nextHandler(&ran))
			check(t, h, &ran, tc.want)
			check(t, h, &ran, tc.want) // and the handler keeps working
			lines := logs.Lines()
			t.Logf("log:\n%s", strings.Join(lines, "\n"))
			if len(lines) != 1 {
				t.Fatalf("got %d log lines, want 1 (the second within the log interval is counted)", len(lines))
			}
			for _, s := range []string{"level=" + tc.wantLevel + " ", "msg=" + tc.wantMsg + " ", "limit=" + tc.wantLimit + " ", "error="} {
				if !strings.Contains(lines[0], s) {
					t.Errorf("log line lacks %q", s)
				}
			}
		})
	}
}

// clientIPOfPeer finds the client address of a server without proxies: the TCP peer.
var clientIPOfPeer, _ = httplimit.NewClientIP(httplimit.ClientIPConfig{})

func TestMiddlewareUnavailableRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{{0, "1"}, {-time.Second, "1"}, {time.Millisecond, "1"}, {1500 * time.Millisecond, "2"}, {30 * time.Second, "30"}} {
		var ran bool
		m := &httplimit.Middleware{
			Limiter:               newLimiter(t, failingStore(admit.ErrUnavailable), demoLimit),
			Subject:               httplimit.Constant("k"),
			Logger:                slog.New(slog.DiscardHandler),
			UnavailableRetryAfter: tc.d,
		}
		w := wantUnavailable
		w.retryAfter = tc.want
		t.Logf("UnavailableRetryAfter %v", tc.d)
		check(t, m.Wrap(nextHandler(&ran)), &ran, w)
	}
}

func TestMiddlewareRetryAfterRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{{0, "1"}, {time.Nanosecond, "1"}, {time.Second, "1"}, {time.Second + time.Millisecond, "2"}, {90 * time.Second, "90"}} {
		var ran bool
		m := &httplimit.Middleware{
			Limiter: newLimiter(t, storeFunc(func(_ context.Context, r admit.Request) (admit.Decision, error) {
				return admit.Decision{Limit: r.Limit, RetryAfter: tc.d, ResetAfter: tc.d}, nil
			}), demoLimit),
			Subject: httplimit.Constant("k"),
		}
		w := wantLimited
		w.retryAfter = tc.want
		t.Logf("RetryAfter %v", tc.d)
		check(t, m.Wrap(nextHandler(&ran)), &ran, w)
	}
}

type ctxKey struct{}

func TestMiddlewareUsesRequestContext(t *testing.T) {
	var got any
	m := &httplimit.Middleware{
		Limiter: newLimiter(t, storeFunc(func(ctx context.Context, r admit.Request) (admit.Decision, error) {
			got = ctx.Value(ctxKey{})
			return admit.Decision{Allowed: true, Limit: r.Limit}, nil
		}), demoLimit),
		Subject: httplimit.Constant("k"),
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, "mine"))
	m.Wrap(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), r)
	if got != "mine" {
		t.Errorf("limiter saw context value %v, want the request's", got)
	}
}

func TestMiddlewareCanceledRequestLogsInfo(t *testing.T) {
	var logs syncbuf.Buffer
	var ran bool
	m := &httplimit.Middleware{
		Limiter: newLimiter(t, storeFunc(func(ctx context.Context, _ admit.Request) (admit.Decision, error) {
			<-ctx.Done()
			return admit.Decision{}, fmt.Errorf("teststore: %w: %w", admit.ErrUnavailable, ctx.Err())
		}), demoLimit),
		Subject: httplimit.Constant("k"),
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	m.Wrap(nextHandler(&ran)).ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil))
	if rec.Code != http.StatusServiceUnavailable || ran {
		t.Errorf("status %d, next ran %v; want 503 without next", rec.Code, ran)
	}
	if !strings.Contains(logs.String(), "level=INFO ") {
		t.Errorf("log = %q, want an INFO record", logs.String())
	}
}

func TestMiddlewareDoesNotRecoverNext(t *testing.T) {
	m := &httplimit.Middleware{Limiter: newLimiter(t, newMemstore(t), demoLimit), Subject: httplimit.Constant("k")}
	h := m.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("next") }))
	defer func() {
		if v := recover(); v != "next" {
			t.Errorf("recovered %v, want the next handler's panic", v)
		}
	}()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	t.Error("ServeHTTP returned, want the next handler's panic")
}

func TestWrapPanicsOnMissingFields(t *testing.T) {
	lim := newLimiter(t, failingStore(admit.ErrUnavailable), demoLimit)
	for name, wrap := range map[string]func(){
		"no limiter": func() { (&httplimit.Middleware{Subject: httplimit.Constant("k")}).Wrap(http.NotFoundHandler()) },
		"no subject": func() { (&httplimit.Middleware{Limiter: lim}).Wrap(http.NotFoundHandler()) },
		"no next":    func() { (&httplimit.Middleware{Limiter: lim, Subject: httplimit.Constant("k")}).Wrap(nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Wrap did not panic", name)
				}
			}()
			wrap()
		}()
	}
}

// TestMiddlewareConcurrent checks exactness through the middleware: of many concurrent requests on
// one subject, exactly Rate reach the next handler.
func TestMiddlewareConcurrent(t *testing.T) {
	var mu sync.Mutex
	admitted := 0
	m := &httplimit.Middleware{Limiter: newLimiter(t, newMemstore(t), demoLimit), Subject: httplimit.Constant("k")}
	h := m.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		mu.Lock()
		admitted++
		mu.Unlock()
	}))
	var wg sync.WaitGroup
	codes := make([]int, 64)
	for i := range codes {
		wg.Go(func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			codes[i] = rec.Code
		})
	}
	wg.Wait()
	count := map[int]int{}
	for _, c := range codes {
		count[c]++
	}
	if admitted != 3 || count[200] != 3 || count[429] != len(codes)-3 {
		t.Errorf("admitted %d, statuses %v; want 3 admitted, 3×200, %d×429", admitted, count, len(codes)-3)
	}
}

func (storeFunc) SetOverride(context.Context, admit.Override) error { return errors.ErrUnsupported }
func (storeFunc) Override(context.Context, string) (admit.Override, bool, error) {
	return admit.Override{}, false, errors.ErrUnsupported
}
func (storeFunc) DeleteOverride(context.Context, string) (bool, error) {
	return false, errors.ErrUnsupported
}
func (storeFunc) Overrides(context.Context, string, string, int) ([]admit.Override, string, error) {
	return nil, "", errors.ErrUnsupported
}
func (storeFunc) OverrideCount(context.Context, string) (int64, error) {
	return 0, errors.ErrUnsupported
}
