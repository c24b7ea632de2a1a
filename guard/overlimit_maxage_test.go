package guard_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/guard"
	"github.com/admit-dev/admit/limittest"
	"github.com/admit-dev/admit/memstore"
)

// daily is a policy of a day: a rejection under it has a RetryAfter of up to 24 h.
var daily = admit.Limit{Name: "daily", Algorithm: admit.FixedWindow, Rate: 2, Period: 24 * time.Hour}

// swappable is a Store whose backend state can be thrown away, as an operator's DEL or a
// FLUSHALL does to Redis: reset replaces its memstore with an empty one. It counts its Takes and
// TakeAlls.
type swappable struct {
	clock *limittest.Clock
	mu    sync.Mutex
	s     *memstore.Store
	old   []*memstore.Store
	calls atomic.Int64
}

func newSwappable(t *testing.T, clock *limittest.Clock) *swappable {
	w := &swappable{clock: clock}
	w.reset()
	t.Cleanup(func() {
		for _, s := range append(w.old, w.s) {
			s.Close()
		}
	})
	return w
}

// reset forgets every key.
func (w *swappable) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.s != nil {
		w.old = append(w.old, w.s)
	}
	w.s = memstore.New(memstore.Options{Now: w.clock.Now, SweepInterval: -1})
}

func (w *swappable) store() *memstore.Store {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.s
}

func (w *swappable) Take(ctx context.Context, r admit.Request) (admit.Decision, error) {
	w.calls.Add(1)
	return w.store().Take(ctx, r)
}

func (w *swappable) TakeAll(ctx context.Context, rs []admit.Request, ds []admit.Decision) (bool, error) {
	w.calls.Add(1)
	return w.store().TakeAll(ctx, rs, ds)
}

func (w *swappable) Release(ctx context.Context, l admit.Lease) error {
	return w.store().Release(ctx, l)
}

func (w *swappable) Settle(ctx context.Context, res admit.Reservation, actual int64) (admit.Decision, error) {
	return w.store().Settle(ctx, res, actual)
}

func (w *swappable) Reset(ctx context.Context, keys []string) error {
	return w.store().Reset(ctx, keys)
}

// A rejection with a RetryAfter of a day is remembered for at most a second by default: a client
// hammering the full key costs one backend call a second, each answer in between is local, and
// a reset of the backend's state (an operator's DEL, a FLUSHALL) is seen within that second.
func TestOverLimitMaxAgeDefault(t *testing.T) {
	clock := newClock()
	backend := newSwappable(t, clock)
	cache := guard.NewOverLimitCache(backend, guard.OverLimitOptions{Now: clock.Now})
	r := admit.Request{Key: "rl:daily:alice", Limit: daily, Cost: 1}
	take(t, cache, r)
	take(t, cache, r)
	first := take(t, cache, r)
	if first.Allowed || first.RetryAfter < 23*time.Hour {
		t.Fatalf("third Take: %+v; want rejected for about a day", first)
	}
	calls := backend.calls.Load() // 3

	// Hammer for 10 s in steps of 10 ms: one backend call per second of it, when the rejection
	// learnt is a second old (at 1 s, 2 s, … 9 s), no more.
	for step := range 1000 {
		for range 20 {
			if d := take(t, cache, r); d.Allowed || d.RetryAfter < 23*time.Hour {
				t.Fatalf("step %d: %+v; want rejected for about a day", step, d)
			}
		}
		clock.Advance(10 * time.Millisecond)
	}
	if got, want := backend.calls.Load()-calls, int64(9); got != want {
		t.Fatalf("%d backend calls while hammering a full key for 10 s, want %d: one per second", got, want)
	}

	// The operator resets the key: within a second, the cache answers as the backend does.
	backend.reset()
	start := clock.Now()
	for {
		d := take(t, cache, r)
		if d.Allowed {
			break
		}
		if waited := clock.Now().Sub(start); waited > time.Second {
			t.Fatalf("still rejected %v after the backend's state was reset: %+v", waited, d)
		}
		clock.Advance(10 * time.Millisecond)
	}
	t.Logf("admitted %v after the reset", clock.Now().Sub(start))
}

// Callers hammering one full key at once when its remembered rejection has aged out cost one
// backend call between them: the others wait for its answer instead of asking too. So do TakeAlls.
func TestOverLimitMaxAgeOneRefresh(t *testing.T) {
	r := admit.Request{Key: "{bob}:daily", Limit: daily, Cost: 1}
	for _, call := range []struct {
		name string
		take func(admit.Store) (bool, error)
	}{
		{"Take", func(s admit.Store) (bool, error) {
			d, err := s.Take(context.Background(), r)
			return d.Allowed, err
		}},
		{"TakeAll", func(s admit.Store) (bool, error) {
			rs := []admit.Request{r, {Key: "{bob}:hourly", Limit: admit.Limit{Name: "hourly", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Hour}, Cost: 1}}
			return s.TakeAll(context.Background(), rs, make([]admit.Decision, 2))
		}},
	} {
		t.Run(call.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clock := newClock()
				mem := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
				defer mem.Close()
				backend := &gated{next: mem}
				cache := guard.NewOverLimitCache(backend, guard.OverLimitOptions{Now: clock.Now})
				for range 3 {
					if _, err := call.take(cache); err != nil {
						t.Fatal(err)
					}
				}
				calls := backend.calls.Load()
				if _, err := call.take(cache); err != nil || backend.calls.Load() != calls {
					t.Fatalf("the full key's fourth call went to the backend (%v): it is not remembered", err)
				}
				clock.Advance(time.Second) // the rejections are a second old
				backend.gate = make(chan struct{})
				var wg sync.WaitGroup
				var allowed atomic.Int64
				for range 16 {
					wg.Go(func() {
						ok, err := call.take(cache)
						if err != nil {
							t.Errorf("%s: %v", call.name, err)
						}
						if ok {
							allowed.Add(1)
						}
					})
				}
				synctest.Wait() // every caller is blocked: in the backend, or waiting for its answer
				if got := backend.calls.Load() - calls; got != 1 {
					t.Errorf("%d backend calls from 16 callers of an aged rejection, want 1", got)
				}
				close(backend.gate)
				wg.Wait()
				if got := backend.calls.Load() - calls; got != 1 {
					t.Errorf("%d backend calls from 16 callers of an aged rejection, want 1", got)
				}
				if n := allowed.Load(); n != 0 {
					t.Errorf("%d of 16 admitted, want none", n)
				}
			})
		})
	}
}

// A refresh that fails lets the callers waiting for it go on: they ask the backend themselves.
func TestOverLimitMaxAgeRefreshFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := newClock()
		mem := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
		defer mem.Close()
		backend := &gated{next: mem}
		cache := guard.NewOverLimitCache(backend, guard.OverLimitOptions{Now: clock.Now})
		r := admit.Request{Key: "rl:daily:carol", Limit: daily, Cost: 1}
		for range 3 {
			take(t, cache, r)
		}
		clock.Advance(time.Second)
		backend.gate = make(chan struct{})
		failed := make(chan error, 1)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { // the refresh: its caller gives up
			_, err := cache.Take(ctx, r)
			failed <- err
		}()
		synctest.Wait()
		done := make(chan admit.Decision)
		go func() { // waits for the refresh
			d, err := cache.Take(context.Background(), r)
			if err != nil {
				t.Errorf("Take: %v", err)
			}
			done <- d
		}()
		synctest.Wait()
		calls := backend.calls.Load()
		cancel()
		close(backend.gate)
		if err := <-failed; err == nil {
			t.Error("the cancelled refresh succeeded")
		}
		if d := <-done; d.Allowed {
			t.Errorf("the waiting Take: %+v, want rejected", d)
		}
		if got := backend.calls.Load() - calls; got != 1 {
			t.Errorf("the waiting Take made %d backend calls after the failed refresh, want 1", got)
		}
	})
}

// MaxAge bounds the answers of a remembered rejection; a negative MaxAge turns the cache off.
func TestOverLimitMaxAgeOption(t *testing.T) {
	for _, c := range []struct {
		maxAge time.Duration
		calls  int64 // of 100 Takes of a full key, 10 ms apart
	}{
		{250 * time.Millisecond, 4}, // at 250, 500, 750 ms and at 1 s
		{time.Hour, 0},
		{-1, 100},
	} {
		clock := newClock()
		backend := &counting{next: newMem(t, clock)}
		cache := guard.NewOverLimitCache(backend, guard.OverLimitOptions{MaxAge: c.maxAge, Now: clock.Now})
		r := admit.Request{Key: "rl:daily:dave", Limit: daily, Cost: 1}
		for range 3 {
			take(t, cache, r)
		}
		calls := backend.calls.Load()
		for range 100 {
			clock.Advance(10 * time.Millisecond)
			if d := take(t, cache, r); d.Allowed {
				t.Fatalf("MaxAge %v: %+v, want rejected", c.maxAge, d)
			}
		}
		if got := backend.calls.Load() - calls; got != c.calls {
			t.Errorf("MaxAge %v: %d backend calls, want %d", c.maxAge, got, c.calls)
		}
		if c.maxAge < 0 && (cache.Hits() != 0 || cache.Len() != 0) {
			t.Errorf("MaxAge %v: %d hits, %d entries; want none", c.maxAge, cache.Hits(), cache.Len())
		}
	}
}

// gated is a counting Store whose Take and TakeAll wait for gate to close, if it is set.
type gated struct {
	next  admit.Store
	gate  chan struct{}
	calls atomic.Int64
}

func (g *gated) wait() {
	if g.gate != nil {
		<-g.gate
	}
}

func (g *gated) Take(ctx context.Context, r admit.Request) (admit.Decision, error) {
	g.calls.Add(1)
	g.wait()
	return g.next.Take(ctx, r)
}

func (g *gated) TakeAll(ctx context.Context, rs []admit.Request, ds []admit.Decision) (bool, error) {
	g.calls.Add(1)
	g.wait()
	return g.next.TakeAll(ctx, rs, ds)
}

func (g *gated) Release(ctx context.Context, l admit.Lease) error { return g.next.Release(ctx, l) }

func (g *gated) Settle(ctx context.Context, res admit.Reservation, actual int64) (admit.Decision, error) {
	return g.next.Settle(ctx, res, actual)
}

func (g *gated) Reset(ctx context.Context, keys []string) error { return g.next.Reset(ctx, keys) }

func (g *gated) SetOverride(ctx context.Context, o admit.Override) error {
	return g.next.SetOverride(ctx, o)
}
func (g *gated) Override(ctx context.Context, key string) (admit.Override, bool, error) {
	return g.next.Override(ctx, key)
}
func (g *gated) DeleteOverride(ctx context.Context, key string) (bool, error) {
	return g.next.DeleteOverride(ctx, key)
}
func (g *gated) Overrides(ctx context.Context, policy, cursor string, n int) ([]admit.Override, string, error) {
	return g.next.Overrides(ctx, policy, cursor, n)
}

func (w *swappable) SetOverride(ctx context.Context, o admit.Override) error {
	return w.store().SetOverride(ctx, o)
}
func (w *swappable) Override(ctx context.Context, key string) (admit.Override, bool, error) {
	return w.store().Override(ctx, key)
}
func (w *swappable) DeleteOverride(ctx context.Context, key string) (bool, error) {
	return w.store().DeleteOverride(ctx, key)
}
func (w *swappable) Overrides(ctx context.Context, policy, cursor string, n int) ([]admit.Override, string, error) {
	return w.store().Overrides(ctx, policy, cursor, n)
}

func (g *gated) OverrideCount(ctx context.Context, policy string) (int64, error) {
	return g.next.OverrideCount(ctx, policy)
}
func (w *swappable) OverrideCount(ctx context.Context, policy string) (int64, error) {
	return w.store().OverrideCount(ctx, policy)
}
