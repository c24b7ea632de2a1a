package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/transport/httpapi"
)

// storeFunc is a scripted admit.Store, for failures and for proving that a route never calls the
// store.
type storeFunc func(ctx context.Context, key string, lim admit.Limit, n int64) (admit.Decision, error)

func (f storeFunc) Take(ctx context.Context, key string, lim admit.Limit, n int64) (admit.Decision, error) {
	return f(ctx, key, lim, n)
}

// untouchable is a Store that fails t if it is ever called.
func untouchable(t *testing.T) admit.Store {
	return storeFunc(func(context.Context, string, admit.Limit, int64) (admit.Decision, error) {
		t.Error("the store was called")
		return admit.Decision{}, admit.ErrUnavailable
	})
}

// logBuffer keeps log output, safe for concurrent use. A test logs into one rather than into
// t.Output(), which panics if written after the test: the middleware's log summaries are written by
// a timer, up to an interval after the last request.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newHandler(t *testing.T, store admit.Store) *httpapi.Handler {
	t.Helper()
	logs := &logBuffer{}
	t.Cleanup(func() { t.Logf("log:\n%s", logs) })
	h, err := httpapi.New(httpapi.Options{Store: store, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func newMemstore(t *testing.T) *memstore.Store {
	s := memstore.New(memstore.Options{})
	t.Cleanup(func() { s.Close() })
	return s
}

// step is one request and the response it expects; empty want fields are not checked.
type step struct {
	method, path string
	status       int
	body         string
	header       map[string]string
}

func run(t *testing.T, h http.Handler, steps []step) {
	t.Helper()
	for i, s := range steps {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(s.method, s.path, nil))
		where := fmt.Sprintf("step %d: %s %s", i+1, s.method, s.path)
		if rec.Code != s.status {
			t.Errorf("%s: status %d, want %d", where, rec.Code, s.status)
		}
		// A recorder keeps the body of a HEAD response, which a server would not send.
		if got := rec.Body.String(); got != s.body && s.method != http.MethodHead {
			t.Errorf("%s: body %q, want %q", where, got, s.body)
		}
		for k, v := range s.header {
			if got := rec.Header().Values(k); len(got) != 1 || got[0] != v {
				t.Errorf("%s: %s = %q, want %q", where, k, got, v)
			}
		}
	}
}

var (
	okStep = step{method: "GET", path: "/demo", status: 200, body: "ok\n",
		header: map[string]string{"Cache-Control": "no-store"}}
	limitedStep = step{method: "GET", path: "/demo", status: 429, body: "rate limit exceeded\n",
		header: map[string]string{"Retry-After": "10", "Cache-Control": "no-store", "Content-Type": "text/plain; charset=utf-8"}}
	unavailableStep = step{method: "GET", path: "/demo", status: 503, body: "limiter unavailable\n",
		header: map[string]string{"Retry-After": "1", "Cache-Control": "no-store", "Content-Type": "text/plain; charset=utf-8"}}
	healthStep = step{method: "GET", path: "/healthz", status: 200, body: "ok\n"}
)

func TestDemo(t *testing.T) {
	run(t, newHandler(t, newMemstore(t)), []step{okStep, okStep, okStep, limitedStep, limitedStep})
}

func TestDemoUsesDemoKeyAndLimit(t *testing.T) {
	var calls int
	store := storeFunc(func(_ context.Context, key string, lim admit.Limit, n int64) (admit.Decision, error) {
		calls++
		if key != httpapi.DemoKey || lim != httpapi.DemoLimit() || n != 1 {
			t.Errorf("Take(%q, %v, %d), want Take(%q, %v, 1)", key, lim, n, httpapi.DemoKey, httpapi.DemoLimit())
		}
		return admit.Decision{Allowed: true, Limit: lim, Remaining: 2, ResetAfter: lim.Period}, nil
	})
	run(t, newHandler(t, store), []step{okStep})
	if calls != 1 {
		t.Errorf("%d store calls, want 1", calls)
	}
}

func TestDemoHeadCounts(t *testing.T) {
	head := okStep
	head.method = "HEAD"
	run(t, newHandler(t, newMemstore(t)), []step{head, okStep, head, {method: "HEAD", path: "/demo", status: 429}})
}

func TestDemoUnavailable(t *testing.T) {
	store := storeFunc(func(context.Context, string, admit.Limit, int64) (admit.Decision, error) {
		return admit.Decision{}, fmt.Errorf("teststore: %w", admit.ErrUnavailable)
	})
	run(t, newHandler(t, store), []step{unavailableStep, unavailableStep, healthStep})
}

func TestHealthzNeverCallsStore(t *testing.T) {
	head := healthStep
	head.method = "HEAD"
	run(t, newHandler(t, untouchable(t)), []step{healthStep, head, healthStep})
}

func TestMethodNotAllowed(t *testing.T) {
	h := newHandler(t, untouchable(t))
	for _, path := range []string{"/demo", "/healthz"} {
		for _, method := range []string{"POST", "PUT", "DELETE", "PATCH"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
			if rec.Code != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: status %d, want 405", method, path, rec.Code)
			}
			if got := rec.Header().Get("Allow"); got != "GET, HEAD" {
				t.Errorf("%s %s: Allow %q, want %q", method, path, got, "GET, HEAD")
			}
		}
	}
}

func TestNotFound(t *testing.T) {
	run(t, newHandler(t, untouchable(t)), []step{
		{method: "GET", path: "/", status: 404, body: "404 page not found\n"},
		{method: "GET", path: "/demo/x", status: 404, body: "404 page not found\n"},
	})
}

func TestNewWithoutStore(t *testing.T) {
	if _, err := httpapi.New(httpapi.Options{}); err == nil {
		t.Error("New without a Store succeeded")
	}
}
