package memstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/limittest"
	"github.com/admit-dev/admit/memstore"
)

// A sliding window's windows start at multiples of its Period in Unix time: 7.25 s past a multiple
// of 10 s, a first admission weighs until the end of the next window, 12.75 s on.
func TestSlidingWindowAlignedToUnixTime(t *testing.T) {
	clock := limittest.NewClock(time.Date(2025, 3, 1, 12, 0, 7, 250_000_000, time.UTC))
	s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	defer s.Close()
	lim := admit.Limit{Algorithm: admit.SlidingWindow, Rate: 4, Period: 10 * time.Second}
	if d := take(t, s, "k", lim, 4); !d.Allowed || d.ResetAfter != 12750*time.Millisecond {
		t.Fatalf("a first admission 7.25 s into an aligned window: %+v; want allowed, ResetAfter 12.75s", d)
	}
	clock.Advance(2750 * time.Millisecond) // the next window's start: the 4 weigh 4
	if d := take(t, s, "k", lim, 0); d.Remaining != 0 || d.ResetAfter != 10*time.Second {
		t.Fatalf("at the next window's start: %+v; want 0 left, ResetAfter 10s", d)
	}
	clock.Advance(5 * time.Second) // halfway: they weigh 2
	if d := take(t, s, "k", lim, 0); d.Remaining != 2 || d.ResetAfter != 5*time.Second {
		t.Fatalf("halfway through the next window: %+v; want 2 left, ResetAfter 5s", d)
	}
}

// memstore forgets a sliding key exactly when its state becomes equivalent to a missing key: two
// windows after a sliding window's start, one window after a sliding log's newest entry.
func TestSlidingEntriesReclaimedWhenAsMissing(t *testing.T) {
	clock := limittest.NewClock(time.Date(2025, 3, 1, 12, 0, 7, 250_000_000, time.UTC))
	s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	defer s.Close()
	window := admit.Limit{Algorithm: admit.SlidingWindow, Rate: 3, Period: 10 * time.Second}
	log := admit.Limit{Algorithm: admit.SlidingLog, Rate: 3, Period: 10 * time.Second}
	take(t, s, "window", window, 1) // its window started at 12:00:00: reclaimed at 12:00:20
	take(t, s, "log", log, 1)
	clock.Advance(3 * time.Second)
	take(t, s, "log", log, 1) // the newest entry at 12:00:10.25: reclaimed at 12:00:20.25
	clock.Advance(9750*time.Millisecond - time.Nanosecond)
	if _, removed := memstore.Sweep(s); removed != 0 || s.Len() != 2 {
		t.Fatalf("1ns before the window's state ends: the sweep removed %d, %d entries left; want none removed", removed, s.Len())
	}
	clock.Advance(time.Nanosecond)
	if _, removed := memstore.Sweep(s); removed != 1 || s.Len() != 1 {
		t.Fatalf("two windows after the window's start: the sweep removed %d; want the window's entry", removed)
	}
	clock.Advance(250*time.Millisecond - time.Nanosecond)
	if d := take(t, s, "log", log, 0); d.Remaining != 2 || d.ResetAfter != time.Millisecond {
		t.Fatalf("1ns before the log's newest entry leaves: %+v; want 2 left, ResetAfter 1ms", d)
	}
	clock.Advance(time.Nanosecond)
	if _, removed := memstore.Sweep(s); removed != 1 || s.Len() != 0 {
		t.Fatalf("one window after the log's newest entry: the sweep removed %d; want the log's entry", removed)
	}
}

// State kept under one algorithm, or under a Period its window start is no multiple of, is corrupt
// for another Limit, as in Redis; nothing changes.
func TestSlidingStateUnderAnotherLimitIsCorrupt(t *testing.T) {
	clock := limittest.NewClock(time.Date(2025, 3, 1, 12, 0, 7, 250_000_000, time.UTC))
	s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	defer s.Close()
	window := admit.Limit{Algorithm: admit.SlidingWindow, Rate: 3, Period: 10 * time.Second}
	take(t, s, "k", window, 1) // a window that starts at 12:00:00, Unix 1740830400 s
	for _, other := range []admit.Limit{
		{Algorithm: admit.SlidingWindow, Rate: 3, Period: 7 * time.Second}, // 1740830400 is no multiple of 7
		{Algorithm: admit.SlidingLog, Rate: 3, Period: 10 * time.Second},
		{Algorithm: admit.FixedWindow, Rate: 3, Period: 10 * time.Second},
	} {
		if d, err := s.Take(t.Context(), admit.Request{Key: "k", Limit: other, Cost: 1}); !errors.Is(err, admit.ErrCorruptState) || d.Allowed {
			t.Errorf("Take under %v of a key kept under %v: %+v, %v; want ErrCorruptState", other, window, d, err)
		}
	}
	if d := take(t, s, "k", window, 0); d.Remaining != 2 {
		t.Fatalf("peek under the original Limit: %+v; want 2 left, nothing changed", d)
	}
	// 5 s windows: 12:00:00 is one, the previous window now; its unit weighs ⌈1 × 2.75/5⌉ = 1.
	five := admit.Limit{Algorithm: admit.SlidingWindow, Rate: 3, Period: 5 * time.Second}
	if d := take(t, s, "k", five, 0); d.Remaining != 2 {
		t.Fatalf("peek under %v: %+v; want 2 left", five, d)
	}
}
