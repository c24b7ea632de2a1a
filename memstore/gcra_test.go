package memstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/memstore"
)

var twoPerSecond = admit.Limit{Algorithm: admit.GCRA, Rate: 2, Period: time.Second} // T = 500 ms

// A GCRA entry is live until its theoretical arrival time, to the microsecond, and is reclaimed from
// then on: a full bucket is a missing key.
func TestGCRAEntryLivesUntilItsTAT(t *testing.T) {
	clock := newFakeClock()
	s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	defer s.Close()
	if d := take(t, s, "k", twoPerSecond, 2); !d.Allowed || d.ResetAfter != time.Second {
		t.Fatalf("the whole burst = %+v; want allowed, ResetAfter 1s", d)
	}
	clock.Advance(time.Second - time.Microsecond)
	if d := take(t, s, "k", twoPerSecond, 0); d.Remaining != 1 || d.ResetAfter != time.Millisecond {
		t.Fatalf("peek 1 µs before the TAT = %+v; want 1 unit back, ResetAfter 1ms (1 µs rounded up)", d)
	}
	if _, removed := memstore.Sweep(s); removed != 0 || s.Len() != 1 {
		t.Fatalf("a sweep 1 µs before the TAT removed %d entries, leaving %d; want none removed", removed, s.Len())
	}
	clock.Advance(time.Microsecond)
	if _, removed := memstore.Sweep(s); removed != 1 || s.Len() != 0 {
		t.Fatalf("a sweep at the TAT removed %d entries, leaving %d; want the entry removed", removed, s.Len())
	}
	if d := take(t, s, "k", twoPerSecond, 0); d.Remaining != 2 || d.ResetAfter != 0 {
		t.Fatalf("peek at the TAT = %+v; want a full bucket", d)
	}
}

// Time is kept in whole microseconds, as Redis's TIME gives it: nanoseconds change no decision.
func TestGCRAMicrosecondResolution(t *testing.T) {
	clock := newFakeClock() // 123_456_789 ns past the second
	s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	defer s.Close()
	take(t, s, "k", twoPerSecond, 2)
	clock.Advance(500*time.Millisecond - 999*time.Nanosecond) // 1 ns short of a microsecond short of a unit
	if d := take(t, s, "k", twoPerSecond, 1); d.Allowed || d.RetryAfter != time.Millisecond {
		t.Fatalf("Take 999 ns short of a unit = %+v; want rejected (still within the microsecond before), RetryAfter 1ms", d)
	}
	clock.Advance(999 * time.Nanosecond)
	if d := take(t, s, "k", twoPerSecond, 1); !d.Allowed || d.Remaining != 0 || d.ResetAfter != time.Second {
		t.Fatalf("Take one interval after = %+v; want allowed, remaining 0, ResetAfter 1s", d)
	}
}

// A key further ahead than a full bucket of the Limit it is read under — the same interval with a
// smaller burst — is corrupt, as in Redis, and left alone; it counts again once the backlog fits.
func TestGCRABacklogBeyondTheBurstIsCorrupt(t *testing.T) {
	clock := newFakeClock()
	s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	defer s.Close()
	wide := twoPerSecond
	wide.Burst = 4
	take(t, s, "k", wide, 4) // TAT 2 s ahead
	narrow := twoPerSecond
	narrow.Burst = 1 // τ = 500 ms
	for _, n := range []int64{0, 1} {
		d, err := s.Take(t.Context(), admit.Request{Key: "k", Limit: narrow, Cost: n})
		if !errors.Is(err, admit.ErrCorruptState) || d.Allowed {
			t.Fatalf("Take(n=%d) under burst 1 of a key 2 s ahead = %+v, %v; want ErrCorruptState", n, d, err)
		}
	}
	if d := take(t, s, "k", wide, 0); d.Remaining != 0 || d.ResetAfter != 2*time.Second {
		t.Fatalf("peek under the original Limit = %+v; want it unchanged: remaining 0, ResetAfter 2s", d)
	}
	clock.Advance(1500 * time.Millisecond)
	if d := take(t, s, "k", narrow, 1); d.Allowed || d.Remaining != 0 || d.RetryAfter != 500*time.Millisecond {
		t.Fatalf("Take under burst 1 with 500 ms of backlog = %+v; want rejected, RetryAfter 500ms", d)
	}
	d, err := s.Take(t.Context(), admit.Request{Key: "k", Limit: admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Second}, Cost: 1})
	if !errors.Is(err, admit.ErrCorruptState) || d.Allowed {
		t.Fatalf("a fixed-window Take of a GCRA key = %+v, %v; want ErrCorruptState", d, err)
	}
}

// A Take of a live GCRA key allocates nothing.
func TestGCRATakeDoesNotAllocate(t *testing.T) {
	clock := newFakeClock()
	s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	defer s.Close()
	lim := admit.Limit{Algorithm: admit.GCRA, Rate: bound.MaxPeriod.Microseconds(), Period: bound.MaxPeriod, Burst: 1 << 40}
	r := admit.Request{Key: "k", Limit: lim, Cost: 1}
	take(t, s, r.Key, lim, 1)
	if n := testing.AllocsPerRun(100, func() { s.Take(t.Context(), r) }); n != 0 {
		t.Fatalf("Take of a live GCRA key: %v allocations; want 0", n)
	}
}

// A shard keeps the figures of the GCRA Limit it decided under last: Limits that differ only in
// Rate, Period or Burst, taken in turn on keys of one shard, are each decided as by a Store that
// sees only that Limit.
func TestGCRALimitsTakenInTurnInOneShard(t *testing.T) {
	limits := []admit.Limit{
		{Algorithm: admit.GCRA, Rate: 2, Period: time.Second},
		{Algorithm: admit.GCRA, Rate: 4, Period: time.Second},
		{Algorithm: admit.GCRA, Rate: 4, Period: 3 * time.Second},
		{Algorithm: admit.GCRA, Rate: 4, Period: 3 * time.Second, Burst: 7},
	}
	clock := newFakeClock()
	shared := memstore.New(memstore.Options{Now: clock.Now, Shards: 1, SweepInterval: -1})
	defer shared.Close()
	alone := make([]*memstore.Store, len(limits))
	for i := range alone {
		alone[i] = memstore.New(memstore.Options{Now: clock.Now, Shards: 1, SweepInterval: -1})
		defer alone[i].Close()
	}
	for round := range 12 {
		for i, lim := range limits {
			key := "k" + string(rune('a'+i))
			got, want := take(t, shared, key, lim, 1), take(t, alone[i], key, lim, 1)
			if got != want {
				t.Fatalf("round %d, %v: %+v in a shard shared with other GCRA Limits; %+v alone", round, lim, got, want)
			}
		}
		clock.Advance(150 * time.Millisecond)
	}
}
