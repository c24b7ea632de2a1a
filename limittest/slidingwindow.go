package limittest

import (
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
)

// slidingWindow returns the sliding_window algorithm (docs/sliding-window.md) and the cases only it passes.
//
// Its windows are aligned to the backend's Unix time, which the suite does not know; so its cases
// read where in its window a key is from the Decisions themselves (ResetAfter is the time until the
// current window's count stops weighing, in whole milliseconds), and check each Decision against the
// estimate at that point. On a fake clock the scenarios land where they are meant to; on a real one
// they still check every Decision exactly, wherever sleeps land.
func slidingWindow() *algorithm {
	return &algorithm{alg: admit.SlidingWindow, maxRate: bound.MaxRate, largest: sw(bound.MaxRate, time.Minute), settles: true, cases: []algorithmCase{
		{"Sequence", testSlidingWindowSequence},
		{"PreviousWindowWeighs", testPreviousWindowWeighs},
		{"WindowsAreAligned", testWindowsAreAligned},
		{"ForgetsAfterTwoWindows", testForgetsAfterTwoWindows},
	}, refill: func(lim admit.Limit) (lo, hi time.Duration) {
		// The rest of the aligned window, then the next, in which the units still weigh.
		return lim.Period + time.Millisecond, 2 * lim.Period
	}}
}

// sw returns a sliding-window Limit of rate units per period.
func sw(rate int64, period time.Duration) admit.Limit {
	return admit.Limit{Name: "limittest", Algorithm: admit.SlidingWindow, Rate: rate, Period: period}
}

// checkSlidingWindow reports, with t.Errorf, what d breaks of a sliding window's own invariants:
// admitted units weigh until the end of the next window, more than one window and at most two from
// now; a rejection waits no longer than the key takes to empty.
func checkSlidingWindow(t *testing.T, d admit.Decision, lim admit.Limit, n int64) {
	t.Helper()
	if d.Allowed && n > 0 && (d.ResetAfter <= lim.Period || d.ResetAfter > 2*lim.Period) {
		t.Errorf("Take(n=%d) admitted with ResetAfter = %v; want more than the window %v and at most two (the units weigh until the end of the next window)",
			n, d.ResetAfter, lim.Period)
	}
	if !d.Allowed && d.RetryAfter > d.ResetAfter {
		t.Errorf("Take(n=%d): rejected with RetryAfter = %v after ResetAfter = %v; want it no later", n, d.RetryAfter, d.ResetAfter)
	}
}

// estimate checks d, the Decision of n units under lim on a key whose previous window holds p units
// and whose current window c (before d), against the sliding-window estimate ⌈p × (w − e)/w⌉ + c at
// the point e into the current window that d's own ResetAfter gives, and returns e. ResetAfter is in
// whole milliseconds, rounded up, so e lies in [returned e, e + 1 ms): d may report the estimate of
// any point of that millisecond.
func estimate(t *testing.T, d admit.Decision, lim admit.Limit, p, c, n int64) time.Duration {
	t.Helper()
	w := lim.Period
	after := c
	if d.Allowed {
		after += n
	}
	var e time.Duration
	switch {
	case after > 0:
		e = 2*w - d.ResetAfter
	case p > 0:
		e = w - d.ResetAfter
	default:
		if d.ResetAfter != 0 || !d.Allowed || d.Remaining != lim.Rate {
			t.Fatalf("Take(n=%d) of an empty key: %+v; want allowed, the whole rate left, ResetAfter 0", n, d)
		}
		return 0
	}
	if e < 0 || e >= w {
		t.Fatalf("Take(n=%d) with %d units in the previous window and %d in this one: ResetAfter %v puts it %v into a window of %v",
			n, p, c, d.ResetAfter, e, w)
	}
	// The previous window's weight over that millisecond: at most at its start, least at its end.
	weight := func(e time.Duration) int64 {
		W, E := w.Microseconds(), e.Microseconds()
		return (p*(W-E) + W - 1) / W
	}
	most, least := weight(e), weight(min(e+time.Millisecond-time.Microsecond, w))
	for v := least; v <= most; v++ {
		fits := v+c+n <= lim.Rate
		remaining := max(0, lim.Rate-c-v)
		if fits {
			remaining -= n
		}
		if d.Allowed == fits && d.Remaining == remaining {
			return e
		}
	}
	t.Fatalf("Take(n=%d) with %d units in the previous window and %d in this one, %v into a window of %v: allowed %v, remaining %d; "+
		"want the estimate ⌈%d × (w − e)/w⌉ + %d, with the previous window weighing %d to %d",
		n, p, c, e, w, d.Allowed, d.Remaining, p, c, least, most)
	return 0
}

func testSlidingWindowSequence(t *testing.T, b Backend) {
	ds := run(t, b, b.Open(t), newKey(), sw(3, time.Minute), fillThree(
		step{n: 1, allowed: false, remaining: 0},
		step{n: 0, allowed: true, remaining: 0},
	))
	// On a shared clock the key only empties: nothing above may have pushed its reset later, but
	// each admission, whose units weigh until the end of the next window.
	resetNeverGrows(t, ds, 3, " without an admission")
}

// testPreviousWindowWeighs fills a key in one window and follows its count into the next: the
// previous window's 4 units weigh ⌈4 × (w − e)/w⌉, 3 then 2 then 1, as the window passes.
func testPreviousWindowWeighs(t *testing.T, b Backend) {
	const window = 400 * time.Millisecond
	lim := sw(4, window)
	s := b.Open(t)
	// The peek comes at most 3w/8 plus a fifth into the next window, the two Takes after it within it.
	timed(t, b, window/5, func(tm *timing) {
		key := newKey()
		d := tm.run(s, key, lim, []step{{n: 4, allowed: true, remaining: 0, fresh: true}})[0]
		e := estimate(t, d, lim, 0, 0, 4)

		// 3/8 into the next window, where the 4 weigh 3.
		tm.sleep(window - e + 3*window/8)
		d = tm.take(s, key, lim, 0)
		if d.ResetAfter > window || d.ResetAfter == 0 {
			t.Fatalf("a peek in the window after the one filled: ResetAfter %v; want at most the window %v, more than 0: the previous window's units still weigh", d.ResetAfter, window)
		}
		estimate(t, d, lim, 4, 0, 0)

		d = tm.take(s, key, lim, 1)
		estimate(t, d, lim, 4, 0, 1)
		c := int64(0)
		if d.Allowed {
			c = 1
		}
		// A cost of 2 must wait until the 4 weigh no more than 1 (or 2 without the unit above): e ≥ 3w/4.
		d = tm.take(s, key, lim, 2)
		e = estimate(t, d, lim, 4, c, 2)
		if !d.Allowed && c == 1 {
			// The wait ends at w − ⌊1 × w/4⌋ into the window; the key empties at 2w: 5w/4 apart.
			if got := d.ResetAfter - d.RetryAfter; got != 5*window/4 {
				t.Fatalf("Take(n=2) %v into the window: RetryAfter %v, ResetAfter %v, %v apart; want 5w/4 = %v apart (the 4 weigh 1 at 3w/4)",
					e, d.RetryAfter, d.ResetAfter, got, 5*window/4)
			}
		}
		if !d.Allowed {
			// RetryAfter is the exact wait: the same request then fits.
			tm.sleep(d.RetryAfter)
			d = tm.take(s, key, lim, 2)
			if !d.Allowed {
				t.Fatalf("Take(n=2) after waiting the RetryAfter of its rejection: %+v; want it admitted", d)
			}
		}
	})
}

// testWindowsAreAligned checks that windows are aligned to the clock, not started by a key's first
// admission: two keys filled a quarter window apart report resets a quarter window apart (or, if a
// window began between them, three quarters the other way), not the same reset.
func testWindowsAreAligned(t *testing.T, b Backend) {
	const window = time.Second
	lim := sw(2, window)
	s := b.Open(t)
	// The second key is filled at most a fifth of a window later than asked: less than the slack.
	timed(t, b, window/5, func(tm *timing) {
		d1 := tm.run(s, newKey(), lim, []step{{n: 1, allowed: true, remaining: 1, fresh: true}})[0]
		tm.sleep(window / 4)
		d2 := tm.run(s, newKey(), lim, []step{{n: 1, allowed: true, remaining: 1, fresh: true}})[0]
		// Each ResetAfter is rounded up to a millisecond; time passes between the two beyond the sleep.
		sameWindow := d1.ResetAfter-d2.ResetAfter >= window/4-time.Millisecond && d1.ResetAfter-d2.ResetAfter < window/4+slack(window)
		nextWindow := d2.ResetAfter-d1.ResetAfter <= 3*window/4+time.Millisecond && d2.ResetAfter-d1.ResetAfter > 3*window/4-slack(window)
		if !sameWindow && !nextWindow {
			t.Fatalf("keys filled %v apart: ResetAfter %v and %v; want them %v apart (or %v the other way): windows aligned to the clock",
				window/4, d1.ResetAfter, d2.ResetAfter, window/4, 3*window/4)
		}
	})
}

// testForgetsAfterTwoWindows checks that a key's units weigh less as the next window passes, and
// not at all once it has: the key is then as a missing key.
func testForgetsAfterTwoWindows(t *testing.T, b Backend) {
	const window = 200 * time.Millisecond
	lim := sw(2, window)
	s := b.Open(t)
	// The first peek comes within the next window, at most a quarter past its half.
	timed(t, b, window/4, func(tm *timing) {
		key := newKey()
		d := tm.run(s, key, lim, []step{{n: 2, allowed: true, remaining: 0, fresh: true}})[0]
		// Halfway through the next window, the 2 weigh ⌈2 × 1/2⌉ = 1.
		tm.sleep(d.ResetAfter - window/2)
		d = tm.take(s, key, lim, 0)
		estimate(t, d, lim, 2, 0, 0)
		if d.ResetAfter == 0 || d.ResetAfter > window {
			t.Fatalf("a peek in the next window: ResetAfter %v; want the rest of the window, more than 0", d.ResetAfter)
		}
		tm.sleep(d.ResetAfter)
		tm.run(s, key, lim, []step{{n: 0, allowed: true, remaining: 2}})
		if d = tm.take(s, key, lim, 0); d.ResetAfter != 0 {
			t.Fatalf("a peek two windows after the key's admissions: ResetAfter %v; want 0, the key as missing", d.ResetAfter)
		}
		tm.run(s, key, lim, []step{{n: 2, allowed: true, remaining: 0, fresh: true}})
	})
}
