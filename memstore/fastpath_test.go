package memstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/admit-dev/admit"
)

// TestFastPathDecidesAsTheGeneralPath runs one random sequence of single Requests on two Stores on
// one clock, Take on one (its fast path wherever it applies) and TakeAll of one Request on the other
// (always the general path), and checks that every Decision, token and error is the same: fixed
// windows, aligned ones, GCRA, peeks, costs over the limit, shadow policies, keys switched to
// another algorithm, and state a longer Period left (corrupt for the shorter).
func TestFastPathDecidesAsTheGeneralPath(t *testing.T) {
	clock := newClock()
	fast := New(Options{Now: clock.Now, SweepInterval: -1})
	general := New(Options{Now: clock.Now, SweepInterval: -1})
	limits := []admit.Limit{
		{Algorithm: admit.FixedWindow, Rate: 5, Period: time.Second},
		{Algorithm: admit.FixedWindow, Rate: 5, Period: 3 * time.Second}, // a longer window: corrupt for the first
		{Algorithm: admit.FixedWindow, Rate: 4, Period: time.Second, Aligned: true},
		{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Second, Shadow: true},
		{Algorithm: admit.GCRA, Rate: 10, Period: time.Second, Burst: 4},
		{Algorithm: admit.GCRA, Rate: 1, Period: time.Second, Burst: 3}, // a longer tolerance: corrupt for the first
		{Algorithm: admit.GCRA, Rate: 2, Period: time.Second, Shadow: true},
		{Algorithm: admit.SlidingWindow, Rate: 3, Period: time.Second},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	fastCases := 0
	for step := range 20_000 {
		clock.Advance(time.Duration(rng.IntN(40_000)) * time.Microsecond)
		lim := limits[rng.IntN(len(limits))]
		if rng.IntN(4) > 0 { // most steps under the two plain Limits, so keys stay live
			lim = limits[[]int{0, 4}[rng.IntN(2)]]
		}
		r := admit.Request{Key: fmt.Sprint("k", rng.IntN(6)), Limit: lim, Cost: rng.Int64N(lim.Capacity() + 1)}
		if sh := fast.tab.shard(r.Key); sh.live(r.Key) != nil && sh.live(r.Key).alg == lim.Algorithm {
			fastCases++
		}
		got, gotErr := fast.Take(context.Background(), r)
		var want [1]admit.Decision
		_, wantErr := general.TakeAll(context.Background(), []admit.Request{r}, want[:])
		if got != want[0] || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("step %d, %+v: Take = %+v, %v; the general path %+v, %v", step, r, got, gotErr, want[0], wantErr)
		}
	}
	if fastCases < 5_000 {
		t.Fatalf("only %d of the steps found live state of their algorithm: the test misses the fast path", fastCases)
	}
}

// TestFastPathAdmitsExactlyTheCapacityUnderContention has goroutines take one unit at a time from one
// live key at a frozen clock, most through Take's fast path (a compare-and-swap under the shard's read
// lock) and some through TakeAll (the general path, under its write lock), until the key is
// exhausted: exactly its capacity must be admitted, each admission seeing a Remaining of its own.
func TestFastPathAdmitsExactlyTheCapacityUnderContention(t *testing.T) {
	for _, lim := range []admit.Limit{
		{Algorithm: admit.FixedWindow, Rate: 5000, Period: time.Hour},
		{Algorithm: admit.FixedWindow, Rate: 5000, Period: time.Hour, Aligned: true},
		{Algorithm: admit.GCRA, Rate: 1, Period: time.Hour, Burst: 5000},
	} {
		t.Run(fmt.Sprintf("%v/aligned=%v", lim.Algorithm, lim.Aligned), func(t *testing.T) {
			s := New(Options{Now: newClock().Now, SweepInterval: -1})
			defer s.Close()
			const goroutines, calls = 8, 1000 // 8,000 calls for 5,000 units
			r := admit.Request{Key: "hot", Limit: lim, Cost: 1}
			first := mustTake(t, s, r.Key, lim, 1)  // the general path creates the key
			admitted := make([][]int64, goroutines) // the Remaining of each admission, per goroutine
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for range calls {
						var d admit.Decision
						var err error
						if g%4 == 3 {
							ds := make([]admit.Decision, 1)
							_, err = s.TakeAll(context.Background(), []admit.Request{r}, ds)
							d = ds[0]
						} else {
							d, err = s.Take(context.Background(), r)
						}
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							admitted[g] = append(admitted[g], d.Remaining)
						}
					}
				})
			}
			wg.Wait()
			seen := map[int64]bool{first.Remaining: true}
			for _, rs := range admitted {
				for _, rem := range rs {
					if seen[rem] {
						t.Fatalf("two admissions saw Remaining %d", rem)
					}
					seen[rem] = true
				}
			}
			if int64(len(seen)) != lim.Capacity() {
				t.Fatalf("%d units admitted under %v; want exactly its capacity, %d", len(seen), lim, lim.Capacity())
			}
		})
	}
}

// TestFastPathWaitsForNoReader holds a shard's lock for reading, as a caller preempted on the fast
// path would, and checks that Take still decides on a live key of the shard: callers of a hot key
// never queue behind one another.
func TestFastPathWaitsForNoReader(t *testing.T) {
	for _, lim := range []admit.Limit{
		{Algorithm: admit.FixedWindow, Rate: 10, Period: time.Hour},
		{Algorithm: admit.FixedWindow, Rate: 10, Period: time.Hour, Aligned: true},
		{Algorithm: admit.GCRA, Rate: 10, Period: time.Hour},
	} {
		s := New(Options{Now: newClock().Now, SweepInterval: -1})
		mustTake(t, s, "hot", lim, 1)
		sh := s.tab.shard("hot")
		sh.mu.RLock()
		done := make(chan admit.Decision)
		go func() {
			d, err := s.Take(context.Background(), admit.Request{Key: "hot", Limit: lim, Cost: 1})
			if err != nil {
				t.Error(err)
			}
			done <- d
		}()
		select {
		case d := <-done:
			if !d.Allowed || d.Remaining != 8 {
				t.Errorf("%v: the second Take = %+v; want allowed with 8 remaining", lim, d)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%v: Take waited for a caller that holds the shard for reading", lim)
		}
		sh.mu.RUnlock()
		s.Close()
	}
}
