package httplimit_test

import (
	"bytes"
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
	"github.com/admit-dev/admit/memstore"
)

var demoLimit = admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: 10 * time.Second}

// constKey is a KeyFunc that keys every request alike.
func constKey(key string) httplimit.KeyFunc {
	return func(*http.Request) (string, error) { return key, nil }
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

func TestMiddlewareLimits(t *testing.T) {
	var ran bool
	m := &httplimit.Middleware{
		Limiter: admit.NewLimiter(newMemstore(t), demoLimit),
		Key:     constKey("rl:test:v1:{a}"),
	}
	h := m.Wrap(nextHandler(&ran))
	for i, w := range []want{wantOK, wantOK, wantOK, wantLimited, wantLimited} {
		t.Logf("request %d", i+1)
		check(t, h, &ran, w)
	}
}

func TestMiddlewareKeysSeparately(t *testing.T) {
	var ran bool
	m := &httplimit.Middleware{
		Limiter: admit.NewLimiter(newMemstore(t), admit.Limit{Algorithm: admit.FixedWindow, Rate: 1, Period: time.Minute}),
		Key: func(r *http.Request) (string, error) {
			return "rl:test:v1:{" + r.Header.Get("Test-Principal") + "}", nil
		},
	}
	h := m.Wrap(nextHandler(&ran))
	status := func(principal string) int {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Test-Principal", principal)
		h.ServeHTTP(rec, r)
		return rec.Code
	}
	for _, step := range []struct {
		principal string
		want      int
	}{{"a", 200}, {"b", 200}, {"a", 429}, {"b", 429}, {"c", 200}} {
		if got := status(step.principal); got != step.want {
			t.Errorf("principal %s: status %d, want %d", step.principal, got, step.want)
		}
	}
}

// storeFunc is a scripted admit.Store, used only for failures a real store cannot be made to show.
type storeFunc func(ctx context.Context, key string, lim admit.Limit, n int64) (admit.Decision, error)

func (f storeFunc) Take(ctx context.Context, key string, lim admit.Limit, n int64) (admit.Decision, error) {
	return f(ctx, key, lim, n)
}

func failingStore(err error) admit.Store {
	return storeFunc(func(context.Context, string, admit.Limit, int64) (admit.Decision, error) {
		return admit.Decision{}, err
	})
}

// logBuffer is an io.Writer that keeps log output, safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the lines logged so far.
func (b *logBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.TrimSpace(b.buf.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// TestMiddlewareNotAdmitted runs every way a request can fail other than over the limit, twice:
// each is answered its status, body and fields, never reaches next, and is logged once at its level
// (the second record of a kind within the log interval is counted, not written).
func TestMiddlewareNotAdmitted(t *testing.T) {
	malformed := func(*http.Request) (string, error) {
		return "", fmt.Errorf("test: X-Forwarded-For %q: %w", "not-an-ip", httplimit.ErrMalformedRequest)
	}
	for _, tc := range []struct {
		name      string
		store     admit.Store
		limit     admit.Limit
		key       httplimit.KeyFunc
		want      want
		wantLevel string
		wantMsg   string
	}{{
		name:      "malformed request",
		key:       malformed,
		want:      wantBadRequest,
		wantLevel: "INFO",
		wantMsg:   `"malformed request"`,
	}, {
		name: "malformed request, wrapped twice",
		key: func(r *http.Request) (string, error) {
			_, err := malformed(r)
			return "", fmt.Errorf("subject: %w", err)
		},
		want:      wantBadRequest,
		wantLevel: "INFO",
		wantMsg:   `"malformed request"`,
	}, {
		name:      "key error",
		key:       func(*http.Request) (string, error) { return "", errors.New("no principal") },
		want:      wantUnavailable,
		wantLevel: "WARN",
		wantMsg:   `"cannot key request"`,
	}, {
		// Only the key function's own verdict is a 400, and its other errors are 503s, even
		// ones that would mean 500 from the limiter.
		name:      "key error matching ErrInvalidRequest",
		key:       func(*http.Request) (string, error) { return "", fmt.Errorf("test: %w", admit.ErrInvalidRequest) },
		want:      wantUnavailable,
		wantLevel: "WARN",
		wantMsg:   `"cannot key request"`,
	}, {
		name:      "key panic",
		key:       func(*http.Request) (string, error) { panic("boom") },
		want:      wantUnavailable,
		wantLevel: "ERROR",
		wantMsg:   `"panic in limiter"`,
	}, {
		name:      "key nil-pointer panic",
		key:       func(r *http.Request) (string, error) { var p *struct{ s string }; return p.s, nil },
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
		store: storeFunc(func(context.Context, string, admit.Limit, int64) (admit.Decision, error) {
			panic(errors.New("boom"))
		}),
		want:      wantUnavailable,
		wantLevel: "ERROR",
		wantMsg:   `"panic in limiter"`,
	}, {
		name:      "invalid limit",
		limit:     admit.Limit{Algorithm: admit.FixedWindow, Rate: 0, Period: time.Second},
		want:      wantInternalError,
		wantLevel: "ERROR",
		wantMsg:   `"invalid limit or request"`,
	}, {
		name:      "invalid request (empty key)",
		key:       constKey(""),
		want:      wantInternalError,
		wantLevel: "ERROR",
		wantMsg:   `"invalid limit or request"`,
	}, {
		name:      "invalid request (oversized key)",
		key:       constKey(strings.Repeat("k", admit.MaxKeyLen+1)),
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
			if tc.limit == (admit.Limit{}) {
				tc.limit = demoLimit
			}
			if tc.key == nil {
				tc.key = constKey("rl:test:v1:{a}")
			}
			var logs logBuffer
			var ran bool
			m := &httplimit.Middleware{
				Limiter: admit.NewLimiter(tc.store, tc.limit),
				Key:     tc.key,
				Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
			}
			h := m.Wrap(nextHandler(&ran))
			check(t, h, &ran, tc.want)
			check(t, h, &ran, tc.want) // and the handler keeps working
			lines := logs.lines()
			t.Logf("log:\n%s", strings.Join(lines, "\n"))
			if len(lines) != 1 {
				t.Fatalf("got %d log lines, want 1 (the second within the log interval is counted)", len(lines))
			}
			for _, s := range []string{"level=" + tc.wantLevel + " ", "msg=" + tc.wantMsg + " ", "error="} {
				if !strings.Contains(lines[0], s) {
					t.Errorf("log line lacks %q", s)
				}
			}
		})
	}
}

func TestMiddlewareUnavailableRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{{0, "1"}, {-time.Second, "1"}, {time.Millisecond, "1"}, {1500 * time.Millisecond, "2"}, {30 * time.Second, "30"}} {
		var ran bool
		m := &httplimit.Middleware{
			Limiter:               admit.NewLimiter(failingStore(admit.ErrUnavailable), demoLimit),
			Key:                   constKey("k"),
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
			Limiter: admit.NewLimiter(storeFunc(func(_ context.Context, _ string, lim admit.Limit, _ int64) (admit.Decision, error) {
				return admit.Decision{Limit: lim, RetryAfter: tc.d, ResetAfter: tc.d}, nil
			}), demoLimit),
			Key: constKey("k"),
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
		Limiter: admit.NewLimiter(storeFunc(func(ctx context.Context, _ string, lim admit.Limit, _ int64) (admit.Decision, error) {
			got = ctx.Value(ctxKey{})
			return admit.Decision{Allowed: true, Limit: lim}, nil
		}), demoLimit),
		Key: constKey("k"),
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, "mine"))
	m.Wrap(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), r)
	if got != "mine" {
		t.Errorf("limiter saw context value %v, want the request's", got)
	}
}

func TestMiddlewareCanceledRequestLogsInfo(t *testing.T) {
	var logs bytes.Buffer
	var ran bool
	m := &httplimit.Middleware{
		Limiter: admit.NewLimiter(storeFunc(func(ctx context.Context, _ string, _ admit.Limit, _ int64) (admit.Decision, error) {
			<-ctx.Done()
			return admit.Decision{}, fmt.Errorf("teststore: %w: %w", admit.ErrUnavailable, ctx.Err())
		}), demoLimit),
		Key:    constKey("k"),
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
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
	m := &httplimit.Middleware{Limiter: admit.NewLimiter(newMemstore(t), demoLimit), Key: constKey("k")}
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
	lim := admit.NewLimiter(failingStore(admit.ErrUnavailable), demoLimit)
	for name, wrap := range map[string]func(){
		"no limiter": func() { (&httplimit.Middleware{Key: constKey("k")}).Wrap(http.NotFoundHandler()) },
		"no key":     func() { (&httplimit.Middleware{Limiter: lim}).Wrap(http.NotFoundHandler()) },
		"no next":    func() { (&httplimit.Middleware{Limiter: lim, Key: constKey("k")}).Wrap(nil) },
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
// one key, exactly Rate reach the next handler.
func TestMiddlewareConcurrent(t *testing.T) {
	var mu sync.Mutex
	admitted := 0
	m := &httplimit.Middleware{Limiter: admit.NewLimiter(newMemstore(t), demoLimit), Key: constKey("k")}
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
