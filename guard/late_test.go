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
