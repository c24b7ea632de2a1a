package limittest

import (
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
)

// alignedWindow returns the fixed_window algorithm with aligned windows (admit.Limit.Aligned): the
// windows are the multiples of the Period in Unix time, as envoyproxy/ratelimit counts. Its cases
// hold on a real clock: they never assume where in a window they start, but learn it from a
// Decision's ResetAfter, or from the clock of a ClockBackend.
func alignedWindow() *algorithm {
	return &algorithm{alg: admit.FixedWindow, aligned: true, maxRate: bound.MaxRate, windowFromFirst: true, largest: aw(bound.MaxRate, time.Minute), settles: true,
		refill: func(lim admit.Limit) (lo, hi time.Duration) {
			// The rest of the window that holds the admission: up to the whole window.
			return 0, lim.Period
		}, cases: []algorithmCase{
			{"AdmissionsShareTheWindowEnd", testAdmissionsShareTheWindowEnd},
			{"NextWindowStartsAtTheBoundary", testNextWindowStartsAtTheBoundary},
			{"BoundaryBurst", testBoundaryBurst},
			{"OnTheUnixGrid", testOnTheUnixGrid},
		}}
}

// aw returns an aligned fixed-window Limit of rate units per period.
func aw(rate int64, period time.Duration) admit.Limit {
	return admit.Limit{Name: "limittest", Algorithm: admit.FixedWindow, Rate: rate, Period: period, Aligned: true}
}

// minuteMargin is how much of an aligned minute must be left for a shared case to start in it
// (algorithm.prepare): far more than any case takes, little enough that waiting for the next minute
// is rare and short.
const minuteMargin = 2 * time.Second

// windowLeft returns the time from now to the end of the aligned window of lim that holds now: by
// the clock of a ClockBackend, or else as the ResetAfter of an admission on a new key.
func windowLeft(t *testing.T, b Backend, lim admit.Limit) time.Duration {
	t.Helper()
	if c, ok := b.(ClockBackend); ok {
		w := lim.Period.Microseconds()
		return time.Duration(w-c.Now(t).UnixMicro()%w) * time.Microsecond
	}
	return take(t, b.Open(t), newKey(), lim, 1).ResetAfter
}

// windowLeft is [windowLeft], as a call of tm: the time from then to the end of the window.
func (tm *timing) windowLeft(lim admit.Limit) time.Duration {
	tm.t.Helper()
	before := time.Now()
	left := windowLeft(tm.t, tm.b, lim)
	tm.check(before)
	return left
}

// settle lets Backend time pass, if need be, so that the next need of it lies in one aligned window
// of lim: if less than need is left of the window that holds now, it sleeps until that window has
// ended.
func settle(t *testing.T, b Backend, lim admit.Limit, need time.Duration) {
	t.Helper()
	if left := windowLeft(t, b, lim); left < need {
		b.Sleep(t, left)
	}
}

// takeTimed is take, and, for an aligned Limit on a ClockBackend, checks that the window of the
// Decision ends at a multiple of the Period by the Backend's clock (checkWindowEnd).
func takeTimed(t *testing.T, b Backend, s admit.Store, key string, lim admit.Limit, n int64) admit.Decision {
	t.Helper()
	c, ok := b.(ClockBackend)
	if !lim.Aligned || !ok {
		return take(t, s, key, lim, n)
	}
	before := c.Now(t)
	d := take(t, s, key, lim, n)
	checkWindowEnd(t, d, lim, n, before, c.Now(t))
	return d
}

// checkWindowEnd reports, with t.Errorf, an aligned Decision whose window does not end at a multiple
// of its Period in Unix time: made between before and after, by the clock the Store decides by, its
// window ends at its own time plus ResetAfter, which must be such a multiple. The Redis store counts
// whole milliseconds, from the millisecond that holds its time, so the end lies from before's
// millisecond plus ResetAfter to after plus ResetAfter; one more millisecond either side allows for
// a real clock's adjustment while the Store runs. A peek of a missing key has no window.
func checkWindowEnd(t *testing.T, d admit.Decision, lim admit.Limit, n int64, before, after time.Time) {
	t.Helper()
	if d.ResetAfter == 0 {
		return
	}
	w, r := lim.Period.Microseconds(), d.ResetAfter.Microseconds()
	lo := before.UnixMilli()*1000 + r - 1000
	hi := after.UnixMicro() + r + 1000
	if end := (lo + w - 1) / w * w; end > hi {
		t.Errorf("Take(n=%d) under %v at %s: ResetAfter = %v, so the window ends at %s; want it to end at a multiple of %v in Unix time (the next is %s)",
			n, lim, before.UTC().Format(time.RFC3339Nano), d.ResetAfter, before.Add(d.ResetAfter).UTC().Format(time.RFC3339Nano), lim.Period,
			time.UnixMicro((before.UnixMicro()/w+1)*w).UTC().Format(time.RFC3339Nano))
	}
}

// checkAlignedFresh reports whether d started a new aligned window: its ResetAfter is the time to the
// window's end, more than 0 and at most the window (on a ClockBackend, takeTimed checks the end
// itself).
func checkAlignedFresh(t *testing.T, d admit.Decision, lim admit.Limit) {
	t.Helper()
	if d.ResetAfter <= 0 || d.ResetAfter > lim.Period {
		t.Errorf("a Take that starts an aligned window: ResetAfter = %v; want the time to the window's end, more than 0 and at most %v", d.ResetAfter, lim.Period)
	}
}

// testAdmissionsShareTheWindowEnd: every admission of one aligned window reports the same end —
// later admissions of a key, and the first admission of another key started later.
func testAdmissionsShareTheWindowEnd(t *testing.T, b Backend) {
	const window = 800 * time.Millisecond
	lim := aw(3, window)
	s := b.Open(t)
	timed(t, b, tolerance(window), func(tm *timing) {
		// From the start of a window, the three Takes, a quarter of a window and two tolerances
		// apart at most, all fall in it.
		tm.sleep(tm.windowLeft(lim))
		k1, k2 := newKey(), newKey()
		first := tm.run(s, k1, lim, []step{{n: 1, allowed: true, remaining: 2, fresh: true}})[0]
		tm.sleep(window / 4)
		later := tm.run(s, k1, lim, []step{{n: 1, allowed: true, remaining: 1}})[0]
		other := tm.run(s, k2, lim, []step{{n: 1, allowed: true, remaining: 2, fresh: true}})[0]
		if want := first.ResetAfter - window/4; later.ResetAfter > want || later.ResetAfter < want-slack(window) {
			t.Errorf("an admission %v after one that reported ResetAfter = %v: ResetAfter = %v; want about %v (at most that): the window's end does not move",
				window/4, first.ResetAfter, later.ResetAfter, want)
		}
		if other.ResetAfter > later.ResetAfter || other.ResetAfter < later.ResetAfter-slack(window) {
			t.Errorf("the first admission of a key %v into an aligned window: ResetAfter = %v; want the end the window's other keys report, %v: aligned windows start at multiples of the period, not at a key's first admission",
				window/4, other.ResetAfter, later.ResetAfter)
		}
	})
}

// testNextWindowStartsAtTheBoundary: a window begins where the last one ended, so one entered a
// quarter of a window after the boundary lasts three quarters of a window.
func testNextWindowStartsAtTheBoundary(t *testing.T, b Backend) {
	const window = 400 * time.Millisecond
	lim := aw(2, window)
	s := b.Open(t)
	timed(t, b, tolerance(window), func(tm *timing) {
		key := newKey()
		full := tm.run(s, key, lim, []step{
			{n: 2, allowed: true, remaining: 0, fresh: true},
			{n: 1, allowed: false, remaining: 0},
		})[1]
		tm.sleep(full.RetryAfter + window/4) // the rejection waits for the window's end
		d := tm.run(s, key, lim, []step{
			{n: 1, allowed: true, remaining: 1, fresh: true},
			{n: 2, allowed: false, remaining: 1},
		})[0]
		if want := window - window/4; d.ResetAfter > want || d.ResetAfter < want-slack(window) {
			t.Errorf("the first admission %v after an aligned window ended: ResetAfter = %v; want about %v (at most that): the next window starts at the last one's end, not at the admission",
				window/4, d.ResetAfter, want)
		}
	})
}

// testBoundaryBurst: the fixed window's boundary burst, which aligned windows show for every key at
// once: a key filled in the last fifth of a window has its whole limit again at the boundary, so
// twice the limit is admitted within a fifth of a window.
func testBoundaryBurst(t *testing.T, b Backend) {
	const window = 400 * time.Millisecond
	lim := aw(3, window)
	s := b.Open(t)
	// Less than the fifth: the fill, at most this late, is made before the window ends.
	const late = window / 8
	timed(t, b, late, func(tm *timing) {
		key := newKey()
		if left := tm.windowLeft(lim); left > window/5 {
			tm.sleep(left - window/5)
		}
		fill := tm.run(s, key, lim, []step{{n: 3, allowed: true, remaining: 0, fresh: true}})[0]
		if fill.ResetAfter >= window-slack(window) {
			// A whole window: the fill came after the boundary, later than the calls' timing can
			// show on a busy machine (seen once beside CPU burners, on a cluster). A Store that
			// starts a key's window at its first admission says so in every attempt, and fails.
			tm.again("the fill reported ResetAfter = %v, a whole window: made after the boundary, or its window starts at the fill", fill.ResetAfter)
		}
		if fill.ResetAfter > window/5+2*time.Millisecond {
			t.Fatalf("a key filled in the last fifth of an aligned window reported ResetAfter = %v; want at most %v: its window ends at the next multiple of %v, not a window after the fill",
				fill.ResetAfter, window/5, window)
		}
		tm.sleep(fill.ResetAfter)
		d := tm.run(s, key, lim, []step{{n: 3, allowed: true, remaining: 0, fresh: true}})[0]
		if d.ResetAfter < window-slack(window) {
			t.Errorf("the first admission at an aligned window's start: ResetAfter = %v; want about the whole window, %v", d.ResetAfter, window)
		}
	})
}

// testOnTheUnixGrid: with a clock to check against, every window ends at a multiple of its period in
// Unix time (run checks each Decision with takeTimed) — for periods that divide a day and one that
// does not divide a minute.
func testOnTheUnixGrid(t *testing.T, b Backend) {
	if _, ok := b.(ClockBackend); !ok {
		t.Skip("the Backend tells no time (limittest.ClockBackend): aligned windows are checked against one another only")
	}
	s := b.Open(t)
	for _, w := range []time.Duration{7 * time.Millisecond, 400 * time.Millisecond, 1500 * time.Millisecond, 7 * time.Second, time.Minute} {
		run(t, b, s, newKey(), aw(3, w), []step{{n: 1, allowed: true, remaining: 2, fresh: true}})
	}
}
