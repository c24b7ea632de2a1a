package limittest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/slot"
	"github.com/admit-dev/admit/internal/validate"
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
	{"no-validation", []string{"fixed_window/Invalid"}},
	{"invalid-is-unavailable", []string{"fixed_window/Invalid", "MultiPolicy/Invalid"}},
	{"bounds-exclusive", []string{"fixed_window/Bounds/MaxRate", "fixed_window/Bounds/MaxPeriod", "fixed_window/Bounds/key_of_512_bytes_text", "sliding_log/Bounds/MaxRate"}},
	{"truncate-key", []string{"fixed_window/Bounds/key_of_512_bytes_text", "fixed_window/Bounds/key_of_512_bytes_binary"}},
	{"one-bucket", []string{"fixed_window/KeysAreIndependent"}},
	{"separate-stores", []string{"fixed_window/SharedAcrossStores", "fixed_window/Concurrent", "Idempotency/Replay"}},
	{"not-atomic", []string{"fixed_window/Concurrent", "MultiPolicy/Concurrent", "Idempotency/Concurrent"}},
	{"off-by-one", []string{"fixed_window/Sequence", "fixed_window/Cost"}},
	{"cost-ignored", []string{"fixed_window/Cost"}},
	{"no-limit-echo", []string{"fixed_window/Sequence"}},
	{"no-reset-after", []string{"fixed_window/Sequence"}},
	{"retry-truncated", []string{"fixed_window/RetryAfterSeconds"}},
	{"count-rejections", []string{"fixed_window/RejectionsAreReadOnly"}},
	{"refresh-on-reject", []string{"fixed_window/RejectionsAreReadOnly"}},
	{"refresh-on-admit", []string{"fixed_window/WindowStartsAtFirstAdmission"}},
	{"clock-aligned", []string{"fixed_window/Sequence", "fixed_window/WindowStartsAtFirstAdmission"}},
	{"never-expire", []string{"fixed_window/WindowExpires"}},
	{"last-instant-corrupt", []string{"fixed_window/WindowEndsAtItsLastInstant", "fixed_window/ShortWindows"}},
	{"peek-creates", []string{"fixed_window/PeekMissingKey"}},
	{"peek-consumes", []string{"fixed_window/PeekExistingKey"}},
	{"peek-over-limit-allowed", []string{"fixed_window/PeekExistingKey"}},
	{"cancel-admits", []string{"fixed_window/CancelledContext"}},
	{"cancel-unwrapped", []string{"fixed_window/CancelledContext"}},
	{"partial-writes", []string{"MultiPolicy/AllOrNothing"}},
	{"rejection-reports-consumed", []string{"MultiPolicy/AllOrNothing"}},
	{"slot-unchecked", []string{"MultiPolicy/Invalid/two_slots"}},
	{"id-ignored", []string{"Idempotency/Replay", "Idempotency/ReplayOfSeveral", "Idempotency/Concurrent"}},
	{"id-reuse-replays", []string{"Idempotency/ReuseIsInvalid"}},
	{"record-rejection", []string{"Idempotency/RejectionIsNotRecorded"}},
	{"record-forever", []string{"Idempotency/RecordExpires"}},
	{"id-global", []string{"Idempotency/ScopedToTheSlot"}},
	{"replay-unmarked", []string{"Idempotency/Replay"}},
	{"shadow-enforced", []string{"MultiPolicy/Shadow/RejectsNothing", "MultiPolicy/Shadow/AllShadow"}},
	// Bugs of Reset.
	{"reset-noop", []string{"fixed_window/Reset/StateGone", "gcra/Reset/StateGone", "sliding_window/Reset/StateGone", "sliding_log/Reset/StateGone", "concurrency/Reset/StateGone"}},
	{"reset-everything", []string{"fixed_window/Reset/StateGone", "fixed_window/Reset/AbsentKeys"}},
	{"reset-unvalidated", []string{"fixed_window/Reset/Invalid"}},
	{"reset-keeps-leases", []string{"concurrency/Reset/StateGone", "concurrency/Reset/Leases"}},
	// Bugs of reserve, then settle.
	{"settle-refund-later-window", []string{"fixed_window/Settle/WindowReplaced", "fixed_window_aligned/Settle/WindowReplaced",
		"gcra/Settle/WindowReplaced", "sliding_window/Settle/WindowReplaced", "sliding_log/Settle/WindowReplaced"}},
	{"settle-overrun-unbounded", []string{"fixed_window/Settle/Overrun", "sliding_window/Settle/Overrun", "sliding_log/Settle/Overrun"}},
	{"settle-refund-beyond-reservation", []string{"fixed_window/Settle/RefundIsBounded", "gcra/Settle/RefundIsBounded",
		"sliding_window/Settle/RefundIsBounded", "sliding_log/Settle/RefundIsBounded"}},
	{"aligned-ignored", []string{"fixed_window_aligned/AdmissionsShareTheWindowEnd", "fixed_window_aligned/NextWindowStartsAtTheBoundary",
		"fixed_window_aligned/BoundaryBurst", "fixed_window_aligned/OnTheUnixGrid"}},
	{"aligned-to-start", []string{"fixed_window_aligned/OnTheUnixGrid"}},
	{"aligned-reset-window", []string{"fixed_window_aligned/AdmissionsShareTheWindowEnd", "fixed_window_aligned/OnTheUnixGrid"}},
	// Bugs that only GCRA's cases catch.
	{"gcra-no-refill", []string{"gcra/Sequence", "gcra/BurstAboveRate", "gcra/RetryAfterIsWhenItFits"}},
	{"gcra-burst-is-rate", []string{"gcra/BurstAboveRate", "gcra/BurstBelowRate", "gcra/RejectionsAreReadOnly", "gcra/PeekExistingKey"}},
	{"gcra-reject-writes", []string{"gcra/RejectionsAreReadOnly", "gcra/RetryAfterIsWhenItFits", "gcra/Sequence"}},
	{"gcra-retry-is-reset", []string{"gcra/Sequence", "gcra/Cost"}},
	{"gcra-no-remaining-on-reject", []string{"gcra/Cost", "gcra/RejectionsAreReadOnly"}},
	{"gcra-reset-truncated", []string{"gcra/RoundedInterval"}},
	// Bugs that only the sliding algorithms' cases catch.
	{"sliding-window-forgets-previous", []string{"sliding_window/PreviousWindowWeighs", "sliding_window/ForgetsAfterTwoWindows"}},
	{"sliding-window-floor", []string{"sliding_window/PreviousWindowWeighs", "sliding_window/ForgetsAfterTwoWindows"}},
	{"sliding-log-window-ends", []string{"sliding_log/EntriesLeaveOneByOne"}},
	{"sliding-log-one-entry-per-take", []string{"sliding_log/EveryUnitIsLogged", "sliding_log/Cost"}},
	// Bugs that only the concurrency cases catch.
	{"concurrency-never-expire", []string{"concurrency/ExpiryReturnsCapacity", "concurrency/ReleaseOfUnknownOrExpiredLease"}},
	{"concurrency-release-deletes-key", []string{"concurrency/ReleaseFreesASlot", "concurrency/DoubleReleaseIsHarmless"}},
	{"concurrency-release-any", []string{"concurrency/DoubleReleaseIsHarmless", "concurrency/ReleaseOfUnknownOrExpiredLease"}},
	{"concurrency-release-unvalidated", []string{"concurrency/ReleaseInvalid"}},
	{"concurrency-one-more", []string{"concurrency/AcquireUpToTheLimit", "concurrency/Concurrent", "concurrency/InFlightNeverAboveTheLimit"}},
	{"concurrency-reject-extends", []string{"concurrency/RejectionsAreReadOnly"}},
	{"concurrency-peek-acquires", []string{"concurrency/PeekAcquiresNothing", "concurrency/PeekMissingKey"}},
	{"concurrency-rejection-leases", []string{"concurrency/MultiPolicy"}},
	{"concurrency-replay-new-token", []string{"concurrency/Idempotency"}},
	{"concurrency-no-token", []string{"concurrency/AcquireUpToTheLimit", "concurrency/ReleaseFreesASlot"}},
	{"concurrency-key-expires-with-new-lease", []string{"concurrency/ShortLeaseKeepsLongerLeases"}},
	// Bugs of overrides.
	{"override-ignored", []string{"fixed_window/Override/ChangesTheNextDecision", "fixed_window_aligned/Override/ChangesTheNextDecision",
		"gcra/Override/ChangesTheNextDecision", "sliding_window/Override/ChangesTheNextDecision", "sliding_log/Override/ChangesTheNextDecision",
		"concurrency/Override/ChangesTheNextDecision", "fixed_window/Override/Expires", "Overrides/TakeAll"}},
	{"override-unmarked", []string{"fixed_window/Override/ChangesTheNextDecision", "Overrides/TakeAll"}},
	{"override-limit-unreported", []string{"fixed_window/Override/ChangesTheNextDecision", "gcra/Override/DeleteRestores", "Overrides/TakeAll"}},
	{"override-never-expires", []string{"fixed_window/Override/Expires", "gcra/Override/Expires", "Overrides/Count"}},
	{"override-delete-noop", []string{"fixed_window/Override/DeleteRestores", "concurrency/Override/DeleteRestores", "gcra/Override/Clamp"}},
	{"override-unvalidated", []string{"Overrides/Invalid"}},
	{"override-cost-unchecked", []string{"Overrides/Invalid"}},
	{"override-page-overlap", []string{"Overrides/Listing"}},
	{"override-count-expired", []string{"Overrides/Count"}},
	{"reset-deletes-overrides", []string{"fixed_window/Override/ResetKeepsIt", "sliding_log/Override/ResetKeepsIt"}},
	{"gcra-clamp-corrupt", []string{"gcra/Override/Clamp", "gcra/Override/DeleteRestores"}},
	{"gcra-clamp-unclamped", []string{"gcra/Override/Clamp"}},
	{"gcra-clamp-everywhere", []string{"gcra/Override/Clamp", "gcra/Override/ChangesTheNextDecision"}},
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
	return &refStore{now: now, start: now(), bug: bug, m: map[string]refEntry{}, records: map[string]refRecord{},
		windows: map[string]algo.SlidingWindowState{}, logs: map[string][]int64{}, leases: map[string][]algo.Lease{},
		overrides: map[string]refOverride{}, tokens: algo.NewTokenSource()}
}

func (b *refBackend) Open(t *testing.T) admit.Store {
	if b.store.bug == "separate-stores" {
		return b.newStore(b.store.bug)
	}
	return b.store
}

// Now is the time the reference Store decides by: it is a limittest.ClockBackend.
func (b *refBackend) Now(t *testing.T) time.Time {
	if b.clock == nil {
		return time.Now()
	}
	return b.clock.Now()
}

func (b *refBackend) Sleep(t *testing.T, d time.Duration) {
	if b.clock == nil {
		time.Sleep(d)
		return
	}
	b.clock.Advance(d)
}

// refStore is the simplest correct Store: one mutex, a map of fixed-window and GCRA keys (deciding
// with algo.FixedWindow, algo.AlignedWindow for an aligned Limit, and algo.GCRA), a map per sliding
// algorithm's keys (algo.SlidingWindow, algo.SlidingLog), and a map of idempotency records. A
// non-empty bug builds in one of the bugs of mutants.
type refStore struct {
	now   func() time.Time
	start time.Time // when the Store was made: the "aligned-to-start" bug aligns windows to it
	bug   string

	mu      sync.Mutex
	m       map[string]refEntry
	records map[string]refRecord
	windows map[string]algo.SlidingWindowState // sliding_window keys
	logs    map[string][]int64                 // sliding_log keys
	leases  map[string][]algo.Lease            // concurrency keys
	tokens  *algo.TokenSource
	// overrides are the Overrides, by key; an expired one stays, and reads as none.
	overrides map[string]refOverride
}

type refEntry struct {
	count    int64
	deadline time.Time
	gcra     *refGCRA // the state of a GCRA key; nil for a fixed window's
}

// refGCRA is the state of a GCRA key: its theoretical arrival time, and when it was written.
type refGCRA struct {
	tat     int64 // Unix µs
	written int64 // Unix µs
}

type refRecord struct {
	fingerprint string
	ds          []admit.Decision
	deadline    time.Time
}

func (s *refStore) Take(ctx context.Context, r admit.Request) (admit.Decision, error) {
	var ds [1]admit.Decision
	_, err := s.TakeAll(ctx, []admit.Request{r}, ds[:])
	return ds[0], err
}

func (s *refStore) Release(ctx context.Context, l admit.Lease) error {
	if err := l.Validate(); err != nil && s.bug != "concurrency-release-unvalidated" {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	leases := s.leases[l.Key]
	switch s.bug {
	case "concurrency-release-deletes-key":
		delete(s.leases, l.Key)
		return nil
	case "concurrency-release-any": // a counter of leases, not a set: any token frees one
		if len(leases) > 0 {
			s.leases[l.Key] = leases[1:]
		}
		return nil
	}
	s.leases[l.Key], _ = algo.RemoveLease(append([]algo.Lease(nil), leases...), l.Token)
	return nil
}

// Reset deletes the state of keys in every map, with the bugs that touch resetting.
func (s *refStore) Reset(ctx context.Context, keys []string) error {
	if s.bug != "reset-unvalidated" {
		if len(keys) == 0 || len(keys) > bound.MaxResetKeys {
			return fmt.Errorf("%w: %d keys", admit.ErrInvalidRequest, len(keys))
		}
		for _, k := range keys {
			if k == "" || len(k) > bound.MaxKeyLen {
				return fmt.Errorf("%w: key of %d bytes", admit.ErrInvalidRequest, len(k))
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", admit.ErrUnavailable, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.bug {
	case "reset-noop":
		return nil
	case "reset-everything":
		clear(s.m)
		clear(s.windows)
		clear(s.logs)
		clear(s.leases)
		return nil
	}
	for _, k := range keys {
		if s.bug == "reset-deletes-overrides" {
			for ok := range s.overrides {
				if slot.Tag(ok) == slot.Tag(k) {
					delete(s.overrides, ok)
				}
			}
		}
		delete(s.m, k)
		delete(s.windows, k)
		delete(s.logs, k)
		if s.bug != "reset-keeps-leases" {
			delete(s.leases, k)
		}
	}
	return nil
}

// Settle settles res at actual with internal/algo's settle transitions, under the one mutex, with
// the bugs that touch settling.
func (s *refStore) Settle(ctx context.Context, res admit.Reservation, actual int64) (admit.Decision, error) {
	if err := res.Validate(actual); err != nil {
		return admit.Decision{}, err
	}
	if err := ctx.Err(); err != nil {
		return admit.Decision{}, fmt.Errorf("%w: %w", admit.ErrUnavailable, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	at := now.UnixMicro()
	r := res.Request
	key, lim, token, delta := r.Key, r.Limit, int64(res.Token), actual-r.Cost
	if s.bug == "settle-refund-beyond-reservation" && delta < 0 {
		delta -= r.Cost // gives back more than was reserved
	}
	limit := lim.Rate
	if s.bug == "settle-overrun-unbounded" && delta > 0 {
		limit = bound.MaxRate // an overrun consumes all of itself
	}
	if err := s.holdsOther(key, lim.Algorithm); err != nil {
		return admit.Decision{}, err
	}
	d := admit.Decision{Limit: lim}
	switch lim.Algorithm {
	case admit.FixedWindow:
		e, ok := s.m[key]
		if ok && e.gcra != nil {
			return admit.Decision{}, fmt.Errorf("%w: key holds GCRA state", admit.ErrCorruptState)
		}
		if ok && !e.deadline.After(now) {
			delete(s.m, key)
			ok = false
		}
		var st *algo.FixedWindowState
		if ok {
			st = &algo.FixedWindowState{Count: e.count, TTL: e.deadline.Sub(now)}
			if lim.Aligned {
				st.TTL = e.deadline.Sub(time.UnixMicro(at))
			}
		}
		same := ok && (refToken(e.deadline) == res.Token || s.bug == "settle-refund-later-window")
		var sr algo.FixedWindowSettled
		if lim.Aligned {
			sr = algo.AlignedWindowSettle(st, same, limit, lim.Period, at, delta)
		} else {
			sr = algo.FixedWindowSettle(st, same, limit, lim.Period, delta)
		}
		switch sr.Write {
		case algo.WriteCreate:
			s.m[key] = refEntry{count: sr.Units, deadline: now.Add(sr.ResetAfter)}
			if lim.Aligned {
				s.m[key] = refEntry{count: sr.Units, deadline: time.UnixMicro(at).Add(algo.AlignedWindowLeft(at, lim.Period))}
			}
		case algo.WriteIncrement:
			e.count += sr.Units
			s.m[key] = e
		case algo.WriteDecrement:
			e.count -= sr.Units
			s.m[key] = e
		case algo.WriteDelete:
			delete(s.m, key)
		}
		d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter = sr.Allowed, sr.Remaining, sr.RetryAfter, sr.ResetAfter
	case admit.GCRA:
		tat, err := s.readGCRA(key, lim, at, false) // a settlement ignores overrides
		if err != nil {
			return admit.Decision{}, err
		}
		if s.bug == "settle-refund-later-window" {
			token = tat
		}
		sr := algo.GCRASettle(tat, token, at, lim, delta)
		switch {
		case sr.Delete:
			delete(s.m, key)
		case sr.Write:
			s.m[key] = refEntry{deadline: time.UnixMicro(sr.TAT), gcra: &refGCRA{tat: sr.TAT, written: at}}
		}
		d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter = sr.Allowed, sr.Remaining, sr.RetryAfter, sr.ResetAfter
	case admit.SlidingWindow:
		var st *algo.SlidingWindowState
		if w, ok := s.windows[key]; ok {
			if err := algo.CheckSlidingWindow(w, lim.Period, at); err != nil {
				return admit.Decision{}, fmt.Errorf("%w: %w", admit.ErrCorruptState, err)
			}
			st = &w
		}
		if s.bug == "settle-refund-later-window" {
			token = at - at%lim.Period.Microseconds()
		}
		sr := algo.SlidingWindowSettle(st, token, at, limit, lim.Period, delta)
		switch sr.Write {
		case algo.WriteCreate:
			s.windows[key] = sr.State
		case algo.WriteIncrement:
			st.Curr += sr.Units
			s.windows[key] = *st
		case algo.WriteDelete:
			delete(s.windows, key)
		}
		d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter = sr.Allowed, min(sr.Remaining, lim.Rate), sr.RetryAfter, sr.ResetAfter
	case admit.SlidingLog:
		log := s.logs[key]
		if err := algo.CheckSlidingLog(log, at); err != nil {
			return admit.Decision{}, fmt.Errorf("%w: %w", admit.ErrCorruptState, err)
		}
		if s.bug == "settle-refund-later-window" && len(log) > 0 {
			token = log[len(log)-1]
		}
		sr := algo.SlidingLogSettle(log, token, at, limit, lim.Period, delta)
		switch sr.Write {
		case algo.WriteCreate, algo.WriteIncrement:
			next := append([]int64(nil), log[sr.Trim:]...)
			for range sr.Units {
				next = append(next, at)
			}
			s.logs[key] = next
		case algo.WriteDecrement:
			i := sort.Search(len(log), func(i int) bool { return log[i] > token })
			s.logs[key] = append(append([]int64(nil), log[:i-int(sr.Units)]...), log[i:]...)
		case algo.WriteDelete:
			delete(s.logs, key)
		}
		d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter = sr.Allowed, min(sr.Remaining, lim.Rate), sr.RetryAfter, sr.ResetAfter
	}
	return d, nil
}

// holdsOther returns an error matching ErrCorruptState when key holds the state of an algorithm other
// than alg, in another of the reference Store's maps.
func (s *refStore) holdsOther(key string, alg admit.Algorithm) error {
	_, fixed := s.m[key]
	_, window := s.windows[key]
	_, log := s.logs[key]
	if fixed && alg != admit.FixedWindow && alg != admit.GCRA || window && alg != admit.SlidingWindow || log && alg != admit.SlidingLog {
		return fmt.Errorf("%w: key holds another algorithm's state", admit.ErrCorruptState)
	}
	return nil
}

// refToken returns the token of a fixed window that ends at deadline: the end in Unix milliseconds,
// rounded up.
func refToken(deadline time.Time) uint64 {
	return uint64((deadline.UnixNano() + int64(time.Millisecond) - 1) / int64(time.Millisecond))
}

// validate checks rs and ds as a Store must, with the bugs that touch validation.
func (s *refStore) validate(rs []admit.Request, ds []admit.Decision) error {
	bug := s.bug
	if bug == "no-validation" {
		if len(rs) == 0 || len(ds) != len(rs) {
			return fmt.Errorf("%w: no requests, or Decisions of another number", admit.ErrInvalidRequest)
		}
		return nil
	}
	err := admit.ValidateAll(rs, ds)
	if err != nil && bug == "slot-unchecked" && strings.Contains(err.Error(), "hash slot") {
		err = nil
	}
	if err != nil && bug == "invalid-is-unavailable" {
		return fmt.Errorf("%w: %v", admit.ErrUnavailable, err)
	}
	if err == nil && bug == "bounds-exclusive" {
		for _, r := range rs {
			if r.Limit.Rate == bound.MaxRate || r.Limit.Period == bound.MaxPeriod || len(r.Key) == bound.MaxKeyLen ||
				r.Limit.Algorithm == admit.SlidingLog && r.Limit.Rate == bound.MaxSlidingLogRate {
				return fmt.Errorf("%w: at the bound", admit.ErrInvalidLimit)
			}
		}
	}
	return err
}

func (s *refStore) TakeAll(ctx context.Context, rs []admit.Request, ds []admit.Decision) (bool, error) {
	bug := s.bug
	if err := s.validate(rs, ds); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		switch bug {
		case "cancel-admits":
			for i, r := range rs {
				ds[i] = admit.Decision{Allowed: true, Limit: r.Limit, Remaining: r.Limit.Rate - r.Cost, ResetAfter: r.Limit.Period}
			}
			return true, nil
		case "cancel-unwrapped":
			return false, err
		}
		return false, fmt.Errorf("%w: %w", admit.ErrUnavailable, err)
	}
	keys := make([]string, len(rs))
	costs := make([]int64, len(rs))
	for i, r := range rs {
		keys[i], costs[i] = r.Key, r.Cost
		switch bug {
		case "truncate-key":
			keys[i] = r.Key[:min(len(r.Key), 500)]
		case "one-bucket":
			keys[i] = "all"
		case "cost-ignored":
			costs[i] = min(r.Cost, 1)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()

	id, recordKey, fp := rs[0].ID, "", ""
	tokens := make([]uint64, len(rs))
	if id != "" {
		fp = algo.Fingerprint(rs)
	}
	algo.LeaseTokens(s.tokens, rs, fp, tokens)
	if bug == "concurrency-replay-new-token" {
		for i := range rs {
			if tokens[i] != 0 {
				tokens[i] = s.tokens.Next()
			}
		}
	}
	if id != "" && bug != "id-ignored" {
		recordKey, fp = algo.RecordKey(rs[0].Key, id), algo.Fingerprint(rs)
		if bug == "id-global" {
			recordKey = id
		}
		if rec, ok := s.records[recordKey]; ok && (rec.deadline.After(now) || bug == "record-forever") {
			if rec.fingerprint != fp && bug != "id-reuse-replays" {
				return false, fmt.Errorf("%w: request ID reused", admit.ErrInvalidRequest)
			}
			for i := range ds {
				ds[i] = rec.ds[min(i, len(rec.ds)-1)]
				ds[i].Replayed = bug != "replay-unmarked"
				switch {
				case rs[i].Limit.Algorithm != admit.Concurrency:
					ds[i].Token = 0 // a replay holds nothing to settle
				case bug == "concurrency-replay-new-token" && ds[i].Token != 0:
					ds[i].Token = tokens[i] // made afresh, not derived from the request
				}
			}
			return true, nil
		}
	}

	orig := rs
	rs, over, err := s.overrideRequests(rs, now)
	if err != nil {
		return false, err
	}
	states := make([]*algo.FixedWindowState, len(rs))
	slides := make([]refSliding, len(rs)) // the sliding algorithms' own
	tats := make([]int64, len(rs))        // GCRA's: 0 for a missing key
	for i, r := range rs {
		// Without validation, an invalid request is decided as a fixed window, which takes any numbers.
		slides[i].on = (r.Limit.Algorithm == admit.SlidingWindow || r.Limit.Algorithm == admit.SlidingLog || r.Limit.Algorithm == admit.Concurrency) &&
			(bug != "no-validation" || r.Validate() == nil)
		if slides[i].on {
			if err := s.readSliding(&slides[i], keys[i], r.Limit, now); err != nil {
				return false, err
			}
			continue
		}
		if r.Limit.Algorithm == admit.GCRA {
			var err error
			if tats[i], err = s.readGCRA(keys[i], r.Limit, now.UnixMicro(), r.OverrideKey != ""); err != nil {
				return false, err
			}
			continue
		}
		e, ok := s.m[keys[i]]
		if ok && e.gcra != nil {
			return false, fmt.Errorf("%w: key holds GCRA state", admit.ErrCorruptState)
		}
		if ok && e.deadline.Equal(now) && bug == "last-instant-corrupt" {
			return false, fmt.Errorf("%w: counter has no expiry", admit.ErrCorruptState)
		}
		if ok && !e.deadline.After(now) && bug != "never-expire" {
			delete(s.m, keys[i])
			ok = false
		}
		if ok {
			st := &algo.FixedWindowState{Count: e.count, TTL: max(e.deadline.Sub(now), time.Millisecond)}
			err := algo.CheckFixedWindow(*st, r.Limit.Period)
			if s.aligned(r.Limit) {
				st.TTL = e.deadline.Sub(time.UnixMicro(now.UnixMicro())) // from the microsecond now is in
				err = algo.CheckAlignedWindow(*st, r.Limit.Period, s.unixMicro(now))
			}
			if err != nil && bug != "peek-creates" {
				return false, fmt.Errorf("%w: %w", admit.ErrCorruptState, err)
			}
			states[i] = st
		}
	}
	if bug == "not-atomic" {
		// Decide on what was read, after letting others read the same.
		s.mu.Unlock()
		time.Sleep(time.Millisecond)
		s.mu.Lock()
	}
	results := make([]algo.FixedWindowResult, len(rs))
	gcraResults := make([]algo.GCRAResult, len(rs))
	all := true
	for i, r := range rs {
		if r.Limit.Algorithm == admit.GCRA {
			gcraResults[i] = s.decideGCRA(tats[i], now.UnixMicro(), r.Limit, costs[i])
			all = all && (gcraResults[i].Allowed || shadow(r.Limit, bug))
			continue
		}
		limit := r.Limit.Rate
		if bug == "off-by-one" {
			limit++
		}
		if slides[i].on {
			all = (slides[i].decide(r.Limit, limit, costs[i], now, bug) || shadow(r.Limit, bug)) && all
			continue
		}
		results[i] = s.decide(states[i], r.Limit, limit, costs[i], now)
		all = all && (results[i].Allowed || shadow(r.Limit, bug))
	}
	for i, r := range rs {
		if r.Limit.Algorithm == admit.GCRA {
			ds[i] = s.applyGCRA(keys[i], r.Limit, costs[i], tats[i], &gcraResults[i], all, now.UnixMicro())
			if all && gcraResults[i].Write {
				ds[i].Token = uint64(gcraResults[i].TAT) // the TAT just after the admission
			}
			continue
		}
		if slides[i].on {
			sl := &slides[i]
			sl.token = tokens[i]
			if all || bug == "partial-writes" || bug == "concurrency-rejection-leases" && r.Limit.Algorithm == admit.Concurrency && sl.d.Allowed {
				s.writeSliding(sl, keys[i], r.Limit, costs[i])
				if all && bug != "concurrency-no-token" {
					sl.d.Token = tokens[i]
				}
			} else if sl.d.Allowed && bug != "rejection-reports-consumed" {
				sl.decide(r.Limit, r.Limit.Rate, 0, now, bug) // as it is
			}
			if !sl.d.Allowed && bug == "concurrency-reject-extends" && r.Limit.Algorithm == admit.Concurrency {
				extended := append([]algo.Lease(nil), sl.leases...)
				for j := range extended {
					extended[j].Expiry = sl.at + r.Limit.Period.Microseconds()
				}
				s.leases[keys[i]] = extended
			}
			ds[i] = decisionOf(sl.d, bug)
			if all && sl.write != algo.WriteNone && r.Limit.Algorithm != admit.Concurrency { // a lease's token is set above
				ds[i].Token = uint64(sl.at) // a sliding log's admission time
				if r.Limit.Algorithm == admit.SlidingWindow {
					ds[i].Token = uint64(sl.at - sl.at%r.Limit.Period.Microseconds()) // its window's start
				}
			}
			continue
		}
		if all || bug == "partial-writes" {
			s.write(keys[i], r.Limit, costs[i], states[i], &results[i], now)
		} else {
			if results[i].Allowed && bug != "rejection-reports-consumed" {
				results[i] = s.decide(states[i], r.Limit, r.Limit.Rate, 0, now) // as it is
			}
			s.writeRejected(keys[i], r.Limit, costs[i], states[i], &results[i], now)
		}
		ds[i] = decision(results[i], r.Limit, bug)
		if all && results[i].Write != algo.WriteNone {
			ds[i].Token = refToken(s.m[keys[i]].deadline) // the window's end
		}
	}
	for i := range ds {
		switch {
		case bug == "override-unmarked":
		case bug == "override-limit-unreported":
			ds[i].Overridden, ds[i].Limit = over[i], orig[i].Limit
		default:
			ds[i].Overridden = over[i]
		}
	}
	if recordKey != "" && (all || bug == "record-rejection") && algo.Recorded(rs) {
		s.records[recordKey] = refRecord{fingerprint: fp, ds: append([]admit.Decision(nil), ds...), deadline: now.Add(algo.RecordTTL(rs))}
	}
	return all, nil
}

// write makes the write of an admitted request of n units, with the bugs that touch it.
func (s *refStore) write(key string, lim admit.Limit, n int64, st *algo.FixedWindowState, r *algo.FixedWindowResult, now time.Time) {
	bug := s.bug
	e := s.m[key]
	switch r.Write {
	case algo.WriteCreate:
		e = refEntry{count: n, deadline: now.Add(lim.Period)}
		if s.aligned(lim) {
			// The window's end: from the microsecond now is in, to the next multiple of the period.
			e.deadline = time.UnixMicro(now.UnixMicro()).Add(algo.AlignedWindowLeft(s.unixMicro(now), lim.Period))
			if bug == "aligned-reset-window" {
				r.ResetAfter = lim.Period
			}
		} else if bug == "clock-aligned" {
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
		s.writeRejected(key, lim, n, st, r, now)
		return
	}
	s.m[key] = e
}

// writeRejected makes the writes that a rejection or a peek must not make, for the bugs that make
// them.
func (s *refStore) writeRejected(key string, lim admit.Limit, n int64, st *algo.FixedWindowState, r *algo.FixedWindowResult, now time.Time) {
	e, ok := s.m[key]
	switch bug := s.bug; {
	case !r.Allowed && bug == "count-rejections" && ok:
		e.count += n
	case !r.Allowed && bug == "refresh-on-reject" && ok:
		e.deadline = now.Add(lim.Period)
	case st == nil && bug == "peek-creates":
		e = refEntry{count: 0, deadline: now.Add(lim.Period)}
	case st != nil && r.Allowed && n == 0 && bug == "peek-consumes":
		e.count++
	case !r.Allowed && n == 0 && bug == "peek-over-limit-allowed":
		r.Allowed, r.RetryAfter = true, 0
		return
	default:
		return
	}
	s.m[key] = e
}

// aligned reports whether the Store aligns lim's windows: lim.Aligned, but for the "aligned-ignored"
// bug.
func (s *refStore) aligned(lim admit.Limit) bool { return lim.Aligned && s.bug != "aligned-ignored" }

// unixMicro returns now in Unix microseconds: for the "aligned-to-start" bug, the time since the
// Store was made, so that its windows are aligned to its start.
func (s *refStore) unixMicro(now time.Time) int64 {
	if s.bug == "aligned-to-start" {
		return now.UnixMicro() - s.start.UnixMicro()
	}
	return now.UnixMicro()
}

// decide decides n units of a key in state st under lim, counting up to limit, at now.
func (s *refStore) decide(st *algo.FixedWindowState, lim admit.Limit, limit, n int64, now time.Time) algo.FixedWindowResult {
	if s.aligned(lim) {
		return algo.AlignedWindow(st, limit, lim.Period, s.unixMicro(now), n)
	}
	return algo.FixedWindow(st, limit, lim.Period, n)
}

// readGCRA returns the TAT of a GCRA key at now (µs), 0 for a missing key or an emptied bucket, or
// why its state is corrupt, with the bugs that touch reading.
// A Request with an OverrideKey (clamp) reads a TAT too far ahead for lim as an empty bucket
// (algo.GCRAParams.Clamp).
func (s *refStore) readGCRA(key string, lim admit.Limit, now int64, clamp bool) (int64, error) {
	e, ok := s.m[key]
	switch {
	case !ok:
		return 0, nil
	case e.gcra == nil:
		return 0, fmt.Errorf("%w: key holds a fixed window", admit.ErrCorruptState)
	case e.gcra.tat <= now:
		delete(s.m, key)
		return 0, nil
	}
	st := algo.GCRAState{TAT: e.gcra.tat, TTL: time.Duration(e.gcra.tat-now) * time.Microsecond}
	switch {
	case s.bug == "gcra-clamp-everywhere" || clamp && s.bug != "gcra-clamp-corrupt" && s.bug != "gcra-clamp-unclamped":
		tat, err := algo.NewGCRAParams(lim).Clamp(st, now)
		if err != nil {
			return 0, fmt.Errorf("%w: %w", admit.ErrCorruptState, err)
		}
		return tat, nil
	case clamp && s.bug == "gcra-clamp-unclamped":
		return e.gcra.tat, nil // not corrupt, but decided as it is
	}
	if err := algo.CheckGCRA(st, now, lim); err != nil {
		return 0, fmt.Errorf("%w: %w", admit.ErrCorruptState, err)
	}
	if s.bug == "gcra-no-refill" {
		// Decide as if no time had passed since the last write.
		return e.gcra.tat - (now - e.gcra.written), nil
	}
	return e.gcra.tat, nil
}

// decideGCRA decides n units of a key whose TAT is tat at now, with the bugs that touch deciding.
func (s *refStore) decideGCRA(tat, now int64, lim admit.Limit, n int64) algo.GCRAResult {
	if s.bug == "gcra-burst-is-rate" {
		lim.Burst = 0
	}
	r := algo.GCRA(tat, now, lim, n)
	switch {
	case !r.Allowed && s.bug == "gcra-retry-is-reset":
		r.RetryAfter = r.ResetAfter
	case !r.Allowed && s.bug == "gcra-no-remaining-on-reject":
		r.Remaining = 0 // as redis_rate reports a rejection
	case s.bug == "gcra-reset-truncated":
		r.ResetAfter = (time.Duration(max(r.TAT, tat)-now) * time.Microsecond).Truncate(time.Millisecond)
		if r.ResetAfter < 0 {
			r.ResetAfter = 0
		}
	}
	return r
}

// applyGCRA makes the write of r, of n units of a GCRA key whose TAT was tat, when the request is
// admitted (all), and returns its Decision, with the bugs that touch writing.
func (s *refStore) applyGCRA(key string, lim admit.Limit, n, tat int64, r *algo.GCRAResult, all bool, now int64) admit.Decision {
	switch {
	case all && r.Write:
		s.m[key] = refEntry{deadline: time.UnixMicro(r.TAT), gcra: &refGCRA{tat: r.TAT, written: now}}
	case !r.Allowed && n > 0 && s.bug == "gcra-reject-writes":
		penalty := max(tat, now) + n*lim.EmissionInterval().Microseconds()
		s.m[key] = refEntry{deadline: time.UnixMicro(penalty), gcra: &refGCRA{tat: penalty, written: now}}
	case !all && r.Allowed:
		*r = s.decideGCRA(tat, now, lim, 0) // rejected by another policy: the key as it is
	}
	return admit.Decision{Allowed: r.Allowed, Limit: lim, Remaining: r.Remaining, RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter}
}

func decision(r algo.FixedWindowResult, lim admit.Limit, bug string) admit.Decision {
	return decisionOf(admit.Decision{Allowed: r.Allowed, Limit: lim, Remaining: r.Remaining, RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter}, bug)
}

// shadow reports whether lim's rejection rejects nothing: it is in shadow mode, unless the bug is
// that shadow mode is ignored.
func shadow(lim admit.Limit, bug string) bool {
	return lim.Shadow && bug != "shadow-enforced"
}

// decisionOf returns d as the reference Store reports it, with the bugs that touch a Decision.
func decisionOf(d admit.Decision, bug string) admit.Decision {
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

// refSliding is what the reference Store knows of one request of a sliding algorithm between reading
// and writing: the state as read, and the Decision.
type refSliding struct {
	on     bool // the request is decided by a sliding algorithm
	window *algo.SlidingWindowState
	log    []int64
	d      admit.Decision
	write  algo.Write
	state  algo.SlidingWindowState // a sliding window's WriteCreate
	trim   int                     // a sliding log's or concurrency key's WriteIncrement
	at     int64                   // the time of the decision, Unix µs
	leases []algo.Lease            // a concurrency key's
	expiry int64                   // the expiry of the lease a concurrency admission adds
	token  uint64                  // and its token
}

// readSliding reads the state of key under lim into sl, with the bugs that touch reading.
func (s *refStore) readSliding(sl *refSliding, key string, lim admit.Limit, now time.Time) error {
	at := now.UnixMicro()
	w := lim.Period.Microseconds()
	switch lim.Algorithm {
	case admit.SlidingWindow:
		st, ok := s.windows[key]
		if !ok {
			return nil
		}
		if err := algo.CheckSlidingWindow(st, lim.Period, at); err != nil {
			return fmt.Errorf("%w: %w", admit.ErrCorruptState, err)
		}
		if s.bug == "sliding-window-forgets-previous" { // an aligned fixed window
			if st.Start != at-at%w {
				return nil
			}
			st.Prev = 0
		}
		sl.window = &st
	case admit.SlidingLog:
		log := s.logs[key]
		if err := algo.CheckSlidingLog(log, at); err != nil {
			return fmt.Errorf("%w: %w", admit.ErrCorruptState, err)
		}
		if s.bug == "sliding-log-window-ends" && len(log) > 0 && log[0] <= at-w {
			log = nil // the whole log ends when its oldest entry leaves, as a fixed window would
		}
		sl.log = log
	case admit.Concurrency:
		leases := s.leases[key]
		if err := algo.CheckConcurrency(leases, at); err != nil {
			return fmt.Errorf("%w: %w", admit.ErrCorruptState, err)
		}
		sl.leases = leases
	}
	return nil
}

// decide decides n units under lim, counting up to limit, on the state sl read, with the bugs that
// touch deciding, and reports whether they are admitted.
func (sl *refSliding) decide(lim admit.Limit, limit, n int64, now time.Time, bug string) bool {
	sl.at = now.UnixMicro()
	d := admit.Decision{Limit: lim}
	switch lim.Algorithm {
	case admit.SlidingWindow:
		st := sl.window
		if st != nil && bug == "sliding-window-floor" {
			// The previous window weighs ⌊p × (w − e)/w⌋: one unit less whenever it is not whole.
			w := lim.Period.Microseconds()
			e := sl.at % w
			var p int64
			switch st.Start {
			case sl.at - e:
				p = st.Prev
			case sl.at - e - w:
				p = st.Curr
			}
			if p*(w-e)%w != 0 {
				limit++
			}
		}
		r := algo.SlidingWindow(st, sl.at, limit, lim.Period, n)
		d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter = r.Allowed, min(r.Remaining, lim.Rate), r.RetryAfter, r.ResetAfter
		sl.write, sl.state = r.Write, r.State
	case admit.SlidingLog:
		r := algo.SlidingLog(sl.log, sl.at, limit, lim.Period, n)
		d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter = r.Allowed, min(r.Remaining, lim.Rate), r.RetryAfter, r.ResetAfter
		sl.write, sl.trim = r.Write, r.Trim
	case admit.Concurrency:
		at := sl.at
		switch {
		case bug == "concurrency-never-expire":
			at = min(at, sl.oldest()) // every lease ever acquired is live
		case bug == "concurrency-one-more":
			limit++
		case bug == "concurrency-peek-acquires" && n == 0 && len(sl.leases) < int(limit):
			n = 1
		}
		r := algo.Concurrency(sl.leases, at, limit, lim.Period, n)
		d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter = r.Allowed, min(r.Remaining, lim.Rate), r.RetryAfter, r.ResetAfter
		if bug == "concurrency-never-expire" && !r.Allowed {
			d.RetryAfter, d.ResetAfter = lim.Period, lim.Period
		}
		sl.write, sl.trim, sl.expiry = r.Write, r.Trim, sl.at+lim.Period.Microseconds()
	}
	sl.d = d
	return d.Allowed
}

// writeSliding makes the write sl decided for n units of key, with the bugs that touch writing.
func (s *refStore) writeSliding(sl *refSliding, key string, lim admit.Limit, n int64) {
	switch lim.Algorithm {
	case admit.SlidingWindow:
		switch sl.write {
		case algo.WriteCreate:
			s.windows[key] = sl.state
		case algo.WriteIncrement:
			st := *sl.window // as read: the not-atomic bug has let others write since
			st.Curr += n
			s.windows[key] = st
		}
	case admit.SlidingLog:
		if sl.write == algo.WriteNone {
			return
		}
		if s.bug == "sliding-log-one-entry-per-take" {
			n = 1
		}
		log := append([]int64(nil), sl.log[sl.trim:]...) // as read
		for range n {
			log = append(log, sl.at)
		}
		s.logs[key] = log
	case admit.Concurrency:
		if sl.write == algo.WriteNone {
			return
		}
		trim := sl.trim
		if s.bug == "concurrency-never-expire" {
			trim = 0
		}
		token := sl.token
		if token == 0 { // a peek the "concurrency-peek-acquires" bug admitted
			token = s.tokens.Next()
		}
		leases := algo.AddLease(sl.leases, trim, algo.Lease{Token: token, Expiry: sl.expiry}) // in place
		if s.bug == "concurrency-key-expires-with-new-lease" {
			// The key expires when the lease just added does, taking longer leases with it.
			for i := range leases {
				leases[i].Expiry = min(leases[i].Expiry, sl.expiry)
			}
		}
		s.leases[key] = leases
	}
}

// oldest returns the expiry of the first lease sl read, or the time of the decision for none.
func (sl *refSliding) oldest() int64 {
	if len(sl.leases) == 0 {
		return sl.at
	}
	return sl.leases[0].Expiry - 1
}

// refOverride is an Override as the reference Store keeps it.
type refOverride struct {
	o admit.Override
}

// live reports whether ro has not expired at now, with the bug that touches expiry.
func (s *refStore) liveOverride(key string, now time.Time) (admit.Override, bool) {
	ro, ok := s.overrides[key]
	if !ok || key == "" {
		return admit.Override{}, false
	}
	if !ro.o.Expires.IsZero() && !ro.o.Expires.After(now) && s.bug != "override-never-expires" {
		return admit.Override{}, false
	}
	return ro.o, true
}

// overrideRequests returns rs with each Limit replaced by its Override's numbers where one is live
// at now, and which were, with the bugs that touch deciding under an Override; or an error matching
// ErrInvalidRequest for numbers a Request cannot take.
func (s *refStore) overrideRequests(rs []admit.Request, now time.Time) ([]admit.Request, []bool, error) {
	out := append([]admit.Request(nil), rs...)
	over := make([]bool, len(rs))
	if s.bug == "override-ignored" {
		return out, over, nil
	}
	for i := range out {
		o, ok := s.liveOverride(out[i].OverrideKey, now)
		if !ok {
			continue
		}
		lim := out[i].Limit
		lim.Rate = o.Rate
		if lim.Algorithm == admit.GCRA && o.Burst > 0 {
			lim.Burst = o.Burst
		}
		r := out[i]
		r.Limit = lim
		if err := r.Validate(); err != nil && s.bug != "override-cost-unchecked" {
			return nil, nil, fmt.Errorf("%w: override %q: %v", admit.ErrInvalidRequest, r.OverrideKey, err)
		}
		out[i].Limit, over[i] = lim, true
	}
	return out, over, nil
}

// SetOverride stores o, checked as every Store checks it, with the bugs that touch storing.
func (s *refStore) SetOverride(ctx context.Context, o admit.Override) error {
	if s.bug != "override-unvalidated" {
		if err := validate.Override(o.Key, o.Rate, o.Burst, o.Expires, o.Reason, s.now()); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", admit.ErrUnavailable, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.overrides[o.Key] = refOverride{o: o}
	return nil
}

func (s *refStore) Override(ctx context.Context, key string) (admit.Override, bool, error) {
	if err := validate.OverrideKey(key); err != nil {
		return admit.Override{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.liveOverride(key, s.now())
	return o, ok, nil
}

func (s *refStore) DeleteOverride(ctx context.Context, key string) (bool, error) {
	if err := validate.OverrideKey(key); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, existed := s.liveOverride(key, s.now())
	if s.bug != "override-delete-noop" {
		delete(s.overrides, key)
	}
	return existed, nil
}

// Overrides lists the live Overrides of policy after cursor, sorted by key, with the bug that
// touches paging.
func (s *refStore) Overrides(ctx context.Context, policy, cursor string, n int) ([]admit.Override, string, error) {
	if err := validate.OverridePage(policy, cursor, n); err != nil {
		return nil, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var keys []string
	for k := range s.overrides {
		_, live := s.liveOverride(k, now)
		if live && validate.OverridePolicy(k) == policy && (k > cursor || s.bug == "override-page-overlap" && k == cursor) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	next := ""
	if len(keys) > n {
		keys, next = keys[:n], keys[n-1]
	}
	page := make([]admit.Override, len(keys))
	for i, k := range keys {
		page[i] = s.overrides[k].o
	}
	return page, next, nil
}

// OverrideCount counts the live Overrides of policy, with the bug that touches counting.
func (s *refStore) OverrideCount(ctx context.Context, policy string) (int64, error) {
	if err := validate.OverridePage(policy, "", 1); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var n int64
	for k := range s.overrides {
		_, live := s.liveOverride(k, now)
		if validate.OverridePolicy(k) == policy && (live || s.bug == "override-count-expired") {
			n++
		}
	}
	return n, nil
}
