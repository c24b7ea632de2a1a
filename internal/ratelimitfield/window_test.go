package ratelimitfield_test

import (
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/ratelimitfield"
)

func TestWindow(t *testing.T) {
	for _, tc := range []struct {
		l      admit.Limit
		quota  int64
		window time.Duration
	}{
		{admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: 10 * time.Second}, 3, 10 * time.Second},
		{admit.Limit{Algorithm: admit.SlidingWindow, Rate: 7, Period: time.Minute}, 7, time.Minute},
		{admit.Limit{Algorithm: admit.SlidingLog, Rate: 5, Period: 100 * time.Millisecond}, 5, 100 * time.Millisecond},
		{admit.Limit{Algorithm: admit.GCRA, Rate: 10, Period: time.Second, Burst: 20}, 20, 2 * time.Second},
		{admit.Limit{Algorithm: admit.GCRA, Rate: 3, Period: 10 * time.Second, Burst: 3}, 3, 10 * time.Second},
		{admit.Limit{Algorithm: admit.GCRA, Rate: 3, Period: 10 * time.Second, Burst: 1}, 1, 3333333334 * time.Nanosecond},
		{admit.Limit{Algorithm: admit.GCRA, Rate: 60, Period: time.Minute}, 60, time.Minute},
		{admit.Limit{Algorithm: admit.Concurrency, Rate: 4, Period: time.Minute}, 4, 0},
		{admit.Limit{Algorithm: admit.GCRA}, 0, 0},
	} {
		if q, w := tc.l.Capacity(), ratelimitfield.Window(tc.l); q != tc.quota || w != tc.window {
			t.Errorf("%v: Capacity %d, Window %v; want %d, %v", tc.l, q, w, tc.quota, tc.window)
		}
	}
}

// Window of a GCRA Limit is Capacity x Period / Rate rounded up to the nanosecond, exactly,
// for random valid Limits up to the largest figures.
func TestWindowExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	checked := 0
	for range 20000 {
		l := admit.Limit{Algorithm: admit.GCRA, Rate: 1 + rng.Int64N(bound.MaxRate), Period: time.Duration(1+rng.Int64N(int64(bound.MaxPeriod/time.Millisecond))) * time.Millisecond}
		if rng.IntN(2) == 0 {
			l.Rate = 1 + rng.Int64N(1000)
		}
		if rng.IntN(2) == 0 {
			l.Burst = 1 + rng.Int64N(bound.MaxRate)
		}
		if l.Validate() != nil {
			continue
		}
		checked++
		want := new(big.Int).Mul(big.NewInt(l.Capacity()), big.NewInt(int64(l.Period)))
		want.Add(want, big.NewInt(l.Rate-1)).Quo(want, big.NewInt(l.Rate))
		if got := ratelimitfield.Window(l); !want.IsInt64() || int64(got) != want.Int64() {
			t.Fatalf("%v: Window %d ns; want %v", l, int64(got), want)
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d valid Limits checked", checked)
	}
}
