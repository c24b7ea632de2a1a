package limittest

import (
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
)

// fixedWindow returns the fixed_window algorithm (docs/fixed-window.md) and the cases only it passes.
func fixedWindow() *algorithm {
	return &algorithm{alg: admit.FixedWindow, maxRate: bound.MaxRate, refill: exactWindow, windowFromFirst: true, largest: fw(bound.MaxRate, time.Minute), settles: true, cases: []algorithmCase{
		{"Sequence", testSequence},
		{"WindowExpires", testWindowExpires},
		{"WindowEndsAtItsLastInstant", testWindowEndsAtItsLastInstant},
		{"WindowStartsAtFirstAdmission", testWindowStartsAtFirstAdmission},
		{"PeekExistingKey", testPeekExistingKey},
	}}
}

// fw returns a fixed-window Limit of rate units per period.
func fw(rate int64, period time.Duration) admit.Limit {
	return admit.Limit{Name: "limittest", Algorithm: admit.FixedWindow, Rate: rate, Period: period}
}

// checkFixedWindow reports, with t.Errorf, what d breaks of a fixed window's own invariants: a
// rejection waits for the window's end, so its ResetAfter is its RetryAfter.
func checkFixedWindow(t *testing.T, d admit.Decision, n int64) {
	t.Helper()
	if !d.Allowed && d.ResetAfter != d.RetryAfter {
		t.Errorf("Take(n=%d): rejected with ResetAfter = %v, RetryAfter = %v; want them equal (the time left in the window)", n, d.ResetAfter, d.RetryAfter)
	}
}

// fillThree returns the steps that fill a fresh key of a Limit of 3 one unit at a time, then more.
func fillThree(more ...step) []step {
	return append([]step{
		{n: 1, allowed: true, remaining: 2, fresh: true},
		{n: 1, allowed: true, remaining: 1},
		{n: 1, allowed: true, remaining: 0},
		{n: 1, allowed: false, remaining: 0},
	}, more...)
}

// resetNeverGrows reports, with t.Errorf, each of ds from ds[from] on whose ResetAfter is later than
// the one before it; why ends the message.
func resetNeverGrows(t *testing.T, ds []admit.Decision, from int, why string) {
	t.Helper()
	for i := from; i < len(ds); i++ {
		if ds[i].ResetAfter > ds[i-1].ResetAfter {
			t.Errorf("step %d: ResetAfter grew from %v to %v%s", i, ds[i-1].ResetAfter, ds[i].ResetAfter, why)
		}
	}
}

func testSequence(t *testing.T, b Backend) {
	ds := run(t, b, b.Open(t), newKey(), fw(3, time.Minute), fillThree(step{n: 1, allowed: false, remaining: 0}))
	// On a shared clock the window only shrinks: nothing above may have moved it.
	resetNeverGrows(t, ds, 1, "; the window must never be extended")
}

func testWindowExpires(t *testing.T, b Backend) {
	const window = 300 * time.Millisecond
	lim := fw(3, window)
	s := b.Open(t)
	// Three Takes in a row fall in one window.
	timed(t, b, window/3, func(tm *timing) { testWindowExpiresOnce(tm, s, lim) })
}

func testWindowExpiresOnce(tm *timing, s admit.Store, lim admit.Limit) {
	window := lim.Period
	tm.run(s, newKey(), lim, []step{
		{n: 1, allowed: true, remaining: 2, fresh: true},
		{n: 2, allowed: true, remaining: 0},
		{n: 1, allowed: false, remaining: 0},
		// The window has ended: a new one starts with the full allowance.
		{sleep: window + window/4, n: 1, allowed: true, remaining: 2, fresh: true},
		{n: 1, allowed: true, remaining: 1},
		{n: 2, allowed: false, remaining: 1},
		{sleep: window + window/4, n: 0, allowed: true, remaining: 3},
		{n: 3, allowed: true, remaining: 0, fresh: true},
	})
}

// testWindowEndsAtItsLastInstant checks the boundary: exactly one window after its first admission a
// window is over, and the next admission starts a new one (for Redis, the key's expiry millisecond,
// when GET still returns it but PTTL answers 0, is that instant).
func testWindowEndsAtItsLastInstant(t *testing.T, b Backend) {
	const window = 100 * time.Millisecond
	lim := fw(2, window)
	run(t, b, b.Open(t), newKey(), lim, []step{
		{n: 2, allowed: true, remaining: 0, fresh: true},
		{sleep: window, n: 1, allowed: true, remaining: 1, fresh: true},
		{sleep: window, n: 0, allowed: true, remaining: 2},
	})
}

func testWindowStartsAtFirstAdmission(t *testing.T, b Backend) {
	const window = time.Second
	lim := fw(3, window)
	s := b.Open(t)
	// The second Take comes less than half a window after the first.
	timed(t, b, 2*window/5, func(tm *timing) { testWindowStartsAtFirstAdmissionOnce(tm, s, newKey(), lim) })
}

func testWindowStartsAtFirstAdmissionOnce(tm *timing, s admit.Store, key string, lim admit.Limit) {
	t, window := tm.t, lim.Period
	// A window aligned to clock boundaries would not report the whole window here.
	tm.run(s, key, lim, []step{{n: 1, allowed: true, remaining: 2, fresh: true}})

	tm.sleep(window / 2)
	d := tm.take(s, key, lim, 1)
	if d.Allowed && d.Remaining == 2 {
		t.Fatalf("Take %v after the first admission started a new window (remaining 2); want the first window, which lasts %v", window/2, window)
	}
	if !d.Allowed || d.Remaining != 1 {
		t.Fatalf("Take %v after the first admission = allowed %v, remaining %d; want allowed, remaining 1", window/2, d.Allowed, d.Remaining)
	}
	if most := window/2 + slack(window); d.ResetAfter > most {
		t.Fatalf("Take %v after the first admission: ResetAfter = %v; want at most %v (about %v): an admission must not extend the window",
			window/2, d.ResetAfter, most, window/2)
	}

	// The first window ends one window after the first admission, not after the last.
	tm.run(s, key, lim, []step{
		{sleep: window/2 + window/4, n: 1, allowed: true, remaining: 2, fresh: true},
	})
}

func testPeekExistingKey(t *testing.T, b Backend) {
	lim := fw(3, time.Minute)
	s := b.Open(t)
	key := newKey()
	run(t, b, s, key, lim, []step{
		{n: 1, allowed: true, remaining: 2, fresh: true},
		{n: 0, allowed: true, remaining: 2},
		{n: 0, allowed: true, remaining: 2},
		{n: 0, allowed: true, remaining: 2},
		{n: 2, allowed: true, remaining: 0},
		// A peek of a full key: still allowed (the key is at, not over, its limit), nothing left.
		{n: 0, allowed: true, remaining: 0},
		{n: 0, allowed: true, remaining: 0},
		{n: 1, allowed: false, remaining: 0},
	})
	// Under a smaller Limit the same key is over its limit, and a peek is rejected.
	one := fw(1, time.Minute)
	run(t, b, s, key, one, []step{{n: 0, allowed: false, remaining: 0}})
	// Nothing was consumed by any peek.
	big := fw(100, time.Minute)
	run(t, b, s, key, big, []step{{n: 0, allowed: true, remaining: 97}})
}
