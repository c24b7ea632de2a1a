package limittest

import (
	"fmt"
	"testing"
	"time"

	"github.com/admit-dev/admit"
)

// Real time on a loaded machine. A case whose expectations hold only while little more time passes
// than it asks of Backend.Sleep — a bucket refills, a window ends, a lease expires — cannot rely on a
// sleep taking what it asked, or on two calls in a row being a moment apart: on a busy machine either
// can take hundreds of milliseconds more. Such a case runs its Takes through a timing: each Take is
// bracketed by the real clock, so the time that may have passed on the Backend since the previous
// Take is known — at most the real time from before the previous Take to after this one, and never
// less than what the case asked of Sleep meanwhile. When that is more than the case's tolerance
// beyond what it asked, the attempt is abandoned before anything it decided is checked, and the
// case starts again on new keys; only a machine too slow in every one of attempts fails it. Within
// an attempt, then, the time between two consecutive Takes is what was asked plus at most the
// tolerance, on a real clock or a fake one (whose Sleep passes exactly what it is asked, however
// long the machine takes).

// attempts is how many times a timed case starts again on a machine too slow for it.
const attempts = 5

// A timing runs one attempt of a timed case: see [timed].
type timing struct {
	t         *testing.T
	b         Backend
	tolerance time.Duration // the most that may pass between two Takes beyond what was asked; < 0: unchecked
	started   bool          // a Take has been made
	prev      time.Time     // the real time before the previous Take
	asked     time.Duration // asked of Backend.Sleep since the previous Take
	fake      bool          // a Sleep returned before the time it was asked for: the Backend's clock is not real time
}

// tooSlow is what an abandoned attempt panics with, for timed to recover.
type tooSlow struct{ why string }

// timed runs f, the body of a case, until an attempt of it is not abandoned for want of time (see
// above), at most attempts times: between two consecutive Takes of tm, at most tolerance more than
// was asked of tm.sleep may pass. f must make its keys anew in each attempt.
func timed(t *testing.T, b Backend, tolerance time.Duration, f func(tm *timing)) {
	t.Helper()
	var why string
	for attempt := 1; attempt <= attempts; attempt++ {
		tm := &timing{t: t, b: b, tolerance: tolerance}
		if why = tm.try(f); why == "" {
			return
		}
		t.Logf("attempt %d of %d abandoned, the machine too slow for it: %s", attempt, attempts, why)
	}
	t.Fatalf("in %d attempts, the machine never ran the case's calls within %v of the time asked: the last %s", attempts, tolerance, why)
}

// try runs f on tm, and returns why the attempt was abandoned, or "".
func (tm *timing) try(f func(tm *timing)) (why string) {
	defer func() {
		if r := recover(); r != nil {
			s, ok := r.(tooSlow)
			if !ok {
				panic(r)
			}
			why = s.why
		}
	}()
	f(tm)
	return ""
}

// untimed returns a timing that checks nothing: run's.
func untimed(t *testing.T, b Backend) *timing { return &timing{t: t, b: b, tolerance: -1} }

// again abandons the attempt for the reason why, formatted as by fmt.Sprintf.
func (tm *timing) again(format string, args ...any) {
	panic(tooSlow{why: fmt.Sprintf(format, args...)})
}

// sleep lets d pass on the Backend. A Sleep that returns sooner than d of real time cannot have
// slept: the Backend's clock is fake, and passes exactly what it is asked, so that the attempt need
// not be timed any more (however slowly the machine runs it).
func (tm *timing) sleep(d time.Duration) {
	tm.t.Helper()
	start := time.Now()
	tm.b.Sleep(tm.t, d)
	if time.Since(start) < d {
		tm.fake = true
	}
	tm.asked += d
}

// take is takeTimed, and abandons the attempt, before the Decision is checked against anything but
// the invariants of every Decision, if more than the tolerance may have passed since the previous
// Take beyond what was asked of sleep.
func (tm *timing) take(s admit.Store, key string, lim admit.Limit, n int64) admit.Decision {
	tm.t.Helper()
	before := time.Now()
	d := takeTimed(tm.t, tm.b, s, key, lim, n)
	tm.check(before)
	return d
}

// do makes the call f as one of tm's Takes: timed, and checked likewise.
func (tm *timing) do(f func()) {
	tm.t.Helper()
	before := time.Now()
	f()
	tm.check(before)
}

// check records a call made from before to now, abandoning the attempt if it came too late.
func (tm *timing) check(before time.Time) {
	if tm.started && tm.tolerance >= 0 && !tm.fake {
		if gap := time.Since(tm.prev); gap-tm.asked > tm.tolerance {
			tm.again("up to %v passed between two calls, %v asked", gap.Round(time.Millisecond), tm.asked)
		}
	}
	tm.started, tm.prev, tm.asked = true, before, 0
}

// run is [run], on tm.
func (tm *timing) run(s admit.Store, key string, lim admit.Limit, steps []step) []admit.Decision {
	t := tm.t
	t.Helper()
	ds := make([]admit.Decision, len(steps))
	for i, st := range steps {
		if st.sleep > 0 {
			tm.sleep(st.sleep)
		}
		d := tm.take(s, key, lim, st.n)
		if d.Allowed != st.allowed || d.Remaining != st.remaining {
			t.Fatalf("step %d: Take(n=%d) under %v = allowed %v, remaining %d; want allowed %v, remaining %d",
				i, st.n, lim, d.Allowed, d.Remaining, st.allowed, st.remaining)
		}
		if st.fresh {
			checkFresh(t, d, lim, st.n)
		}
		ds[i] = d
	}
	return ds
}
