package limittest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
	"github.com/admit-dev/admit/limittest"
)

// The suite is tested against a small reference Store, both as written and with one deliberate bug
// at a time (a mutant): the correct Store must pass, and every mutant must fail the subtests that
// are there to catch its bug. That is how we know each case can fail.

// TestReference runs the suite against the reference Store on a fake clock.
func TestReference(t *testing.T) {
	limittest.TestStore(t, func(t *testing.T) limittest.Backend { return newRefBackend("", false) })
}

// TestReferenceRealTime runs the suite against the reference Store on the real clock, as a Redis
// backend would: the slack the suite allows must be enough.
func TestReferenceRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("sleeps for a few seconds")
	}
	limittest.TestStore(t, func(t *testing.T) limittest.Backend { return newRefBackend("", true) })
}

// mutants names every bug the reference Store can be built with, and subtests of TestStore that must
// fail because of it.
var mutants = []struct {
	bug  string
	fail []string
}{
	{"no-validation", []string{"Invalid"}},
	{"invalid-is-unavailable", []string{"Invalid"}},
	{"bounds-exclusive", []string{"Bounds/MaxRate", "Bounds/MaxPeriod", "Bounds/key_of_512_bytes_text"}},
	{"truncate-key", []string{"Bounds/key_of_512_bytes_text", "Bounds/key_of_512_bytes_binary"}},
	{"one-bucket", []string{"KeysAreIndependent"}},
	{"separate-stores", []string{"SharedAcrossStores", "Concurrent"}},
	{"not-atomic", []string{"Concurrent"}},
	{"off-by-one", []string{"Sequence", "Cost"}},
	{"cost-ignored", []string{"Cost"}},
	{"no-limit-echo", []string{"Sequence"}},
	{"no-reset-after", []string{"Sequence"}},
	{"retry-truncated", []string{"RetryAfterSeconds"}},
	{"count-rejections", []string{"RejectionsAreReadOnly"}},
	{"refresh-on-reject", []string{"RejectionsAreReadOnly"}},
	{"refresh-on-admit", []string{"WindowStartsAtFirstAdmission"}},
	{"clock-aligned", []string{"Sequence", "WindowStartsAtFirstAdmission"}},
	{"never-expire", []string{"WindowExpires"}},
	{"last-instant-corrupt", []string{"WindowEndsAtItsLastInstant", "ShortWindows"}},
	{"peek-creates", []string{"PeekMissingKey"}},
	{"peek-consumes", []string{"PeekExistingKey"}},
	{"peek-over-limit-allowed", []string{"PeekExistingKey"}},
	{"cancel-admits", []string{"CancelledContext"}},
	{"cancel-unwrapped", []string{"CancelledContext"}},
}

// mutantEnv names the bug that TestMutant builds into the reference Store.
const mutantEnv = "ADMIT_LIMITTEST_MUTANT"

// TestMutant runs the suite against a mutant; TestSuiteCatchesBugs runs it in a child process. It is
// skipped otherwise.
func TestMutant(t *testing.T) {
	bug := os.Getenv(mutantEnv)
	if bug == "" {
		t.Skip("run by TestSuiteCatchesBugs")
	}
	limittest.TestStore(t, func(t *testing.T) limittest.Backend { return newRefBackend(bug, false) })
}

// TestSuiteCatchesBugs checks that the suite fails every mutant, in the subtests meant to catch it.
func TestSuiteCatchesBugs(t *testing.T) {
	if os.Getenv(mutantEnv) != "" {
		t.Skip("in a child process")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skip("cannot find the test binary:", err)
	}
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for _, m := range mutants {
		t.Run(m.bug, func(t *testing.T) {
			t.Parallel()
			sem <- struct{}{}
			defer func() { <-sem }()
			cmd := exec.CommandContext(t.Context(), exe, "-test.run=^TestMutant$", "-test.count=1")
			cmd.Env = append(os.Environ(), mutantEnv+"="+m.bug)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the suite passed a Store with bug %q (error %v); output:\n%s", m.bug, err, out)
			}
			for _, name := range m.fail {
				if !strings.Contains(string(out), "--- FAIL: TestMutant/"+name+" ") {
					t.Errorf("bug %q did not fail subtest %s; output:\n%s", m.bug, name, out)
				}
			}
			if strings.Contains(string(out), "panic:") {
				t.Errorf("bug %q made the suite panic; output:\n%s", m.bug, out)
			}
		})
	}
}

// refBackend is a Backend of the reference Store, on a fake clock or on the real one.
type refBackend struct {
	clock *limittest.Clock // nil for the real clock
	store *refStore
}

func newRefBackend(bug string, realTime bool) *refBackend {
	b := &refBackend{}
	if !realTime {
		// Not on a boundary of any window the suite uses.
		b.clock = limittest.NewClock(time.Unix(1_700_000_000, 123_456_789))
	}
	b.store = b.newStore(bug)
	return b
}

func (b *refBackend) newStore(bug string) *refStore {
	now := time.Now
	if b.clock != nil {
		now = b.clock.Now
	}
	return &refStore{now: now, bug: bug, m: map[string]refEntry{}}
}

func (b *refBackend) Open(t *testing.T) admit.Store {
	if b.store.bug == "separate-stores" {
		return b.newStore(b.store.bug)
	}
	return b.store
}

func (b *refBackend) Sleep(t *testing.T, d time.Duration) {
	if b.clock == nil {
		time.Sleep(d)
		return
	}
	b.clock.Advance(d)
}

// refStore is the simplest correct Store: one mutex, one map, algo.FixedWindow. A non-empty bug
// builds in one of the bugs of mutants.
type refStore struct {
	now func() time.Time
	bug string

	mu sync.Mutex
	m  map[string]refEntry
}

type refEntry struct {
	count    int64
	deadline time.Time
}

func (s *refStore) Take(ctx context.Context, key string, lim admit.Limit, n int64) (admit.Decision, error) {
	bug := s.bug
	if bug != "no-validation" {
		if err := admit.ValidateRequest(key, lim, n); err != nil {
			if bug == "invalid-is-unavailable" {
				return admit.Decision{}, fmt.Errorf("%w: %v", admit.ErrUnavailable, err)
			}
			return admit.Decision{}, err
		}
	}
	if bug == "bounds-exclusive" && (lim.Rate == admit.MaxRate || lim.Period == admit.MaxPeriod || len(key) == admit.MaxKeyLen) {
		return admit.Decision{}, fmt.Errorf("%w: at the bound", admit.ErrInvalidLimit)
	}
	if err := ctx.Err(); err != nil {
		switch bug {
		case "cancel-admits":
			return admit.Decision{Allowed: true, Limit: lim, Remaining: lim.Rate - n, ResetAfter: lim.Period}, nil
		case "cancel-unwrapped":
			return admit.Decision{}, err
		}
		return admit.Decision{}, fmt.Errorf("%w: %w", admit.ErrUnavailable, err)
	}
	switch bug {
	case "truncate-key":
		key = key[:min(len(key), 500)]
	case "one-bucket":
		key = "all"
	case "cost-ignored":
		n = min(n, 1)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	e, ok := s.m[key]
	if ok && e.deadline.Equal(now) && bug == "last-instant-corrupt" {
		return admit.Decision{}, fmt.Errorf("%w: counter has no expiry", admit.ErrCorruptState)
	}
	if ok && !e.deadline.After(now) && bug != "never-expire" {
		delete(s.m, key)
		ok = false
	}
	var st *algo.FixedWindowState
	if ok {
		st = &algo.FixedWindowState{Count: e.count, TTL: max(e.deadline.Sub(now), time.Millisecond)}
		if err := algo.CheckFixedWindow(*st, lim.Period); err != nil && bug != "peek-creates" {
			return admit.Decision{}, fmt.Errorf("%w: %w", admit.ErrCorruptState, err)
		}
	}
	if bug == "not-atomic" {
		// Decide on what was read, after letting others read the same.
		s.mu.Unlock()
		time.Sleep(time.Millisecond)
		s.mu.Lock()
	}
	limit := lim.Rate
	if bug == "off-by-one" {
		limit++
	}
	r := algo.FixedWindow(st, limit, lim.Period, n)
	switch r.Write {
	case algo.WriteCreate:
		e = refEntry{count: n, deadline: now.Add(lim.Period)}
		if bug == "clock-aligned" {
			e.deadline = now.Truncate(lim.Period).Add(lim.Period)
			r.ResetAfter = e.deadline.Sub(now)
		}
	case algo.WriteIncrement:
		if bug == "not-atomic" {
			e.count = st.Count + n
		} else {
			e.count += n
		}
		if bug == "refresh-on-admit" {
			e.deadline = now.Add(lim.Period)
		}
	case algo.WriteNone:
		switch {
		case !r.Allowed && bug == "count-rejections":
			e.count += n
		case !r.Allowed && bug == "refresh-on-reject":
			e.deadline = now.Add(lim.Period)
		case st == nil && bug == "peek-creates":
			e = refEntry{count: 0, deadline: now.Add(lim.Period)}
		case st != nil && r.Allowed && bug == "peek-consumes":
			e.count++
		case !r.Allowed && n == 0 && bug == "peek-over-limit-allowed":
			r.Allowed, r.RetryAfter = true, 0
		}
		if st == nil && bug != "peek-creates" {
			return decision(r, lim, bug), nil
		}
	}
	s.m[key] = e
	return decision(r, lim, bug), nil
}

func decision(r algo.FixedWindowResult, lim admit.Limit, bug string) admit.Decision {
	d := admit.Decision{Allowed: r.Allowed, Limit: lim, Remaining: r.Remaining, RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter}
	switch bug {
	case "no-limit-echo":
		d.Limit = admit.Limit{}
	case "no-reset-after":
		d.ResetAfter = 0
	case "retry-truncated":
		d.RetryAfter = d.RetryAfter.Truncate(time.Second)
	}
	return d
}
