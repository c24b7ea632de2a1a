package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/httplimit"
)

var inFlight = admit.Limit{Name: "in-flight", Algorithm: admit.Concurrency, Rate: 2, Period: time.Minute}

// TestConcurrencyNeverAboveLimit runs many requests of one subject at once through a handler that
// holds them a while: no more than the limit ever run at once, the others are answered 429, and
// every lease is released afterwards.
func TestConcurrencyNeverAboveLimit(t *testing.T) {
	store := newMemstore(t)
	lim := newLimiter(t, store, inFlight)
	var running, most atomic.Int64
	h := (&httplimit.Middleware{Limiter: lim, Subject: httplimit.Constant("alice")}).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(2 * time.Millisecond)
		running.Add(-1)
	}))
	var wg sync.WaitGroup
	var ok, limited atomic.Int64
	for range 16 {
		wg.Go(func() {
			for range 25 {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
				switch rec.Code {
				case http.StatusOK:
					ok.Add(1)
				case http.StatusTooManyRequests:
					limited.Add(1)
				default:
					t.Errorf("status %d", rec.Code)
				}
			}
		})
	}
	wg.Wait()
	if most.Load() > inFlight.Rate {
		t.Errorf("%d handlers ran at once; the limit is %d", most.Load(), inFlight.Rate)
	}
	if ok.Load() == 0 || limited.Load() == 0 {
		t.Errorf("%d admitted, %d limited; want some of each from 16 callers on a limit of 2", ok.Load(), limited.Load())
	}
	t.Logf("%d admitted, %d limited, at most %d at once", ok.Load(), limited.Load(), most.Load())
	if d, err := lim.AllowN(t.Context(), admit.Subject{ID: "alice"}, 0); err != nil || d.Remaining != inFlight.Rate {
		t.Errorf("after: %+v, %v; want every lease released", d, err)
	}
}

// TestConcurrencyReleasedOnPanicAndDisconnect checks that a lease is released when the handler
// panics, and when the client went away before the handler returned.
func TestConcurrencyReleasedOnPanicAndDisconnect(t *testing.T) {
	store := newMemstore(t)
	lim := newLimiter(t, store, admit.Limit{Name: "one", Algorithm: admit.Concurrency, Rate: 1, Period: time.Hour})
	panicking := (&httplimit.Middleware{Limiter: lim, Subject: httplimit.Constant("alice")}).Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("handler bug")
	}))
	func() {
		defer func() {
			if v := recover(); v != "handler bug" {
				t.Errorf("recovered %v; want the handler's panic to go on", v)
			}
		}()
		panicking.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	}()
	if d, err := lim.AllowN(t.Context(), admit.Subject{ID: "alice"}, 0); err != nil || d.Remaining != 1 {
		t.Fatalf("after a panic: %+v, %v; want the lease released", d, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	gone := (&httplimit.Middleware{Limiter: lim, Subject: httplimit.Constant("alice")}).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cancel() // the client goes away while the handler runs
		<-r.Context().Done()
	}))
	rec := httptest.NewRecorder()
	gone.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d; want 200", rec.Code)
	}
	if d, err := lim.AllowN(t.Context(), admit.Subject{ID: "alice"}, 0); err != nil || d.Remaining != 1 {
		t.Errorf("after a disconnect: %+v, %v; want the lease released", d, err)
	}
	ok := (&httplimit.Middleware{Limiter: lim, Subject: httplimit.Constant("alice")}).Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	rec = httptest.NewRecorder()
	ok.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("RateLimit-Policy") != `"one";q=1;qu="concurrent-requests"` {
		t.Errorf("%d RateLimit-Policy %q", rec.Code, rec.Header().Get("RateLimit-Policy"))
	}
}
