package guard_test

import (
	"errors"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/guard"
)

// A reset through one cache forgets its own rejections at once; another cache over the same backend
// keeps answering its remembered rejection until it is told to Forget the key (the pub/sub listener
// of admit serve), and then asks the backend, which admits.
func TestOverLimitResetAndForget(t *testing.T) {
	clock := newClock()
	mem := newMem(t, clock)
	a := guard.NewOverLimitCache(mem, guard.OverLimitOptions{Now: clock.Now, MaxAge: time.Minute})
	b := guard.NewOverLimitCache(mem, guard.OverLimitOptions{Now: clock.Now, MaxAge: time.Minute})
	r := admit.Request{Key: "rl:k", Limit: admit.Limit{Name: "p", Algorithm: admit.FixedWindow, Rate: 1, Period: time.Hour}, Cost: 1}
	take(t, a, r)
	for _, c := range []*guard.OverLimitCache{a, b} {
		for range 2 { // the first rejection is learnt, the second answered locally
			if d := take(t, c, r); d.Allowed {
				t.Fatal("a Take of a full key admitted")
			}
		}
	}
	if a.Hits() != 1 || b.Hits() != 1 {
		t.Fatalf("hits %d and %d; want 1 each", a.Hits(), b.Hits())
	}
	if err := a.Reset(t.Context(), []string{r.Key}); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if d := take(t, b, r); d.Allowed || b.Hits() != 2 {
		t.Fatalf("the other cache before Forget: allowed %v, hits %d; want its remembered rejection", d.Allowed, b.Hits())
	}
	b.Forget([]string{r.Key})
	if d := take(t, b, r); !d.Allowed {
		t.Error("the other cache after Forget: rejected; want the backend's admission")
	}
	if d := take(t, a, r); d.Allowed || a.Hits() != 1 {
		t.Errorf("the resetting cache: allowed %v, hits %d; want the backend's rejection of the key b refilled", d.Allowed, a.Hits())
	}
}

// A Breaker treats Reset as any operation: open, it refuses with ErrOpen without the backend (an
// invalid call still says why); closed, it forwards.
func TestBreakerReset(t *testing.T) {
	clock := newClock()
	backend := &switchable{next: newMem(t, clock)}
	counted := &counting{next: backend}
	b := guard.NewBreaker(counted, guard.BreakerOptions{Failures: 1, CoolOff: time.Minute, Now: clock.Now})
	keys := []string{"rl:k"}
	if err := b.Reset(t.Context(), keys); err != nil {
		t.Fatalf("Reset, closed: %v", err)
	}
	backend.down.Store(true)
	wantUnavailable(t, b.Reset(t.Context(), keys), false)
	wantState(t, b, guard.BreakerOpen)
	calls := counted.calls.Load()
	wantUnavailable(t, b.Reset(t.Context(), keys), true)
	if err := b.Reset(t.Context(), nil); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Errorf("Reset of no keys, open: %v; want ErrInvalidRequest", err)
	}
	if counted.calls.Load() != calls {
		t.Errorf("the open Breaker forwarded %d calls", counted.calls.Load()-calls)
	}
}

// FailOpen resets on next, and then its local limiter's state of the keys; when next cannot reset,
// nothing is reset, and the reset does not fail open.
func TestFailOpenReset(t *testing.T) {
	clock := newFailOpenClock()
	backend := &switchable{next: newMem(t, clock)}
	f := newFailOpen(t, backend, guard.FailOpenOptions{Local: halfOf, Now: clock.Now})
	r := admit.Request{Key: "rl:k", Limit: admit.Limit{Name: "p", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Hour}, Cost: 1}
	backend.down.Store(true)
	if d, err := f.Take(t.Context(), r); err != nil || !d.Allowed || !d.Degraded {
		t.Fatalf("a degraded Take: %+v, %v", d, err)
	}
	if d, _ := f.Take(t.Context(), r); d.Allowed {
		t.Fatal("the local limit of 1 admitted twice")
	}
	if err := f.Reset(t.Context(), []string{r.Key}); !errors.Is(err, admit.ErrUnavailable) {
		t.Fatalf("Reset while next is down: %v; want ErrUnavailable", err)
	}
	if d, _ := f.Take(t.Context(), r); d.Allowed {
		t.Fatal("a failed Reset reset the local limiter")
	}
	backend.down.Store(false)
	if err := f.Reset(t.Context(), []string{r.Key}); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	backend.down.Store(true)
	if d, err := f.Take(t.Context(), r); err != nil || !d.Allowed || !d.Degraded {
		t.Errorf("a degraded Take after the Reset: %+v, %v; want the local allowance back", d, err)
	}
}
