package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/limittest"
	"github.com/admit-dev/admit/memstore"
)

// newFakeClock returns a clock that moves only when told.
func newFakeClock() *limittest.Clock {
	return limittest.NewClock(time.Date(2025, 3, 1, 12, 0, 7, 123_456_789, time.UTC))
}

// backend is a limittest.Backend of one Store: every Open returns it.
type backend struct {
	clock *limittest.Clock // nil for the real clock
	store *memstore.Store
}

func (b *backend) Open(t *testing.T) admit.Store { return b.store }

// Now is the time the Store decides by: the backend is a limittest.ClockBackend.
func (b *backend) Now(t *testing.T) time.Time {
	if b.clock == nil {
		return time.Now()
	}
	return b.clock.Now()
}

func (b *backend) Sleep(t *testing.T, d time.Duration) {
	if b.clock == nil {
		time.Sleep(d)
		return
	}
	b.clock.Advance(d)
}

func TestConformance(t *testing.T) {
	limittest.TestStore(t, func(t *testing.T) limittest.Backend {
		clock := newFakeClock()
		s := memstore.New(memstore.Options{Now: clock.Now})
		t.Cleanup(func() { s.Close() })
		return &backend{clock: clock, store: s}
	})
}

func TestConformanceRealClock(t *testing.T) {
	if testing.Short() {
		t.Skip("sleeps for a few seconds")
	}
	limittest.TestStore(t, func(t *testing.T) limittest.Backend {
		s := memstore.New(memstore.Options{SweepInterval: 10 * time.Millisecond, Shards: 4})
		t.Cleanup(func() { s.Close() })
		return &backend{store: s}
	})
}

var perMinute3 = admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Minute}

func take(t *testing.T, s *memstore.Store, key string, lim admit.Limit, n int64) admit.Decision {
	t.Helper()
	d, err := s.Take(t.Context(), admit.Request{Key: key, Limit: lim, Cost: n})
	if err != nil {
		t.Fatalf("Take(%q, n=%d): %v", key, n, err)
	}
	return d
}

func TestLazyExpiry(t *testing.T) {
	clock := newFakeClock()
	s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	defer s.Close()
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Second}
	for i := range 10 {
		take(t, s, fmt.Sprint("k", i), lim, 1)
	}
	if got := s.Len(); got != 10 {
		t.Fatalf("Len() = %d after 10 keys; want 10", got)
	}
	clock.Advance(time.Second)
	if got := s.Len(); got != 10 {
		t.Fatalf("Len() = %d after the windows ended, before any access; want 10 (no sweeper)", got)
	}
	// A peek of an expired key reports it missing and reclaims it.
	for i := range 5 {
		if d := take(t, s, fmt.Sprint("k", i), lim, 0); d.Remaining != 3 || d.ResetAfter != 0 {
			t.Fatalf("peek of an expired key = %+v; want remaining 3, ResetAfter 0", d)
		}
		if got, want := s.Len(), 9-i; got != want {
			t.Fatalf("Len() = %d after peeking %d expired keys; want %d", got, i+1, want)
		}
	}
	// A take of an expired key starts a new window in the same entry.
	d := take(t, s, "k5", lim, 1)
	if d.Remaining != 2 || d.ResetAfter != time.Second {
		t.Fatalf("take of an expired key = %+v; want remaining 2, ResetAfter 1s", d)
	}
	if got := s.Len(); got != 5 {
		t.Fatalf("Len() = %d; want 5", got)
	}
}

func TestExpiryBoundary(t *testing.T) {
	clock := newFakeClock()
	s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	defer s.Close()
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 1, Period: time.Second}
	take(t, s, "k", lim, 1)
	clock.Advance(time.Second - time.Nanosecond)
	if d := take(t, s, "k", lim, 1); d.Allowed || d.RetryAfter != time.Nanosecond {
		t.Fatalf("1ns before the window ends: %+v; want rejected, RetryAfter 1ns", d)
	}
	clock.Advance(time.Nanosecond)
	if d := take(t, s, "k", lim, 1); !d.Allowed || d.ResetAfter != time.Second {
		t.Fatalf("when the window ends: %+v; want allowed, a new window of 1s", d)
	}
}

func TestLongerWindowIsCorrupt(t *testing.T) {
	clock := newFakeClock()
	s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	defer s.Close()
	take(t, s, "k", perMinute3, 1)
	short := admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Second}
	for _, n := range []int64{0, 1, 3} {
		d, err := s.Take(t.Context(), admit.Request{Key: "k", Limit: short, Cost: n})
		if !errors.Is(err, admit.ErrCorruptState) || !errors.Is(err, admit.ErrUnavailable) || d.Allowed {
			t.Fatalf("Take(n=%d) under %v of a key with 1m left = %+v, %v; want an error matching ErrCorruptState", n, short, d, err)
		}
	}
	// Nothing changed.
	if d := take(t, s, "k", perMinute3, 0); d.Remaining != 2 || d.ResetAfter != time.Minute {
		t.Fatalf("peek under the original Limit = %+v; want remaining 2, ResetAfter 1m", d)
	}
	// Once 59s have passed, the window left fits the short Limit, which counts as usual.
	clock.Advance(59 * time.Second)
	if d := take(t, s, "k", short, 1); !d.Allowed || d.Remaining != 1 || d.ResetAfter != time.Second {
		t.Fatalf("Take under %v with 1s left = %+v; want allowed, remaining 1, ResetAfter 1s", short, d)
	}
}

func TestOtherLimitSameKey(t *testing.T) {
	clock := newFakeClock()
	s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	defer s.Close()
	take(t, s, "k", perMinute3, 3)
	big := admit.Limit{Algorithm: admit.FixedWindow, Rate: 10, Period: time.Hour}
	if d := take(t, s, "k", big, 2); !d.Allowed || d.Remaining != 5 || d.ResetAfter != time.Minute {
		t.Fatalf("Take under %v of a key holding 3 with 1m left = %+v; want allowed, remaining 5, ResetAfter 1m", big, d)
	}
}

func TestDoneContext(t *testing.T) {
	s := memstore.New(memstore.Options{SweepInterval: -1})
	defer s.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	d, err := s.Take(ctx, admit.Request{Key: "k", Limit: perMinute3, Cost: 1})
	if !errors.Is(err, admit.ErrUnavailable) || !errors.Is(err, context.Canceled) || d != (admit.Decision{}) {
		t.Fatalf("Take with a cancelled context = %+v, %v; want an error matching ErrUnavailable and context.Canceled", d, err)
	}
	if s.Len() != 0 {
		t.Fatalf("Len() = %d after a cancelled Take; want 0", s.Len())
	}
	// Validation comes first: a caller's mistake is reported as such.
	if _, err := s.Take(ctx, admit.Request{Key: "", Limit: perMinute3, Cost: 1}); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Fatalf("Take of an empty key with a cancelled context: %v; want ErrInvalidRequest", err)
	}
}

func TestCloseIdempotent(t *testing.T) {
	for _, interval := range []time.Duration{0, -1} {
		s := memstore.New(memstore.Options{SweepInterval: interval})
		for range 3 {
			if err := s.Close(); err != nil {
				t.Fatalf("Close() = %v; want nil", err)
			}
		}
		// Still usable, without the sweeper.
		if d := take(t, s, "k", perMinute3, 1); !d.Allowed {
			t.Fatalf("Take after Close = %+v; want allowed", d)
		}
	}
}

// TestStress runs Takes, Lens, clock moves and sweeps at once, for the race detector; every Decision
// must stay within its bounds.
func TestStress(t *testing.T) {
	clock := newFakeClock()
	s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: time.Millisecond, SweepBudget: 8, Shards: 4})
	defer s.Close()
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 5, Period: 50 * time.Millisecond}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				clock.Advance(time.Millisecond)
				s.Len()
				time.Sleep(50 * time.Microsecond)
			}
		}
	})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 3000 {
				key := fmt.Sprint("k", (g*7+i)%50)
				d, err := s.Take(t.Context(), admit.Request{Key: key, Limit: lim, Cost: int64(i % 3)})
				if err != nil {
					errs <- err
					return
				}
				if d.Remaining < 0 || d.Remaining > lim.Rate || d.ResetAfter > lim.Period {
					errs <- fmt.Errorf("bad decision %+v", d)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
