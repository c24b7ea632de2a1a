package limittest

import (
	"encoding/hex"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/admit-dev/admit"
)

// Backend is one test's storage; every Store it opens shares its state.
// Its methods are called from the test's goroutine only.
type Backend interface {
	// Open returns a Store on this backend. For Redis each call is a new client of the same server; an
	// in-process store may return the same Store each time.
	Open(t *testing.T) admit.Store
	// Sleep lets d pass for every Store of this backend: a fake clock advances, or real time passes.
	Sleep(t *testing.T, d time.Duration)
}

// TestStore runs the conformance suite. newBackend is called once per subtest.
//
// For each algorithm it runs the cases every algorithm passes (concurrency, bounds, invalid input, a
// done context, read-only rejections, short windows), those of reserve, then settle, for the
// algorithms that settle (Settle/…), those of Store.Reset (Reset/…), and the algorithm's own step tables, as
// subtests named after the algorithm (TestConformance/fixed_window/Concurrent; fixed windows aligned
// to the clock are TestConformance/fixed_window_aligned/…); then the cases of the
// request model: several policies at once (MultiPolicy/…), tiers of one policy (Tiers/…),
// idempotent retries (Idempotency/…), per-subject overrides (<algorithm>/Override/… for each
// algorithm, Overrides/… once: limittest/override.go),
// and, for a [SharedBackend], a race between
// several OS processes with exact totals (MultiProcess). The subtests run one after the other, on
// the calling goroutine, and may be selected with -run as usual.
func TestStore(t *testing.T, newBackend func(t *testing.T) Backend) {
	t.Helper()
	if runChild(t, newBackend) {
		return // this process is a child of MultiProcess, and has done its part
	}
	for _, a := range algorithms() {
		t.Run(a.name(), func(t *testing.T) {
			for _, c := range sharedCases {
				t.Run(c.name, func(t *testing.T) {
					b := newBackend(t)
					a.prepare(t, b)
					c.run(t, b, a)
				})
			}
			for _, c := range settleCases {
				if !a.settles {
					continue
				}
				t.Run(c.name, func(t *testing.T) {
					b := newBackend(t)
					a.prepare(t, b)
					c.run(t, b, a)
				})
			}
			for _, c := range resetCases {
				t.Run(c.name, func(t *testing.T) {
					b := newBackend(t)
					a.prepare(t, b)
					c.run(t, b, a)
				})
			}
			for _, c := range overrideCases {
				t.Run(c.name, func(t *testing.T) {
					b := newBackend(t)
					a.prepare(t, b)
					c.run(t, b, a)
				})
			}
			for _, c := range a.cases {
				t.Run(c.name, func(t *testing.T) { c.run(t, newBackend(t)) })
			}
		})
	}
	for _, c := range requestCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newBackend(t)) })
	}
	for _, c := range overrideRequestCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newBackend(t)) })
	}
}

// An algorithm is what the suite knows of one admit.Algorithm: how to make its Limits, what the
// shared cases expect of it where algorithms differ, and the cases only it passes. An algorithm joins
// the suite with an entry in algorithms and, for the invariants of its Decisions beyond those of every
// Decision, one in checkAlgorithm. Every entry sets every field the shared cases read: all but
// aligned and roomFor.
type algorithm struct {
	alg     admit.Algorithm
	aligned bool // FixedWindow with Limit.Aligned, a variant with its own subtests
	cases   []algorithmCase
	// maxRate is the largest Rate of the algorithm's Limits of a minute: bound.MaxRate, or less for an
	// algorithm whose state grows with its Rate (a sliding log) or whose Rate is bounded by its Period
	// (GCRA, one unit per microsecond).
	maxRate int64
	// refill returns the least and the most time a fresh key filled by one admission under lim takes
	// to return to its full allowance, from that admission: its ResetAfter, and the RetryAfter of a
	// rejection right after it. Exactly the window for a fixed window or a log; MaxWait for GCRA; the
	// rest of the window that holds the admission for an aligned window.
	refill func(lim admit.Limit) (lo, hi time.Duration)
	// windowFromFirst reports whether the time a key takes to return to its full allowance runs from
	// its first admission, so that, once admissions soon after it have used the whole allowance,
	// ResetAfter counts down from at most MaxWait at that first admission: a fixed window's window
	// starts at its first admission (an aligned one's before it) and nothing but its end restarts it;
	// a GCRA key whose Capacity is admitted from its first unit on, before any comes back, has it all
	// back Capacity emission intervals after that first unit. Not so for a sliding window or log,
	// whose later admissions weigh until later.
	windowFromFirst bool
	// roomFor returns a Limit of the algorithm with room for units in all that reads the state lim
	// leaves on a key as lim does; nil means lim with a Rate of units.
	roomFor func(lim admit.Limit, units int64) admit.Limit
	// largest is the Limit of the algorithm with the largest Capacity whose keys' state does not
	// change for a minute after their first admission, however time passes.
	largest admit.Limit
	// settles reports whether a Store settles reservations of the algorithm (docs/reserve-settle.md): the
	// Settle/… cases run for it.
	settles bool
	// unitCost reports whether a Request costs at most 1 under the algorithm's Limits, as a
	// concurrency lease does: the shared cases then take several units one at a time (see steps).
	unitCost bool
}

// steps returns steps as the algorithm can take them: as they are, or, for an algorithm of unit
// cost, with every admitted step of n > 1 units made n steps of 1 (the first fresh if it was), and
// every rejected step of n > 1 left out — its premise, a cost that does not fit where a smaller one
// would, does not apply when no cost is above 1.
func (a *algorithm) steps(steps []step) []step {
	if !a.unitCost {
		return steps
	}
	var out []step
	for _, st := range steps {
		switch {
		case st.n <= 1:
			out = append(out, st)
		case st.allowed:
			for i := range st.n {
				one := step{n: 1, allowed: true, remaining: st.remaining + st.n - 1 - i}
				if i == 0 {
					one.sleep, one.fresh = st.sleep, st.fresh
				}
				out = append(out, one)
			}
		}
	}
	return out
}

// exactWindow is the refill of an algorithm whose full key returns to its allowance exactly one
// window after its admission.
func exactWindow(lim admit.Limit) (lo, hi time.Duration) { return lim.Period, lim.Period }

// An algorithmCase is a subtest of one algorithm only.
type algorithmCase struct {
	name string
	run  func(t *testing.T, b Backend)
}

// algorithms returns the algorithms the suite checks, in order.
func algorithms() []*algorithm {
	return []*algorithm{fixedWindow(), alignedWindow(), gcra(), slidingWindow(), slidingLog(), concurrency()}
}

// algorithmOf returns the suite's algorithm of lim (its Algorithm, aligned or not), or nil.
func algorithmOf(lim admit.Limit) *algorithm {
	for _, a := range algorithms() {
		if a.alg == lim.Algorithm && a.aligned == lim.Aligned {
			return a
		}
	}
	return nil
}

// name returns the name of the algorithm's subtests: its configuration name, such as
// "fixed_window", or "fixed_window_aligned".
func (a *algorithm) name() string {
	if a.aligned {
		return a.alg.String() + "_aligned"
	}
	return a.alg.String()
}

// limit returns a Limit of the algorithm: rate units per period, named after the algorithm.
func (a *algorithm) limit(rate int64, period time.Duration) admit.Limit {
	return admit.Limit{Name: "limittest", Algorithm: a.alg, Rate: rate, Period: period, Aligned: a.aligned}
}

// prepare readies b for one of the shared cases, most of which assume that no window of a minute
// ends while they run: for aligned fixed windows and sliding windows, whose windows end at every
// minute of the clock, it lets the next such end pass first if it is near (see settle). Other
// algorithms need nothing.
func (a *algorithm) prepare(t *testing.T, b Backend) {
	t.Helper()
	if a.aligned || a.alg == admit.SlidingWindow { // both align their windows to the clock's minutes
		settle(t, b, aw(1, time.Minute), minuteMargin)
	}
}

// perMinute returns a Limit of rate units per minute: a window long enough that it never ends during
// a subtest.
func (a *algorithm) perMinute(rate int64) admit.Limit { return a.limit(rate, time.Minute) }

// withRoom returns a Limit that reads the state lim leaves on a key as lim does, with room for units.
func (a *algorithm) withRoom(lim admit.Limit, units int64) admit.Limit {
	if a.roomFor != nil {
		return a.roomFor(lim, units)
	}
	lim.Rate = units
	return lim
}

// checkAlgorithm reports, with t.Errorf, what d breaks of the invariants of lim's algorithm beyond
// those of every Decision. It is safe to call from any goroutine.
func checkAlgorithm(t *testing.T, d admit.Decision, lim admit.Limit, n int64) {
	t.Helper()
	switch lim.Algorithm {
	case admit.FixedWindow:
		checkFixedWindow(t, d, n)
	case admit.SlidingWindow:
		checkSlidingWindow(t, d, lim, n)
	case admit.SlidingLog:
		checkSlidingLog(t, d, lim, n)
	case admit.GCRA:
		checkGCRA(t, d, lim, n)
	case admit.Concurrency:
		checkConcurrency(t, d, lim, n)
	}
}

// slack is how far a duration reported by a real-time backend may fall short of the exact value:
// a quarter of the window.
func slack(window time.Duration) time.Duration { return window / 4 }

// tolerance is how much more time than a timed case asks may pass between two of its Takes (see
// [timed]): four fifths of the slack, the rest left for durations rounded to the millisecond.
func tolerance(window time.Duration) time.Duration { return slack(window) * 4 / 5 }

// newKey returns a key that no other subtest, test run or process uses.
func newKey() string {
	var b [12]byte
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return "rl:limittest:" + hex.EncodeToString(b[:])
}

// newSlot returns a hash tag that no other subtest, test run or process uses: keys that contain it
// share one Redis Cluster hash slot.
func newSlot() string {
	var b [12]byte
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return "{" + hex.EncodeToString(b[:]) + "}"
}

// keyBuilder returns a KeyBuilder with a fixed secret: every Store of the suite, in any process,
// makes the same keys.
func keyBuilder(t *testing.T) *admit.KeyBuilder {
	t.Helper()
	kb, err := admit.NewKeyBuilder([]byte("limittest secret, not for production"))
	if err != nil {
		t.Fatal(err)
	}
	return kb
}

// take calls s.Take, fails the test on an error, and checks the invariants of every Decision.
func take(t *testing.T, s admit.Store, key string, lim admit.Limit, n int64) admit.Decision {
	t.Helper()
	d, err := s.Take(t.Context(), admit.Request{Key: key, Limit: lim, Cost: n})
	if err != nil {
		t.Fatalf("Take(n=%d) under %v: unexpected error: %v", n, lim, err)
	}
	checkDecision(t, d, lim, n)
	checkToken(t, d, n)
	return d
}

// checkToken reports, with t.Errorf, a Decision of n units that admitted them all (alone, or with
// every policy decided together) without a token: Take sets one on every admission that consumes.
func checkToken(t *testing.T, d admit.Decision, n int64) {
	t.Helper()
	if d.Allowed && n > 0 && d.Token == 0 {
		t.Errorf("Take(n=%d): admitted with Token 0; want the token of the window its units were counted in", n)
	}
}

// checkDecision reports, with t.Errorf, every way d breaks the invariants of a Decision for n units
// under lim: those of every algorithm, then lim's algorithm's own. It is safe to call from any
// goroutine.
func checkDecision(t *testing.T, d admit.Decision, lim admit.Limit, n int64) {
	t.Helper()
	if d.Limit != lim {
		t.Errorf("Take(n=%d): Decision.Limit = %+v; want the Limit passed, %+v", n, d.Limit, lim)
	}
	if d.Remaining < 0 || d.Remaining > lim.Capacity() {
		t.Errorf("Take(n=%d): Remaining = %d; want 0…%d", n, d.Remaining, lim.Capacity())
	}
	if d.Replayed {
		t.Errorf("Take(n=%d) without an ID: Replayed", n)
	}
	if d.Token != 0 && !(d.Allowed && n > 0) {
		t.Errorf("Take(n=%d): allowed %v with Token %d; want a token only for an admission that consumed", n, d.Allowed, d.Token)
	}
	if d.Allowed {
		if d.RetryAfter != 0 {
			t.Errorf("Take(n=%d): allowed with RetryAfter = %v; want 0", n, d.RetryAfter)
		}
		if d.ResetAfter < 0 || d.ResetAfter > lim.MaxWait() {
			t.Errorf("Take(n=%d): allowed with ResetAfter = %v; want 0…%v", n, d.ResetAfter, lim.MaxWait())
		}
		if n > 0 && d.ResetAfter == 0 {
			t.Errorf("Take(n=%d): admitted with ResetAfter = 0; want the time until the key is full again", n)
		}
	} else if d.RetryAfter <= 0 || d.RetryAfter > lim.MaxWait() {
		t.Errorf("Take(n=%d): rejected with RetryAfter = %v; want more than 0 and at most %v, the Limit's MaxWait", n, d.RetryAfter, lim.MaxWait())
	}
	checkAlgorithm(t, d, lim, n)
}

// checkFresh reports whether d, of n units, was decided on a missing key: ResetAfter is the time such
// a key takes to return to its full allowance (the algorithm's refill, within slack), for a fixed
// window the whole window; for an aligned window, the time to its end (see checkAlignedFresh); for
// GCRA, exactly the n emission intervals admitted, rounded up to the millisecond, on any backend.
func checkFresh(t *testing.T, d admit.Decision, lim admit.Limit, n int64) {
	t.Helper()
	switch {
	case lim.Aligned:
		checkAlignedFresh(t, d, lim)
		return
	case lim.Algorithm == admit.GCRA:
		want := (time.Duration(n)*lim.EmissionInterval() + time.Millisecond - 1).Truncate(time.Millisecond)
		if d.ResetAfter != want {
			t.Errorf("a Take of %d units of an empty bucket: ResetAfter = %v; want n × the emission interval %v, rounded up to the millisecond: %v",
				n, d.ResetAfter, lim.EmissionInterval(), want)
		}
		return
	}
	lo, hi := algorithmOf(lim).refill(lim)
	if least := lo - slack(lim.Period); d.ResetAfter <= least || d.ResetAfter > hi {
		t.Errorf("a Take that starts a window: ResetAfter = %v; want %v…%v (more than %v for a real-time backend)", d.ResetAfter, lo, hi, least)
	}
}

// A step is one Take in a table run by [run], and what its Decision must report.
type step struct {
	sleep     time.Duration // let this much time pass first, with Backend.Sleep
	n         int64         // cost; 0 is a peek
	allowed   bool
	remaining int64
	fresh     bool // the Take finds the key missing: for a fixed window, ResetAfter is the whole window
}

// run performs steps on key of s under lim, in order, and returns their Decisions. A case whose steps
// hold only while no more time passes than they ask runs them with [timing.run] instead.
func run(t *testing.T, b Backend, s admit.Store, key string, lim admit.Limit, steps []step) []admit.Decision {
	t.Helper()
	return untimed(t, b).run(s, key, lim, steps)
}
