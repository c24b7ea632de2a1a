package algo

import (
	"math/big"
	"math/rand/v2"
	"testing"
	"time"
)

// t0 returns a Unix time in microseconds near 2023-11 that starts a window of w.
func t0(w time.Duration) int64 {
	us := w.Microseconds()
	return 1_700_000_000_000_000 / us * us
}

func TestSlidingWindow(t *testing.T) {
	const w = 10 * time.Second
	const W = int64(w / time.Microsecond)
	start := t0(w)
	at := func(e time.Duration) int64 { return start + e.Microseconds() }
	st := func(s, prev, curr int64) *SlidingWindowState { return &SlidingWindowState{s, prev, curr} }
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		state *SlidingWindowState
		now   int64
		limit int64
		n     int64
		want  SlidingWindowResult
	}{
		{"missing key starts the current window", nil, at(2500 * ms), 3, 1,
			SlidingWindowResult{WriteCreate, true, 2, 0, 17500 * ms, SlidingWindowState{start, 0, 1}, start + 2*W}},
		{"missing key, whole limit", nil, at(0), 3, 3,
			SlidingWindowResult{WriteCreate, true, 0, 0, 2 * w, SlidingWindowState{start, 0, 3}, start + 2*W}},
		{"missing key, peek writes nothing", nil, at(2500 * ms), 3, 0,
			SlidingWindowResult{Allowed: true, Remaining: 3}},
		{"same window increments", st(start, 0, 2), at(2500 * ms), 3, 1,
			SlidingWindowResult{Write: WriteIncrement, Allowed: true, Remaining: 0, ResetAfter: 17500 * ms}},
		{"same window, peek", st(start, 1, 2), at(2500 * ms), 5, 0, // ⌈1 × 0.75⌉ + 2 = 3
			SlidingWindowResult{Allowed: true, Remaining: 2, ResetAfter: 17500 * ms}},
		// Full: 3 in the current window; in the next one they weigh 3 × (w − e')/w, and 1 more fits
		// when that is ≤ 2: e' ≥ w − ⌊2w/3⌋ = 3,333,334 µs, 7.5 s + 3.333334 s from now.
		{"full, waits into the next window", st(start, 0, 3), at(2500 * ms), 3, 1,
			SlidingWindowResult{Remaining: 0, RetryAfter: 10834 * ms, ResetAfter: 17500 * ms}},
		// The previous window's 4 weigh ⌈4 × 0.75⌉ = 3 a quarter into this one.
		{"previous window weighs", st(start-W, 0, 4), at(2500 * ms), 4, 1,
			SlidingWindowResult{WriteCreate, true, 0, 0, 17500 * ms, SlidingWindowState{start, 4, 1}, start + 2*W}},
		// 2 fit once ⌈4 × (w − e)/w⌉ ≤ 2: at e = w/2, 2.5 s from now.
		{"previous window weighs, waits in this window", st(start-W, 0, 4), at(2500 * ms), 4, 2,
			SlidingWindowResult{Remaining: 1, RetryAfter: 2500 * ms, ResetAfter: 7500 * ms}},
		{"rolls the stored window to the previous one", st(start-W, 9, 2), at(5000 * ms), 10, 3, // ⌈2 × 0.5⌉ = 1
			SlidingWindowResult{WriteCreate, true, 6, 0, 15 * time.Second, SlidingWindowState{start, 2, 3}, start + 2*W}},
		{"the weighted count is rounded up", st(start-W, 0, 3), at(time.Microsecond), 3, 1, // ⌈3 × (w − 1 µs)/w⌉ = 3
			SlidingWindowResult{Remaining: 0, RetryAfter: 3334 * ms, ResetAfter: 10 * time.Second}},
		{"two windows old is as missing", st(start-2*W, 7, 7), at(0), 3, 1,
			SlidingWindowResult{WriteCreate, true, 2, 0, 2 * w, SlidingWindowState{start, 0, 1}, start + 2*W}},
		{"the last microsecond of the next window", st(start-W, 0, 5), at(w - time.Microsecond), 5, 5, // ⌈5 × 1/w⌉ = 1
			SlidingWindowResult{Remaining: 4, RetryAfter: ms, ResetAfter: ms}},
		{"count above a lowered limit", st(start, 0, 5), at(2500 * ms), 3, 0, // 7.5 s, then 5 × (w − e')/w ≤ 3
			SlidingWindowResult{Remaining: 0, RetryAfter: 11500 * ms, ResetAfter: 17500 * ms}},
		{"a cost of the whole limit waits for both windows", st(start, 0, 1), at(2500 * ms), 3, 3,
			SlidingWindowResult{Remaining: 2, RetryAfter: 17500 * ms, ResetAfter: 17500 * ms}},
		// 10^15 units: the products exceed 2^53 and 2^64, and are still exact.
		{"MaxCount, full", st(start, 0, MaxCount), at(2500 * ms), MaxCount, 1, // 7.5 s + 1 µs
			SlidingWindowResult{Remaining: 0, RetryAfter: 7501 * ms, ResetAfter: 17500 * ms}},
		{"MaxCount in the previous window", st(start-W, 0, MaxCount), at(2500 * ms), MaxCount, MaxCount / 4,
			SlidingWindowResult{WriteCreate, true, 0, 0, 17500 * ms, SlidingWindowState{start, MaxCount, MaxCount / 4}, start + 2*W}},
		{"MaxCount in the previous window, one unit more", st(start-W, 0, MaxCount), at(2500 * ms), MaxCount, MaxCount/4 + 1,
			SlidingWindowResult{Remaining: MaxCount / 4, RetryAfter: ms, ResetAfter: 7500 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.state != nil {
				if err := CheckSlidingWindow(*tc.state, w, tc.now); err != nil {
					t.Fatalf("CheckSlidingWindow(%+v): %v", *tc.state, err)
				}
			}
			if got := SlidingWindow(tc.state, tc.now, tc.limit, w, tc.n); got != tc.want {
				t.Fatalf("SlidingWindow(%+v, now+%dµs, %d, %v, %d)\n = %+v\nwant %+v", tc.state, tc.now-start, tc.limit, w, tc.n, got, tc.want)
			}
		})
	}
}

func TestCheckSlidingWindow(t *testing.T) {
	const w = time.Minute
	start := t0(w)
	W := w.Microseconds()
	for _, tc := range []struct {
		st   SlidingWindowState
		now  int64
		want error
	}{
		{SlidingWindowState{start, 0, 1}, start, nil},
		{SlidingWindowState{start, MaxCount, MaxCount}, start + W - 1, nil},
		{SlidingWindowState{start - 5*W, 3, 3}, start, nil}, // old: as missing, not corrupt
		{SlidingWindowState{start, 0, 0}, start, ErrCountOutOfRange},
		{SlidingWindowState{start, 0, MaxCount + 1}, start, ErrCountOutOfRange},
		{SlidingWindowState{start, -1, 1}, start, ErrPrevOutOfRange},
		{SlidingWindowState{start, MaxCount + 1, 1}, start, ErrPrevOutOfRange},
		{SlidingWindowState{start + 1000, 0, 1}, start + W, ErrStartMisaligned},
		{SlidingWindowState{-W, 0, 1}, start, ErrStartMisaligned},
		{SlidingWindowState{start + W, 0, 1}, start + W - 1, ErrStartInTheFuture},
	} {
		if got := CheckSlidingWindow(tc.st, w, tc.now); got != tc.want {
			t.Errorf("CheckSlidingWindow(%+v, now %d) = %v, want %v", tc.st, tc.now, got, tc.want)
		}
	}
}

// RetryAfter and ResetAfter are exact, to the millisecond they are rounded up to: on random states,
// small and near 10^15, the request fits RetryAfter from now and not a millisecond sooner, and the
// estimate is 0 ResetAfter from now and not a millisecond sooner.
func TestSlidingWindowWaitsAreExact(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	decided := map[bool]int{}
	for i := range 20000 {
		w := time.Duration(1+r.Int64N(100_000)) * time.Millisecond
		if i%10 == 0 {
			w = time.Duration(1+r.Int64N(int64(366*24*time.Hour/time.Millisecond))) * time.Millisecond
		}
		W := w.Microseconds()
		limit := 1 + r.Int64N(10)
		if i%3 == 0 {
			limit = MaxCount - r.Int64N(1000)
		}
		start := t0(w)
		st := &SlidingWindowState{Start: start - W*r.Int64N(2), Prev: r.Int64N(limit + 1), Curr: 1 + r.Int64N(limit)}
		now := start + r.Int64N(W)
		n := r.Int64N(limit + 1)
		res := SlidingWindow(st, now, limit, w, n)
		decided[res.Allowed]++
		if res.ResetAfter > 2*w || res.RetryAfter > res.ResetAfter {
			t.Fatalf("%+v at %d, limit %d, n %d, window %v: %+v; want RetryAfter ≤ ResetAfter ≤ 2 windows", st, now, limit, n, w, res)
		}
		takeAt := func(d time.Duration) SlidingWindowResult { return SlidingWindow(st, now+d.Microseconds(), limit, w, n) }
		after := st // ResetAfter is of the state as the admission leaves it
		switch res.Write {
		case WriteCreate:
			after = &res.State
			// The key expires exactly when its state becomes equivalent to a missing key.
			if res.Expiry != res.State.Start+2*W ||
				SlidingWindow(after, res.Expiry-1, limit, w, 0) == SlidingWindow(nil, res.Expiry-1, limit, w, 0) ||
				SlidingWindow(after, res.Expiry, limit, w, 1) != SlidingWindow(nil, res.Expiry, limit, w, 1) {
				t.Fatalf("%+v at %d, window %v: writes %+v expiring at %d; want it to expire exactly when it is as missing", st, now, w, res.State, res.Expiry)
			}
		case WriteIncrement:
			after = &SlidingWindowState{st.Start, st.Prev, st.Curr + n}
		}
		peekAt := func(d time.Duration) SlidingWindowResult {
			return SlidingWindow(after, now+d.Microseconds(), limit, w, 0)
		}
		if res.ResetAfter > 0 {
			if p := peekAt(res.ResetAfter); p.Remaining != limit {
				t.Fatalf("%+v at %d, window %v: ResetAfter %v, but then %d of %d remain", st, now, w, res.ResetAfter, p.Remaining, limit)
			}
			if p := peekAt(res.ResetAfter - time.Millisecond); p.Remaining == limit {
				t.Fatalf("%+v at %d, window %v: ResetAfter %v, but the key is full a millisecond sooner", st, now, w, res.ResetAfter)
			}
		}
		if res.Allowed {
			continue
		}
		if res.RetryAfter <= 0 || !takeAt(res.RetryAfter).Allowed {
			t.Fatalf("%+v at %d, limit %d, n %d, window %v: RetryAfter %v, but the request does not fit then", st, now, limit, n, w, res.RetryAfter)
		}
		if takeAt(res.RetryAfter - time.Millisecond).Allowed {
			t.Fatalf("%+v at %d, limit %d, n %d, window %v: RetryAfter %v, but the request fits a millisecond sooner", st, now, limit, n, w, res.RetryAfter)
		}
	}
	if decided[true] < 1000 || decided[false] < 1000 {
		t.Fatalf("decisions %v; want many of both", decided)
	}
}

func TestMulDiv(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 10000 {
		a, b := r.Int64N(MaxCount+1), r.Int64N(int64(366*24*time.Hour/time.Microsecond)+1)
		c := 1 + r.Int64N(MaxCount)
		want := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
		wq, wr := new(big.Int).QuoRem(want, big.NewInt(c), new(big.Int))
		if !wq.IsInt64() {
			continue // out of the range the algorithms use
		}
		if q, rem := mulDiv(a, b, c); q != wq.Int64() || rem != wr.Int64() {
			t.Fatalf("mulDiv(%d, %d, %d) = %d, %d; want %v, %v", a, b, c, q, rem, wq, wr)
		}
	}
}
