package algo

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestSlidingLog(t *testing.T) {
	const w = 10 * time.Second
	const now = 1_700_000_000_123_456
	ms := time.Millisecond
	ago := func(d ...time.Duration) []int64 { // entries d before now, given oldest first
		log := make([]int64, len(d))
		for i := range d {
			log[i] = now - d[i].Microseconds()
		}
		return log
	}
	for _, tc := range []struct {
		name  string
		log   []int64
		limit int64
		n     int64
		want  SlidingLogResult
	}{
		{"missing key", nil, 3, 1, SlidingLogResult{WriteCreate, true, 2, 0, w, 0}},
		{"missing key, whole limit", nil, 3, 3, SlidingLogResult{WriteCreate, true, 0, 0, w, 0}},
		{"missing key, peek", nil, 3, 0, SlidingLogResult{Allowed: true, Remaining: 3}},
		{"appends", ago(4*time.Second, time.Second), 3, 1, SlidingLogResult{WriteIncrement, true, 0, 0, w, 0}},
		{"peek reports the newest entry's exit", ago(4*time.Second, time.Second), 3, 0,
			SlidingLogResult{Allowed: true, Remaining: 1, ResetAfter: 9 * time.Second}},
		// Full: the oldest entry leaves 6 s from now.
		{"full", ago(4*time.Second, 3*time.Second, time.Second), 3, 1,
			SlidingLogResult{Remaining: 0, RetryAfter: 6 * time.Second, ResetAfter: 9 * time.Second}},
		// Two must leave for a cost of 2: the second oldest leaves in 7 s.
		{"a cost waits for as many entries", ago(4*time.Second, 3*time.Second, time.Second), 3, 2,
			SlidingLogResult{Remaining: 0, RetryAfter: 7 * time.Second, ResetAfter: 9 * time.Second}},
		{"entries that left the window do not count and are trimmed by an admission",
			ago(12*time.Second, w, 3*time.Second), 2, 1, SlidingLogResult{WriteIncrement, true, 0, 0, w, 2}},
		{"a rejection trims nothing", ago(12*time.Second, 3*time.Second, 2*time.Second), 2, 1,
			SlidingLogResult{Remaining: 0, RetryAfter: 7 * time.Second, ResetAfter: 8 * time.Second}},
		{"an entry one microsecond inside the window", ago(w - time.Microsecond), 1, 1,
			SlidingLogResult{Remaining: 0, RetryAfter: ms, ResetAfter: ms}},
		{"an entry exactly one window old has left", ago(w), 1, 1, SlidingLogResult{WriteIncrement, true, 0, 0, w, 1}},
		{"only old entries: peek", ago(11 * time.Second), 1, 0, SlidingLogResult{Allowed: true, Remaining: 1}},
		{"several at one instant", ago(time.Second, time.Second, time.Second), 4, 2,
			SlidingLogResult{Remaining: 1, RetryAfter: 9 * time.Second, ResetAfter: 9 * time.Second}},
		{"count above a lowered limit: peek", ago(5*time.Second, 4*time.Second, 3*time.Second), 1, 0,
			SlidingLogResult{Remaining: 0, RetryAfter: 6 * time.Second, ResetAfter: 7 * time.Second}},
		{"sub-millisecond exits round up", ago(2500 * time.Microsecond), 1, 1,
			SlidingLogResult{Remaining: 0, RetryAfter: 9998 * ms, ResetAfter: 9998 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckSlidingLog(tc.log, now); err != nil {
				t.Fatalf("CheckSlidingLog: %v", err)
			}
			if got := SlidingLog(tc.log, now, tc.limit, w, tc.n); got != tc.want {
				t.Fatalf("SlidingLog(%v, %d, %v, %d)\n = %+v\nwant %+v", tc.log, tc.limit, w, tc.n, got, tc.want)
			}
		})
	}
}

func TestCheckSlidingLog(t *testing.T) {
	const now = 1_700_000_000_000_000
	long := make([]int64, MaxLogLen+1)
	for i := range long {
		long[i] = now - int64(len(long)-i)
	}
	for _, tc := range []struct {
		name string
		log  []int64
		want error
	}{
		{"empty", nil, nil},
		{"at now", []int64{now - 5, now}, nil},
		{"longest", long[1:], nil},
		{"too long", long, ErrLogTooLong},
		{"future", []int64{now - 5, now + 1}, ErrEntryInTheFuture},
	} {
		if got := CheckSlidingLog(tc.log, now); got != tc.want {
			t.Errorf("%s: CheckSlidingLog = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// RetryAfter and ResetAfter of a sliding log are exact to the millisecond they are rounded up to, on
// random logs: the request fits RetryAfter from now and not a millisecond sooner; the log is empty of
// entries in the window ResetAfter from now and not a millisecond sooner.
func TestSlidingLogWaitsAreExact(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	decided := map[bool]int{}
	for range 20000 {
		w := time.Duration(1+r.Int64N(20_000)) * time.Millisecond
		W := w.Microseconds()
		const now = 1_700_000_000_000_000
		log := make([]int64, r.IntN(30))
		for i := range log {
			log[i] = now - r.Int64N(2*W)
		}
		slices.Sort(log)
		limit := 1 + r.Int64N(20)
		n := r.Int64N(limit + 1)
		res := SlidingLog(log, now, limit, w, n)
		decided[res.Allowed]++
		if res.ResetAfter > w || res.RetryAfter > res.ResetAfter {
			t.Fatalf("%v, limit %d, n %d, window %v: %+v; want RetryAfter ≤ ResetAfter ≤ the window", log, limit, n, w, res)
		}
		before := log
		if res.Write != WriteNone { // ResetAfter is of the log as the admission leaves it
			log = append(slices.Clone(log[res.Trim:]), slices.Repeat([]int64{now}, int(n))...)
		}
		at := func(d time.Duration, n int64) SlidingLogResult {
			return SlidingLog(log, now+d.Microseconds(), limit, w, n)
		}
		if res.ResetAfter > 0 {
			if p := at(res.ResetAfter, 0); p.Remaining != limit {
				t.Fatalf("%v, window %v: ResetAfter %v, but then %d of %d remain", log, w, res.ResetAfter, p.Remaining, limit)
			}
			if p := at(res.ResetAfter-time.Millisecond, 0); p.Remaining == limit {
				t.Fatalf("%v, window %v: ResetAfter %v, but the log is empty a millisecond sooner", log, w, res.ResetAfter)
			}
		}
		if res.Allowed {
			// An admission's write keeps exactly the entries in the window, and its own.
			if used := limit - res.Remaining; res.Write != WriteNone && int64(len(log)) != used {
				t.Fatalf("%v, n %d: the write leaves %v; want the %d entries in the window", before, n, log, used)
			}
			continue
		}
		if !at(res.RetryAfter, n).Allowed || at(res.RetryAfter-time.Millisecond, n).Allowed {
			t.Fatalf("%v, limit %d, n %d, window %v: RetryAfter %v is not the first millisecond the request fits", log, limit, n, w, res.RetryAfter)
		}
	}
	if decided[true] < 1000 || decided[false] < 1000 {
		t.Fatalf("decisions %v; want many of both", decided)
	}
}
