package memstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/memstore"
)

// A decision with an OverrideKey costs no allocation, as without one: when the Store holds no
// Override, when it holds others' (in the same shard, a one-shard Store), and on the fast path's
// algorithms, fixed windows and GCRA, as on the general path's. Decided under its Override, it
// allocates nothing either.
func TestOverrideKeyDoesNotAllocate(t *testing.T) {
	clock := newFakeClock()
	s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1, Shards: 1})
	defer s.Close()
	for _, lim := range []admit.Limit{
		{Algorithm: admit.FixedWindow, Rate: bound.MaxRate, Period: time.Hour},
		{Algorithm: admit.GCRA, Rate: bound.MaxPeriod.Microseconds(), Period: bound.MaxPeriod, Burst: 1 << 40},
		{Algorithm: admit.SlidingWindow, Rate: bound.MaxRate, Period: time.Hour},
	} {
		r := admit.Request{Key: "rl:p:v1-" + lim.Algorithm.String() + ":{alice}", Limit: lim, Cost: 1, OverrideKey: "rl:p:o:{alice}"}
		take(t, s, r.Key, lim, 1)
		if n := testing.AllocsPerRun(100, func() { s.Take(t.Context(), r) }); n != 0 {
			t.Errorf("%v: a Take with an OverrideKey, no Override stored: %v allocations; want 0", lim.Algorithm, n)
		}
		if err := s.SetOverride(t.Context(), admit.Override{Key: "rl:p:o:{bob}", Rate: 5}); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { s.Take(t.Context(), r) }); n != 0 {
			t.Errorf("%v: a Take with an OverrideKey, another's Override stored: %v allocations; want 0", lim.Algorithm, n)
		}
		if err := s.SetOverride(t.Context(), admit.Override{Key: r.OverrideKey, Rate: lim.Rate}); err != nil {
			t.Fatal(err)
		}
		if d := take(t, s, r.Key, lim, 0); d.Overridden {
			t.Errorf("%v: a Take without the OverrideKey: overridden", lim.Algorithm)
		}
		if d, err := s.Take(t.Context(), r); err != nil || !d.Overridden {
			t.Fatalf("%v: a Take under its Override: %+v, %v; want overridden", lim.Algorithm, d, err)
		}
		if n := testing.AllocsPerRun(100, func() { s.Take(t.Context(), r) }); n != 0 {
			t.Errorf("%v: a Take under its Override: %v allocations; want 0", lim.Algorithm, n)
		}
		for _, k := range []string{r.OverrideKey, "rl:p:o:{bob}"} {
			if _, err := s.DeleteOverride(t.Context(), k); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// An Override's expiry is on the Store's clock: it decides until then, reads as none from then
// on, counts until tidied, and the sweeper's pass removes it, as a count or a listing does.
func TestOverrideExpiresOnTheStoresClock(t *testing.T) {
	clock := newFakeClock()
	s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	defer s.Close()
	lim := admit.Limit{Name: "p", Algorithm: admit.FixedWindow, Rate: 1, Period: time.Hour}
	r := admit.Request{Key: "rl:p:v1:{alice}", Limit: lim, Cost: 1, OverrideKey: "rl:p:o:{alice}"}
	o := admit.Override{Key: r.OverrideKey, Rate: 3, Expires: clock.Now().Add(time.Minute), Reason: "a ticket"}
	if err := s.SetOverride(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute - time.Nanosecond)
	if d, err := s.Take(t.Context(), r); err != nil || !d.Overridden {
		t.Fatalf("a nanosecond before the Override expires: %+v, %v; want overridden", d, err)
	}
	got, ok, err := s.Override(t.Context(), o.Key)
	if err != nil || !ok || got != o {
		t.Errorf("Override = %+v, %v, %v; want %+v", got, ok, err, o)
	}
	clock.Advance(time.Nanosecond)
	if d, err := s.Take(t.Context(), r); err != nil || d.Overridden || d.Limit != lim {
		t.Errorf("when the Override expires: %+v, %v; want the Limit's own", d, err)
	}
	if _, ok, _ := s.Override(t.Context(), o.Key); ok {
		t.Errorf("Override when it has expired: found")
	}
	memstore.Sweep(s)
	if n, err := s.OverrideCount(t.Context(), "p"); err != nil || n != 0 {
		t.Errorf("OverrideCount after the sweeper's pass: %d, %v; want 0", n, err)
	}
	if existed, err := s.DeleteOverride(t.Context(), o.Key); err != nil || existed {
		t.Errorf("DeleteOverride of an expired Override: %v, %v; want none", existed, err)
	}
}

// Numbers the Request cannot be decided under — a cost above an Override's burst, a sliding log's
// rate above its largest — are an invalid request naming the Override, on the fast path's keys as
// on the general path's, and write nothing.
func TestOverrideTheLimitCannotTake(t *testing.T) {
	s := memstore.New(memstore.Options{Now: newFakeClock().Now, SweepInterval: -1})
	defer s.Close()
	for _, tc := range []struct {
		lim  admit.Limit
		o    admit.Override
		cost int64
	}{
		{admit.Limit{Algorithm: admit.GCRA, Rate: 9, Period: time.Minute}, admit.Override{Rate: 9, Burst: 2}, 5},
		{admit.Limit{Algorithm: admit.FixedWindow, Rate: 9, Period: time.Minute}, admit.Override{Rate: 2}, 5},
		{admit.Limit{Algorithm: admit.SlidingLog, Rate: 3, Period: time.Minute}, admit.Override{Rate: bound.MaxSlidingLogRate + 1}, 1},
	} {
		r := admit.Request{Key: "rl:p:v1:{" + tc.lim.Algorithm.String() + "}", Limit: tc.lim, Cost: tc.cost}
		r.OverrideKey = "rl:p:o:{" + tc.lim.Algorithm.String() + "}"
		take(t, s, r.Key, tc.lim, 1) // a live key: the fast path's case, where it has one
		tc.o.Key = r.OverrideKey
		if err := s.SetOverride(t.Context(), tc.o); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"", "id"} {
			r.ID = id
			if _, err := s.Take(t.Context(), r); !errors.Is(err, admit.ErrInvalidRequest) {
				t.Errorf("%v, cost %d under %+v, ID %q: %v; want an invalid request", tc.lim.Algorithm, tc.cost, tc.o, id, err)
			}
		}
		if d := take(t, s, r.Key, tc.lim, 0); d.Remaining != tc.lim.Rate-1 {
			t.Errorf("%v: the refused Takes left %d remaining; want %d, nothing written", tc.lim.Algorithm, d.Remaining, tc.lim.Rate-1)
		}
	}
}
