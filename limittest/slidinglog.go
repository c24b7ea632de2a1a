package limittest

import (
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
)

// slidingLog returns the sliding_log algorithm (docs/sliding-log.md) and the cases only it passes.
func slidingLog() *algorithm {
	return &algorithm{alg: admit.SlidingLog, maxRate: bound.MaxSlidingLogRate, refill: exactWindow, largest: sl(bound.MaxSlidingLogRate, time.Minute), settles: true, cases: []algorithmCase{
		{"Sequence", testSlidingLogSequence},
		{"EntriesLeaveOneByOne", testEntriesLeaveOneByOne},
		{"EveryUnitIsLogged", testEveryUnitIsLogged},
		{"EmptiesOneWindowAfterTheLastAdmission", testEmptiesAfterLastAdmission},
	}}
}

// sl returns a sliding-log Limit of rate units per period.
func sl(rate int64, period time.Duration) admit.Limit {
	return admit.Limit{Name: "limittest", Algorithm: admit.SlidingLog, Rate: rate, Period: period}
}

// checkSlidingLog reports, with t.Errorf, what d breaks of a sliding log's own invariants: units
// just admitted leave the window exactly one window from now, so an admission's ResetAfter is the
// window; a rejection waits for older entries, no longer than the key takes to empty.
func checkSlidingLog(t *testing.T, d admit.Decision, lim admit.Limit, n int64) {
	t.Helper()
	if d.Allowed && n > 0 && d.ResetAfter != lim.Period {
		t.Errorf("Take(n=%d) admitted with ResetAfter = %v; want exactly the window %v, when the units just logged leave it", n, d.ResetAfter, lim.Period)
	}
	if !d.Allowed && d.RetryAfter > d.ResetAfter {
		t.Errorf("Take(n=%d): rejected with RetryAfter = %v after ResetAfter = %v; want it no later", n, d.RetryAfter, d.ResetAfter)
	}
}

func testSlidingLogSequence(t *testing.T, b Backend) {
	lim := sl(3, time.Minute)
	start := backendNow(t, b)
	ds := run(t, b, b.Open(t), newKey(), lim, fillThree(
		step{n: 2, allowed: false, remaining: 0},
		step{n: 0, allowed: true, remaining: 0},
	))
	// The first entry leaves first; a cost of 2 waits for the second too, which leaves no earlier. On a
	// real-time backend the second rejection is decided later than the first, by at most elapsed, so
	// its wait for a no earlier exit may be that much shorter (and a millisecond, for rounding up).
	least := ds[3].RetryAfter
	if elapsed := backendNow(t, b).Sub(start); elapsed > 0 {
		least -= elapsed + time.Millisecond
	}
	if ds[3].RetryAfter > ds[0].ResetAfter || ds[4].RetryAfter < least || ds[4].RetryAfter > ds[1].ResetAfter {
		t.Errorf("rejections of 1 and 2 wait %v and %v; want the first entry's exit (at most %v), then the second's (at most %v, at least %v)",
			ds[3].RetryAfter, ds[4].RetryAfter, ds[0].ResetAfter, ds[1].ResetAfter, least)
	}
}

// testEntriesLeaveOneByOne checks the moving window: entries admitted a third of a window apart
// leave a third of a window apart, each freeing its own unit only — never the whole allowance at
// once, as a window that ends would.
func testEntriesLeaveOneByOne(t *testing.T, b Backend) {
	const window = 600 * time.Millisecond
	lim := sl(3, window)
	s := b.Open(t)
	// The three entries fall within one window, and each round admits before the next entry leaves.
	timed(t, b, window/8, func(tm *timing) {
		key := newKey()
		tm.run(s, key, lim, []step{
			{n: 1, allowed: true, remaining: 2, fresh: true},
			{sleep: window / 3, n: 1, allowed: true, remaining: 1},
			{sleep: window / 3, n: 1, allowed: true, remaining: 0},
		})
		for i := range 2 {
			// The oldest entry is at least two thirds of a window old in the first round, a little less in
			// the second on a real-time backend (its admission came a third of a window after the first,
			// or a little later).
			most := window/3 + time.Millisecond
			if i > 0 {
				most += slack(window)
			}
			d := tm.take(s, key, lim, 1)
			if d.Allowed || d.RetryAfter > most {
				t.Fatalf("round %d: Take with 3 entries logged a third of a window apart: %+v; want rejected until the oldest leaves, at most %v from now", i, d, most)
			}
			tm.sleep(d.RetryAfter)
			tm.run(s, key, lim, []step{{n: 1, allowed: true, remaining: 0}}) // only the oldest has left
		}
	})
}

// testEveryUnitIsLogged checks that each unit of a cost is logged, however many admissions share an
// instant (a fake clock does not move between them).
func testEveryUnitIsLogged(t *testing.T, b Backend) {
	lim := sl(10, time.Minute)
	s := b.Open(t)
	key := newKey()
	ds := run(t, b, s, key, lim, []step{
		{n: 3, allowed: true, remaining: 7, fresh: true},
		{n: 3, allowed: true, remaining: 4},
		{n: 3, allowed: true, remaining: 1},
		{n: 2, allowed: false, remaining: 1},
		{n: 1, allowed: true, remaining: 0},
		{n: 0, allowed: true, remaining: 0},
	})
	// The rejected cost of 2 needed one entry to leave: one of the first admission's.
	if ds[3].RetryAfter > ds[0].ResetAfter || ds[3].RetryAfter <= ds[0].ResetAfter-slack(lim.Period) {
		t.Errorf("a rejection of 2 with 9 of 10 logged: RetryAfter %v; want the first admission's exit, %v", ds[3].RetryAfter, ds[0].ResetAfter)
	}
	run(t, b, s, key, sl(100, time.Minute), []step{{n: 0, allowed: true, remaining: 90}})
}

// testEmptiesAfterLastAdmission checks that a log empties one window after its last admission, and
// only then.
func testEmptiesAfterLastAdmission(t *testing.T, b Backend) {
	const window = 300 * time.Millisecond
	lim := sl(2, window)
	s := b.Open(t)
	// From the second admission to the second peek, less than a window passes.
	timed(t, b, window/7, func(tm *timing) {
		key := newKey()
		tm.run(s, key, lim, []step{
			{n: 1, allowed: true, remaining: 1, fresh: true},
			{sleep: window / 2, n: 1, allowed: true, remaining: 0},
			// The first entry has left; the second has a third of the window to go.
			{sleep: window/2 + window/6, n: 0, allowed: true, remaining: 1},
		})
		d := tm.take(s, key, lim, 0)
		if d.ResetAfter == 0 || d.ResetAfter > window/3 {
			t.Fatalf("a peek with the last entry %v old: ResetAfter %v; want its exit, at most %v from now", window/2+window/6, d.ResetAfter, window/3)
		}
		tm.sleep(d.ResetAfter)
		if d := tm.take(s, key, lim, 0); d.Remaining != 2 || d.ResetAfter != 0 {
			t.Fatalf("a peek when the last entry has left: %+v; want remaining 2, ResetAfter 0", d)
		}
	})
}

// backendNow returns the time by b's clock when b is a ClockBackend (a fake clock stands still
// between Sleeps), else by the wall clock.
func backendNow(t *testing.T, b Backend) time.Time {
	t.Helper()
	if c, ok := b.(ClockBackend); ok {
		return c.Now(t)
	}
	return time.Now()
}
