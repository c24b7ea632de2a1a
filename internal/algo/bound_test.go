package algo

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// The sliding window's error bound against the exact log (docs/sliding-window.md). With w the
// window, e the time into the current aligned window and p the previous window's count, at any
// instant
//
//	−⌊p·e/w⌋ ≤ estimate − exact ≤ ⌈p·(w−e)/w⌉
//
// where exact is the number of units the sliding window itself admitted in (now − w, now], what a
// sliding log counts. So right after an admission, a window-long interval holds at most
// limit + ⌊p·e/w⌋ ≤ 2·limit − 1 admitted units, while a sliding log never lets it hold more than limit.

// A request of generated traffic: n units at a Unix time in microseconds.
type request struct{ at, n int64 }

// burstyTraffic returns count requests from start on: bursts of requests microseconds to
// milliseconds apart, pauses of up to a quarter window, and quiet spells of up to two windows.
func burstyTraffic(r *rand.Rand, start, w, limit int64, count int) []request {
	reqs := make([]request, 0, count)
	now := start + r.Int64N(w)
	for len(reqs) < count {
		switch r.IntN(20) {
		case 0:
			now += r.Int64N(2 * w)
		case 1, 2, 3:
			now += r.Int64N(w / 4)
		default:
			now += r.Int64N(w/500 + 1)
		}
		n := int64(1)
		if r.IntN(4) == 0 {
			n += r.Int64N(max(1, limit/3))
		}
		reqs = append(reqs, request{now, n})
	}
	return reqs
}

// countIn returns the number of entries of log, sorted, in (now − w, now].
func countIn(log []int64, now, w int64) int64 {
	i := sort.Search(len(log), func(i int) bool { return log[i] > now-w })
	j := sort.Search(len(log), func(i int) bool { return log[i] > now })
	return int64(j - i)
}

// windows returns the previous and current window's counts that st holds at now, and the time into
// the current window: the definition of §2.2, independent of SlidingWindow.
func windows(st *SlidingWindowState, now, w int64) (p, c, e int64) {
	cur := now - now%w
	switch {
	case st == nil:
	case st.Start == cur:
		p, c = st.Prev, st.Curr
	case st.Start == cur-w:
		p = st.Curr
	}
	return p, c, now - cur
}

// apply makes the write of res on st, as a store does.
func apply(st *SlidingWindowState, res SlidingWindowResult, n int64) *SlidingWindowState {
	switch res.Write {
	case WriteCreate:
		s := res.State
		return &s
	case WriteIncrement:
		return &SlidingWindowState{st.Start, st.Prev, st.Curr + n}
	}
	return st
}

func TestSlidingWindowBoundAgainstLog(t *testing.T) {
	for _, tc := range []struct {
		limit  int64
		window time.Duration
	}{{10, time.Second}, {100, time.Minute}, {3, 10 * time.Millisecond}, {1000, time.Hour}} {
		W := tc.window.Microseconds()
		r := rand.New(rand.NewPCG(uint64(tc.limit), uint64(W)))
		var sw *SlidingWindowState
		var swLog, slLog []int64 // the units each admitted, in order
		var worst, swAdmitted, slAdmitted, disagree int64
		for _, q := range burstyTraffic(r, t0(tc.window), W, tc.limit, 20000) {
			p, _, e := windows(sw, q.at, W)
			// The estimate, read as a peek under the largest limit: what the window counts now.
			estimate := MaxCount - SlidingWindow(sw, q.at, MaxCount, tc.window, 0).Remaining
			exact := countIn(swLog, q.at, W)
			if d := estimate - exact; d < -(p*e/W) || d > ceilMulDiv(p, W-e, W) {
				t.Fatalf("%d per %v at %d (p %d, e %dµs): estimate %d, exact %d; want −⌊p·e/w⌋ ≤ estimate − exact ≤ ⌈p·(w−e)/w⌉",
					tc.limit, tc.window, q.at, p, e, estimate, exact)
			}
			res := SlidingWindow(sw, q.at, tc.limit, tc.window, q.n)
			sw = apply(sw, res, q.n)
			if res.Allowed {
				swAdmitted += q.n
				for range q.n {
					swLog = append(swLog, q.at)
				}
				held := countIn(swLog, q.at, W)
				if held > tc.limit+p*e/W || held > 2*tc.limit-1 {
					t.Fatalf("%d per %v at %d (p %d, e %dµs): %d units admitted in the last window; want at most limit + ⌊p·e/w⌋ = %d ≤ 2·limit − 1",
						tc.limit, tc.window, q.at, p, e, held, tc.limit+p*e/W)
				}
				worst = max(worst, held-tc.limit)
			}
			lres := SlidingLog(slLog, q.at, tc.limit, tc.window, q.n)
			if lres.Allowed {
				slAdmitted += q.n
				slLog = slLog[lres.Trim:]
				for range q.n {
					slLog = append(slLog, q.at)
				}
				if held := countIn(slLog, q.at, W); held > tc.limit {
					t.Fatalf("sliding log, %d per %v: %d units in the last window", tc.limit, tc.window, held)
				}
			}
			if res.Allowed != lres.Allowed {
				disagree++
			}
		}
		// Bursty traffic does reach past the limit: the bound is not vacuous.
		if worst <= 0 {
			t.Errorf("%d per %v: the sliding window never held more than its limit in a window; the traffic is not bursty enough to test the bound", tc.limit, tc.window)
		}
		t.Logf("%d per %v: sliding window admitted %d units, at most %d over the limit in one window; sliding log %d; %d of 20000 decisions differ",
			tc.limit, tc.window, swAdmitted, worst, slAdmitted, disagree)
	}
}

// The worst case is reached: a whole limit at the end of one window, then all but one unit at the end
// of the next, puts 2·limit − 1 units in one window-long interval.
func TestSlidingWindowWorstCase(t *testing.T) {
	const limit, w = 10, time.Second
	W := w.Microseconds()
	start := t0(w)
	var sw *SlidingWindowState
	var log []int64
	for _, q := range []request{{start + W - 2, limit}, {start + 2*W - 3, limit - 1}} {
		res := SlidingWindow(sw, q.at, limit, w, q.n)
		if !res.Allowed {
			t.Fatalf("%d units at %dµs: rejected (%+v)", q.n, q.at-start, res)
		}
		sw = apply(sw, res, q.n)
		for range q.n {
			log = append(log, q.at)
		}
	}
	if held := countIn(log, start+2*W-3, W); held != 2*limit-1 {
		t.Fatalf("%d units in the window ending at the second burst; want 2·limit − 1 = %d", held, 2*limit-1)
	}
	if res := SlidingWindow(sw, start+2*W-3, limit, w, 1); res.Allowed {
		t.Fatal("a unit past 2·limit − 1 was admitted")
	}
}
