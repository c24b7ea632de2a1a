package limittest

import (
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
)

// gcra returns the gcra algorithm, a token bucket (docs/gcra.md), and the cases only it passes. Its
// numbers differ from a fixed window's where its state does: a key holds a time, so a Limit that
// reads the same state with room for more units keeps the emission interval and raises the burst,
// and its largest bucket that refills nothing for a minute — units come back one emission interval
// after their admission — is one unit a minute with a burst of bound.MaxPeriod worth of them, whose
// key lives at most bound.MaxPeriod.
func gcra() *algorithm {
	return &algorithm{
		alg: admit.GCRA,
		roomFor: func(lim admit.Limit, units int64) admit.Limit {
			lim.Burst = units
			return lim
		},
		largest: gc(1, time.Minute, int64(bound.MaxPeriod/time.Minute)),
		settles: true,
		// One unit per microsecond, the shortest emission interval.
		maxRate: int64(time.Minute / time.Microsecond),
		// A full bucket empties in Capacity emission intervals, MaxWait, rounded up to the millisecond.
		refill: func(lim admit.Limit) (lo, hi time.Duration) { return lim.MaxWait(), lim.MaxWait() },
		// Capacity admitted from the first unit on comes back all Capacity emission intervals after it.
		windowFromFirst: true,
		cases: []algorithmCase{
			{"Sequence", testGCRASequence},
			{"BurstAboveRate", testBurstAboveRate},
			{"BurstBelowRate", testBurstBelowRate},
			{"RetryAfterIsWhenItFits", testRetryAfterIsWhenItFits},
			{"ResetAfterIsWhenFull", testResetAfterIsWhenFull},
			{"PeekExistingKey", testGCRAPeekExistingKey},
			{"RoundedInterval", testRoundedInterval},
			{"Override/Clamp", testOverrideGCRAClamp},
		},
	}
}

// gc returns a GCRA Limit of rate units per period with the given burst (0: the rate).
func gc(rate int64, period time.Duration, burst int64) admit.Limit {
	return admit.Limit{Name: "limittest", Algorithm: admit.GCRA, Rate: rate, Period: period, Burst: burst}
}

// micros returns d in microseconds, GCRA's unit.
func micros(d time.Duration) int64 { return int64(d / time.Microsecond) }

// checkGCRA reports, with t.Errorf, what d breaks of GCRA's own invariants. With T the emission
// interval, τ = capacity × T, and backlog the time the bucket needs to be full again once the request
// is decided (ResetAfter, which rounds it up to the millisecond):
//
//   - Remaining is what fits at once: floor((τ − backlog)/T);
//   - a rejection means n does not fit (Remaining < n), and RetryAfter is when it does: backlog + n·T − τ,
//     never more than n·T;
//   - an admission of n ≥ 1 leaves at least n·T of backlog.
func checkGCRA(t *testing.T, d admit.Decision, lim admit.Limit, n int64) {
	t.Helper()
	interval := micros(lim.EmissionInterval())
	tolerance := lim.Capacity() * interval
	const ms = 1000
	reset := micros(d.ResetAfter) // the backlog, rounded up: backlog ∈ (reset − 1 ms, reset]
	if lo, hi := tolerance-reset, tolerance-reset+ms; d.Remaining*interval >= hi || (d.Remaining+1)*interval <= lo {
		t.Errorf("Take(n=%d) under %v: Remaining %d with ResetAfter %v; want floor((τ − backlog)/T) = floor((%d µs − %v)/%d µs)",
			n, lim, d.Remaining, d.ResetAfter, tolerance, d.ResetAfter, interval)
	}
	switch {
	case !d.Allowed:
		if d.Remaining >= n {
			t.Errorf("Take(n=%d) under %v: rejected with %d remaining; want fewer than %d (the cost does not fit)", n, lim, d.Remaining, n)
		}
		want := reset + n*interval - tolerance // within a millisecond either way, for two roundings
		if got := micros(d.RetryAfter); got <= want-ms || got >= want+ms || got > n*interval+ms {
			t.Errorf("Take(n=%d) under %v: rejected with RetryAfter %v, ResetAfter %v; want ResetAfter + n·T − τ = %v (at most n·T)",
				n, lim, d.RetryAfter, d.ResetAfter, time.Duration(want)*time.Microsecond)
		}
	case n > 0 && reset < n*interval:
		t.Errorf("Take(n=%d) under %v: admitted with ResetAfter %v; want at least n·T = %v", n, lim, d.ResetAfter, time.Duration(n*interval)*time.Microsecond)
	}
}

// checkDuration fails t unless got is want, or at most slack less on a real-time backend.
func checkDuration(t *testing.T, what string, got, want, slack time.Duration) {
	t.Helper()
	if got > want || got <= want-slack {
		t.Fatalf("%s = %v; want %v (at least %v for a real-time backend)", what, got, want, want-slack)
	}
}

func testGCRASequence(t *testing.T, b Backend) {
	lim := gc(4, 2*time.Second, 0) // T = 500 ms, τ = 2 s
	T := lim.EmissionInterval()
	s := b.Open(t)
	// The six Takes, five gaps of a twelfth of an interval more than asked at most, span less than
	// two intervals: one unit comes back, and only one.
	timed(t, b, T/12, func(tm *timing) {
		key := newKey()
		ds := tm.run(s, key, lim, []step{
			{n: 1, allowed: true, remaining: 3, fresh: true},
			{n: 3, allowed: true, remaining: 0},
			{n: 1, allowed: false, remaining: 0},
		})
		checkDuration(t, "ResetAfter of a full bucket", ds[1].ResetAfter, 4*T, slack(T))
		checkDuration(t, "RetryAfter of one unit on a full bucket", ds[2].RetryAfter, T, slack(T))
		// One and a half intervals later one unit has come back, and only one.
		tm.run(s, key, lim, []step{
			{sleep: T + T/2, n: 0, allowed: true, remaining: 1},
			{n: 1, allowed: true, remaining: 0},
			{n: 1, allowed: false, remaining: 0},
		})
	})
}

func testBurstAboveRate(t *testing.T, b Backend) {
	lim := gc(5, 2*time.Second, 20) // T = 400 ms, τ = 8 s
	T := lim.EmissionInterval()
	s := b.Open(t)
	// The five Takes, four gaps of a tenth of an interval more than asked at most, span less than
	// two intervals.
	timed(t, b, T/10, func(tm *timing) {
		key := newKey()
		ds := tm.run(s, key, lim, []step{
			{n: 10, allowed: true, remaining: 10, fresh: true}, // more than the rate at once
			{n: 10, allowed: true, remaining: 0},
			{n: 1, allowed: false, remaining: 0},
			// The burst spent, units come back at the rate.
			{sleep: T + T/2, n: 1, allowed: true, remaining: 0},
			{n: 1, allowed: false, remaining: 0},
		})
		checkDuration(t, "ResetAfter of the whole burst", ds[1].ResetAfter, 20*T, slack(T))
	})
}

func testBurstBelowRate(t *testing.T, b Backend) {
	lim := gc(4, time.Second, 1) // T = 250 ms: requests spaced, never two at once
	T := lim.EmissionInterval()
	s := b.Open(t)
	// The rejection comes within a fifth of an interval, and so does the peek.
	timed(t, b, T/5, func(tm *timing) {
		key := newKey()
		ds := tm.run(s, key, lim, []step{
			{n: 1, allowed: true, remaining: 0, fresh: true},
			{n: 1, allowed: false, remaining: 0},
			{sleep: T + T/2, n: 1, allowed: true, remaining: 0},
			{n: 0, allowed: true, remaining: 0},
		})
		checkDuration(t, "RetryAfter of the second request", ds[1].RetryAfter, T, slack(T))
	})
}

func testRetryAfterIsWhenItFits(t *testing.T, b Backend) {
	lim := gc(2, time.Second, 0) // T = 500 ms
	s := b.Open(t)
	// Half the wait, and a fifth of an interval more at most, is less than the wait.
	timed(t, b, lim.EmissionInterval()/5, func(tm *timing) {
		key := newKey()
		tm.run(s, key, lim, []step{{n: 2, allowed: true, remaining: 0, fresh: true}})
		d := tm.take(s, key, lim, 1)
		if d.Allowed {
			t.Fatal("a unit of a full bucket: allowed")
		}
		// Half the wait is not enough, and rejections change nothing;
		tm.sleep(d.RetryAfter / 2)
		d = tm.take(s, key, lim, 1)
		if d.Allowed {
			t.Fatalf("a unit of a full bucket, half its RetryAfter later: allowed")
		}
		// the whole wait is, to the millisecond: exactly RetryAfter later the same request fits.
		tm.sleep(d.RetryAfter)
		tm.run(s, key, lim, []step{{n: 1, allowed: true, remaining: 0}})
	})
}

func testResetAfterIsWhenFull(t *testing.T, b Backend) {
	lim := gc(3, 600*time.Millisecond, 0) // T = 200 ms
	s, key := b.Open(t), newKey()
	ds := run(t, b, s, key, lim, []step{{n: 2, allowed: true, remaining: 1, fresh: true}})
	b.Sleep(t, ds[0].ResetAfter)
	d := take(t, s, key, lim, 0)
	if d.Remaining != 3 || d.ResetAfter != 0 {
		t.Fatalf("peek ResetAfter (%v) after an admission: remaining %d, ResetAfter %v; want a full bucket: 3, 0", ds[0].ResetAfter, d.Remaining, d.ResetAfter)
	}
	run(t, b, s, key, lim, []step{{n: 3, allowed: true, remaining: 0, fresh: true}})
}

func testGCRAPeekExistingKey(t *testing.T, b Backend) {
	lim := gc(3, time.Minute, 0)
	s, key := b.Open(t), newKey()
	ds := run(t, b, s, key, lim, []step{
		{n: 1, allowed: true, remaining: 2, fresh: true},
		{n: 0, allowed: true, remaining: 2},
		{n: 0, allowed: true, remaining: 2},
		{n: 2, allowed: true, remaining: 0},
		// A peek of a full bucket: allowed (it asks for nothing), nothing left.
		{n: 0, allowed: true, remaining: 0},
		{n: 1, allowed: false, remaining: 0},
	})
	for i := 1; i < 3; i++ {
		if ds[i].ResetAfter > ds[0].ResetAfter {
			t.Errorf("peek %d: ResetAfter grew from %v to %v; a peek must not move the TAT", i, ds[0].ResetAfter, ds[i].ResetAfter)
		}
	}
	// Nothing was consumed by any peek: a bigger bucket at the same interval sees 3 units used.
	run(t, b, s, key, gc(3, time.Minute, 100), []step{{n: 0, allowed: true, remaining: 97}})
}

func testRoundedInterval(t *testing.T, b Backend) {
	lim := gc(3, 10*time.Second, 0) // 3,333,333.3 µs rounds up to 3,333,334: τ = 10.000002 s
	s := b.Open(t)
	// The rejection comes within half the slack of the admission.
	timed(t, b, slack(lim.EmissionInterval())/2, func(tm *timing) {
		key := newKey()
		ds := tm.run(s, key, lim, []step{
			{n: 3, allowed: true, remaining: 0, fresh: true}, // ResetAfter 10.001 s: τ rounded up to the millisecond
			{n: 1, allowed: false, remaining: 0},
		})
		checkDuration(t, "RetryAfter of one unit on a full bucket", ds[1].RetryAfter, 3334*time.Millisecond, slack(lim.EmissionInterval()))
	})
}
