package guard_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/guard"
	"github.com/admit-dev/admit/memstore"
)

// errLate is a Store's own timeout while the backend answered other calls, as redisstore returns it.
var errLate = fmt.Errorf("store: %w: %w (%w)", admit.ErrUnavailable, context.DeadlineExceeded, guard.ErrClientLate)

// errLateOnly is a late client's error that does not match context.DeadlineExceeded: judged late
// already, with no deadline in its chain.
var errLateOnly = fmt.Errorf("store: %w (%w)", admit.ErrUnavailable, guard.ErrClientLate)

// errTimeout is a Store's own timeout while nothing was answered.
var errTimeout = fmt.Errorf("store: %w: %w", admit.ErrUnavailable, context.DeadlineExceeded)

// scripted is a memstore whose Takes fail with err, when it is set.
type scripted struct {
	admit.Store
	err error
}

func (s *scripted) Take(ctx context.Context, r admit.Request) (admit.Decision, error) {
	if s.err != nil {
		return admit.Decision{}, s.err
	}
	return s.Store.Take(ctx, r)
}

// newScripted returns a Breaker over a scripted store, on a fake clock.
func newScripted(t *testing.T, opts guard.BreakerOptions) (*guard.Breaker, *scripted, func(time.Duration)) {
	mem := memstore.New(memstore.Options{})
	t.Cleanup(func() { mem.Close() })
	backend := &scripted{Store: mem}
	clock := newClock()
	opts.Now = clock.Now
	return guard.NewBreaker(backend, opts), backend, clock.Advance
}

// A late client's timeout neither counts as a failure nor resets the count; with CountLate it is a
// failure. The caller gets the Store's error either way.
func TestBreakerLateTimeouts(t *testing.T) {
	for _, tc := range []struct {
		name      string
		countLate bool
		seq       []error
		wantOpen  []bool // the state after each operation
	}{
		{"late only", false,
			[]error{errLate, errLate, errLate, errLate, errLate, errLate},
			[]bool{false, false, false, false, false, false}},
		{"late between failures", false,
			[]error{errTimeout, errLate, errTimeout, errLate, errLate, errTimeout},
			[]bool{false, false, false, false, false, true}},
		{"success resets, late does not", false,
			[]error{errTimeout, errTimeout, nil, errTimeout, errLate, errTimeout, errTimeout},
			[]bool{false, false, false, false, false, false, true}},
		{"CountLate", true,
			[]error{errLate, errLate, errTimeout},
			[]bool{false, false, true}},
		{"late without a deadline", false,
			[]error{errLateOnly, errLateOnly, errLateOnly, errLateOnly},
			[]bool{false, false, false, false}},
		{"CountLate, late without a deadline", true,
			[]error{errLateOnly, errLateOnly, errLateOnly},
			[]bool{false, false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, backend, _ := newScripted(t, guard.BreakerOptions{Failures: 3, CountLate: tc.countLate})
			for i, err := range tc.seq {
				backend.err = err
				_, got := b.Take(t.Context(), req("k"))
				if got != err {
					t.Fatalf("operation %d: error %v, want the store's %v", i+1, got, err)
				}
				if open := b.State() == guard.BreakerOpen; open != tc.wantOpen[i] {
					t.Fatalf("after operation %d: State() = %v, want open = %v", i+1, b.State(), tc.wantOpen[i])
				}
			}
		})
	}
}

// A late probe tells nothing: the Breaker stays half-open and the next operation probes. With
// CountLate it reopens the Breaker for another cool-off.
func TestBreakerLateProbe(t *testing.T) {
	for _, countLate := range []bool{false, true} {
		t.Run(fmt.Sprintf("CountLate=%v", countLate), func(t *testing.T) {
			b, backend, advance := newScripted(t, guard.BreakerOptions{Failures: 1, CoolOff: time.Second, CountLate: countLate})
			backend.err = errTimeout
			b.Take(t.Context(), req("k"))
			wantState(t, b, guard.BreakerOpen)
			advance(time.Second)
			backend.err = errLate
			if _, err := b.Take(t.Context(), req("k")); err != errLate {
				t.Fatalf("late probe: %v, want the store's error", err)
			}
			if !countLate {
				wantState(t, b, guard.BreakerHalfOpen)
				backend.err = nil
				if _, err := b.Take(t.Context(), req("k")); err != nil {
					t.Fatalf("next probe: %v", err)
				}
				wantState(t, b, guard.BreakerClosed)
				return
			}
			wantState(t, b, guard.BreakerOpen)
			if _, err := b.Take(t.Context(), req("k")); !errors.Is(err, guard.ErrOpen) {
				t.Fatalf("after a late probe with CountLate: %v, want ErrOpen", err)
			}
			if got := b.Opened(); got != 2 {
				t.Fatalf("Opened() = %d, want 2", got)
			}
		})
	}
}

// judgedLater is a Store's own timeout whose verdict comes later, as redisstore's without evidence
// yet: JudgeLate keeps report for the test to call, unless now is set (the verdict is known now:
// late tells it).
type judgedLater struct {
	now     bool
	late    bool
	reports *[]func(late bool)
}

func (e *judgedLater) Error() string { return "store: timeout, verdict to come" }

func (e *judgedLater) Is(target error) bool {
	switch target {
	case admit.ErrUnavailable, context.DeadlineExceeded:
		return true
	case guard.ErrClientLate:
		return e.late
	}
	return false
}

func (e *judgedLater) JudgeLate(report func(late bool)) bool {
	if e.now {
		return false
	}
	*e.reports = append(*e.reports, report)
	return true
}

// A timeout whose verdict comes later is counted when it comes, not when its caller gets the
// error: late, it is neither failure nor success (and counted by Late); not late, a failure, the
// Breaker opening at the Failures-th. A verdict known at once is read from the error.
func TestBreakerCountsAVerdictWhenItComes(t *testing.T) {
	const failures = 3
	for _, tc := range []struct {
		name     string
		verdicts []bool // the verdict of each timeout, reported after all have returned
		wantOpen bool
		wantLate uint64
	}{
		{"Redis each time", []bool{false, false, false}, true, 0},
		{"late each time", []bool{true, true, true, true, true}, false, 5},
		{"late between", []bool{false, true, false, true, false}, true, 2},
		{"not enough", []bool{false, false, true}, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, backend, _ := newScripted(t, guard.BreakerOptions{Failures: failures})
			var reports []func(bool)
			for i := range tc.verdicts {
				e := &judgedLater{reports: &reports}
				backend.err = e
				if _, err := b.Take(t.Context(), req("k")); err != e {
					t.Fatalf("timeout %d: %v, want the store's error at once", i+1, err)
				}
				wantState(t, b, guard.BreakerClosed) // nothing counted yet
			}
			if len(reports) != len(tc.verdicts) {
				t.Fatalf("%d verdicts asked for, want %d", len(reports), len(tc.verdicts))
			}
			for i, late := range tc.verdicts {
				reports[i](late)
			}
			if got := b.State() == guard.BreakerOpen; got != tc.wantOpen {
				t.Fatalf("after the verdicts %v: State() = %v, want open = %v", tc.verdicts, b.State(), tc.wantOpen)
			}
			if got := b.Late(); got != tc.wantLate {
				t.Fatalf("Late() = %d, want %d", got, tc.wantLate)
			}
		})
	}

	t.Run("known now", func(t *testing.T) {
		b, backend, _ := newScripted(t, guard.BreakerOptions{Failures: 2})
		var reports []func(bool)
		backend.err = &judgedLater{now: true, late: true, reports: &reports}
		b.Take(t.Context(), req("k"))
		b.Take(t.Context(), req("k"))
		wantState(t, b, guard.BreakerClosed)
		backend.err = &judgedLater{now: true, reports: &reports}
		b.Take(t.Context(), req("k"))
		b.Take(t.Context(), req("k"))
		wantState(t, b, guard.BreakerOpen)
		if len(reports) != 0 || b.Late() != 2 {
			t.Fatalf("%d verdicts to come, Late() = %d; want 0 and 2", len(reports), b.Late())
		}
	})

	t.Run("CountLate", func(t *testing.T) {
		b, backend, _ := newScripted(t, guard.BreakerOptions{Failures: 2, CountLate: true})
		var reports []func(bool)
		backend.err = &judgedLater{late: true, reports: &reports}
		b.Take(t.Context(), req("k"))
		b.Take(t.Context(), req("k"))
		wantState(t, b, guard.BreakerOpen)
		if len(reports) != 0 || b.Late() != 0 {
			t.Fatalf("under CountLate: %d verdicts asked for, Late() = %d; want 0 and 0", len(reports), b.Late())
		}
	})
}

// A probe whose verdict is to come stays in flight until it comes: every other caller is refused
// meanwhile. Late, the Breaker stays half-open for the next probe; not late, it opens again.
func TestBreakerProbeWaitsForItsVerdict(t *testing.T) {
	for _, late := range []bool{true, false} {
		t.Run(fmt.Sprintf("late=%v", late), func(t *testing.T) {
			b, backend, advance := newScripted(t, guard.BreakerOptions{Failures: 1, CoolOff: time.Second})
			backend.err = errTimeout
			b.Take(t.Context(), req("k"))
			wantState(t, b, guard.BreakerOpen)
			advance(time.Second)
			var reports []func(bool)
			e := &judgedLater{reports: &reports}
			backend.err = e
			if _, err := b.Take(t.Context(), req("k")); err != e {
				t.Fatalf("probe: %v, want the store's error", err)
			}
			wantState(t, b, guard.BreakerHalfOpen)
			backend.err = nil
			if _, err := b.Take(t.Context(), req("k")); !errors.Is(err, guard.ErrOpen) {
				t.Fatalf("while the probe's verdict is to come: %v, want ErrOpen", err)
			}
			if len(reports) != 1 {
				t.Fatalf("%d verdicts asked for, want 1", len(reports))
			}
			reports[0](late)
			if !late {
				wantState(t, b, guard.BreakerOpen)
				if got := b.Opened(); got != 2 {
					t.Fatalf("Opened() = %d, want 2", got)
				}
				return
			}
			wantState(t, b, guard.BreakerHalfOpen)
			if _, err := b.Take(t.Context(), req("k")); err != nil {
				t.Fatalf("next probe: %v", err)
			}
			wantState(t, b, guard.BreakerClosed)
		})
	}
}
