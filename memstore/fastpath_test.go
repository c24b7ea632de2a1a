package memstore

import (
	"context"
	"fmt"
	"math/rand/v2"
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
