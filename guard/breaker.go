package guard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/validate"
)

// ErrOpen is the error of every operation a [Breaker] refuses while it is open, or half-open with
// its probe in flight. It matches admit.ErrUnavailable, so a fail-closed caller answers 503.
var ErrOpen = fmt.Errorf("guard: circuit breaker open: %w", admit.ErrUnavailable)

// ErrClientLate marks a Store's own timeout of a call while the backend answered the Store's other
// calls, or while the Store's process was not running on time: the client was late, not the
// backend. redisstore's timeouts match it when so. Such an error also matches admit.ErrUnavailable
// (fail closed on it) and context.DeadlineExceeded. A [Breaker] counts it as neither success nor
// failure, unless BreakerOptions.CountLate.
var ErrClientLate = validate.ErrClientLate

// Defaults of [BreakerOptions].
const (
	// DefaultFailures is the number of consecutive failures that opens a Breaker.
	DefaultFailures = 5
	// DefaultCoolOff is how long a Breaker stays open before it lets a probe through.
	DefaultCoolOff = time.Second
)

// A BreakerState is the state of a [Breaker].
type BreakerState int32

// The states of a Breaker.
const (
	// BreakerClosed forwards every operation, counting consecutive failures.
	BreakerClosed BreakerState = iota
	// BreakerOpen refuses every operation with ErrOpen until its cool-off has passed.
	BreakerOpen
	// BreakerHalfOpen lets one probe through and refuses every other operation with ErrOpen until
	// the probe's outcome is known.
	BreakerHalfOpen
)

// String returns the state's name: "closed", "open" or "half_open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half_open"
	}
	return fmt.Sprintf("BreakerState(%d)", int32(s))
}

// BreakerOptions configures a [Breaker]. The zero value is ready to use.
type BreakerOptions struct {
	// Failures is the number of consecutive failures that opens the Breaker; 0 or less means
	// DefaultFailures.
	Failures int
	// CoolOff is how long the Breaker stays open before it lets a probe through; 0 or less means
	// DefaultCoolOff.
	CoolOff time.Duration
	// CountLate, if true, counts a late client's timeouts as failures too: a Store's own timeout
	// of a call while the backend answered its other calls (an error matching
	// ErrClientLate), which by default counts as neither success nor failure, so that a
	// descheduled process does not open the Breaker over a healthy backend. Without it, a
	// timeout whose Store judges it later (redisstore's, when it has no evidence yet at the
	// end of the call) is counted once judged, after a short grace (a quarter of redisstore's
	// command timeout); its caller has its error at once.
	CountLate bool
	// Now is the clock; nil means time.Now. It must be safe for concurrent use.
	Now func() time.Time
	// OnStateChange, if not nil, is called on every change of state, in order, with the Breaker's
	// lock held: it must return quickly and must not call the Breaker's operations (State, Opened and
	// Refused are safe). Use it to log, or to count transitions.
	OnStateChange func(from, to BreakerState)
}

// Breaker is a circuit breaker: an admit.Store that forwards every operation to another, and stops
// forwarding while that one keeps failing. It is safe for concurrent use. Make one with [NewBreaker].
//
// After Failures consecutive failures it opens: every operation but an invalid request fails at
// once with [ErrOpen], without touching the next Store. Once CoolOff has passed, the next operation
// is forwarded as the probe; its success closes the Breaker, its failure opens it for another
// CoolOff. A failure is an error matching admit.ErrUnavailable, but not corrupt state (the backend
// answered) nor the caller's own cancellation or deadline: a caller whose deadline is shorter than
// the Store's timeout never trips it, nor does a Store's timeout of a call while the backend
// answered other calls ([ErrClientLate]: the client was late), unless CountLate. A Store's timeout
// whose verdict comes later (an error with a JudgeLate method, as redisstore's without evidence yet)
// is counted when it comes, its caller having had the error at once. The states and
// what counts as a failure, in full:
// docs/failure-modes.md#guardbreaker-in-the-library.
type Breaker struct {
	next      admit.Store
	failures  int
	coolOff   time.Duration
	countLate bool
	now       func() time.Time
	onChange  func(from, to BreakerState)

	state   atomic.Int32  // a BreakerState; written with mu held, read without it
	opened  atomic.Uint64 // times the Breaker opened
	refused atomic.Uint64 // operations answered ErrOpen
	late    atomic.Uint64 // timeouts not counted: the client was late

	mu          sync.Mutex
	consecutive atomic.Int64 // failures in a row, while closed; written with mu held
	until       time.Time    // while open: the end of the cool-off
	probing     bool         // while half-open: a probe is in flight
}

var _ admit.Store = (*Breaker)(nil)

// NewBreaker returns a closed Breaker over next, configured by opts.
func NewBreaker(next admit.Store, opts BreakerOptions) *Breaker {
	b := &Breaker{next: next, failures: opts.Failures, coolOff: opts.CoolOff, countLate: opts.CountLate, now: opts.Now, onChange: opts.OnStateChange}
	if b.failures <= 0 {
		b.failures = DefaultFailures
	}
	if b.coolOff <= 0 {
		b.coolOff = DefaultCoolOff
	}
	if b.now == nil {
		b.now = time.Now
	}
	return b
}

// State returns the Breaker's state.
func (b *Breaker) State() BreakerState { return BreakerState(b.state.Load()) }

// Opened returns the number of times the Breaker has opened (from closed or from half-open).
func (b *Breaker) Opened() uint64 { return b.opened.Load() }

// Refused returns the number of operations the Breaker has answered with ErrOpen.
func (b *Breaker) Refused() uint64 { return b.refused.Load() }

// Late returns the number of the Store's own timeouts the Breaker did not count as failures because
// the client was late ([ErrClientLate]); always 0 under CountLate.
func (b *Breaker) Late() uint64 { return b.late.Load() }

// Take forwards r to the next Store, unless the Breaker refuses it with ErrOpen.
func (b *Breaker) Take(ctx context.Context, r admit.Request) (admit.Decision, error) {
	probe, err := b.before(r.Validate)
	if err != nil {
		return admit.Decision{}, err
	}
	d, err := b.next.Take(ctx, r)
	b.after(ctx, probe, err)
	return d, err
}

// TakeAll forwards rs to the next Store, unless the Breaker refuses it with ErrOpen.
func (b *Breaker) TakeAll(ctx context.Context, rs []admit.Request, ds []admit.Decision) (bool, error) {
	probe, err := b.before(func() error { return admit.ValidateAll(rs, ds) })
	if err != nil {
		return false, err
	}
	allowed, err := b.next.TakeAll(ctx, rs, ds)
	b.after(ctx, probe, err)
	return allowed, err
}

// Release forwards l to the next Store, unless the Breaker refuses it with ErrOpen. A lease that
// cannot be released now is not lost: it expires after its Limit's Period.
func (b *Breaker) Release(ctx context.Context, l admit.Lease) error {
	probe, err := b.before(l.Validate)
	if err != nil {
		return err
	}
	err = b.next.Release(ctx, l)
	b.after(ctx, probe, err)
	return err
}

// Settle forwards res to the next Store, unless the Breaker refuses it with ErrOpen (the
// reservation then stays consumed, as one never settled does).
func (b *Breaker) Settle(ctx context.Context, res admit.Reservation, actual int64) (admit.Decision, error) {
	probe, err := b.before(func() error { return res.Validate(actual) })
	if err != nil {
		return admit.Decision{}, err
	}
	d, err := b.next.Settle(ctx, res, actual)
	b.after(ctx, probe, err)
	return d, err
}

// Reset forwards keys to the next Store, unless the Breaker refuses it with ErrOpen: then nothing
// is reset.
func (b *Breaker) Reset(ctx context.Context, keys []string) error {
	probe, err := b.before(func() error { return validate.ResetKeys(keys) })
	if err != nil {
		return err
	}
	err = b.next.Reset(ctx, keys)
	b.after(ctx, probe, err)
	return err
}

// before decides whether an operation may go on: it returns nil when it may, with probe true when
// it is the half-open Breaker's probe; otherwise the error of validate, or ErrOpen. validate runs
// only when the Breaker is not closed, so a closed Breaker adds no work to an operation.
func (b *Breaker) before(validate func() error) (probe bool, err error) {
	if BreakerState(b.state.Load()) == BreakerClosed {
		return false, nil
	}
	if err := validate(); err != nil {
		return false, err // a caller's mistake is reported as such, open or not
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch BreakerState(b.state.Load()) {
	case BreakerClosed:
		return false, nil
	case BreakerOpen:
		if b.now().Before(b.until) {
			break
		}
		b.setLocked(BreakerHalfOpen)
		b.probing = true
		return true, nil
	case BreakerHalfOpen:
		if !b.probing {
			b.probing = true
			return true, nil
		}
	}
	b.refused.Add(1)
	return false, ErrOpen
}

// after records the outcome err of an operation that ran under ctx; probe says whether it was the
// half-open Breaker's probe.
func (b *Breaker) after(ctx context.Context, probe bool, err error) {
	o := outcomeOf(ctx, err)
	switch {
	case (o == timeout || o == late) && b.countLate:
		o = failure
	case o == timeout:
		if b.judgeLater(probe, err) {
			return // counted when the verdict comes; a probe stays in flight until then
		}
		o = b.lateOutcome(errors.Is(err, validate.ErrClientLate))
	case o == late:
		o = b.lateOutcome(true)
	}
	b.record(probe, o)
}

// judgeLater hands err, a Store's own timeout, to its Store's later verdict if it has one
// (validate.LateVerdict), and reports whether it did: the verdict then records the outcome.
func (b *Breaker) judgeLater(probe bool, err error) bool {
	var v validate.LateVerdict
	return errors.As(err, &v) && v.JudgeLate(func(late bool) { b.record(probe, b.lateOutcome(late)) })
}

// lateOutcome is the outcome of a Store's own timeout, late saying whether the client was late:
// then neutral, and counted by Late; else a failure.
func (b *Breaker) lateOutcome(late bool) outcome {
	if !late {
		return failure
	}
	b.late.Add(1)
	return neutral
}

// record counts o, the outcome of an operation; probe says whether it was the half-open Breaker's
// probe.
func (b *Breaker) record(probe bool, o outcome) {
	if !probe && (o == neutral || o == success && BreakerState(b.state.Load()) == BreakerClosed && b.quiet()) {
		return // the common case: nothing to change
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if probe {
		b.probing = false
		switch o {
		case success:
			b.consecutive.Store(0)
			b.setLocked(BreakerClosed)
		case failure:
			b.openLocked()
		}
		return // neutral: still half-open, for the next operation to probe
	}
	if BreakerState(b.state.Load()) != BreakerClosed {
		return // an operation let through before the Breaker opened: the probe decides now
	}
	switch o {
	case success:
		b.consecutive.Store(0)
	case failure:
		if b.consecutive.Add(1) >= int64(b.failures) {
			b.openLocked()
		}
	}
}

// quiet reports whether no failures have been counted since the last success, so that a success
// has nothing to reset. It reads without the lock: a failure counted meanwhile is reset or not,
// as if it had come after this success or before.
func (b *Breaker) quiet() bool { return b.consecutive.Load() == 0 }

// openLocked opens the Breaker for a cool-off from now. b.mu must be held.
func (b *Breaker) openLocked() {
	b.consecutive.Store(0)
	b.until = b.now().Add(b.coolOff)
	b.opened.Add(1)
	b.setLocked(BreakerOpen)
}

// setLocked moves the Breaker to state to, and tells OnStateChange. b.mu must be held.
func (b *Breaker) setLocked(to BreakerState) {
	from := BreakerState(b.state.Load())
	if from == to {
		return
	}
	b.state.Store(int32(to))
	if b.onChange != nil {
		b.onChange(from, to)
	}
}

// An outcome is what one operation tells about the backend.
type outcome int

const (
	neutral outcome = iota // nothing: the caller's mistake or its giving up, or an unsupported operation
	success                // the backend answered
	failure                // the backend could not answer
	late                   // the Store's own timeout, while the backend answered other calls
	timeout                // the Store's own timeout: late or a failure, as its Store judges it
)

// outcomeOf classifies err, the result of an operation that ran under ctx.
func outcomeOf(ctx context.Context, err error) outcome {
	switch {
	case err == nil:
		return success
	case errors.Is(err, admit.ErrCorruptState):
		return success // the backend answered about one key
	case errors.Is(err, validate.ErrUndecided):
		return success // the primary answered; its replicas did not confirm in time (admit.Limit.Replicas)
	case errors.Is(err, admit.ErrInvalidLimit), errors.Is(err, admit.ErrInvalidRequest), errors.Is(err, errors.ErrUnsupported):
		return neutral
	case errors.Is(err, context.Canceled):
		return neutral
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return neutral // the caller's deadline, not the Store's own timeout
	case errors.Is(err, context.DeadlineExceeded) && errors.Is(err, admit.ErrUnavailable):
		return timeout // the Store's own timeout: its verdict says whether the client was late
	case errors.Is(err, validate.ErrClientLate):
		return late // the Store's own timeout, but the backend was answering: the client was late
	case errors.Is(err, admit.ErrUnavailable):
		return failure
	}
	return neutral
}

// SetOverride forwards o to the next Store, as every operation: refused with ErrOpen while the
// Breaker is open (an invalid Override is reported as such), its outcome counted.
func (b *Breaker) SetOverride(ctx context.Context, o admit.Override) error {
	probe, err := b.before(func() error { return validate.Override(o.Key, o.Rate, o.Burst, o.Expires, o.Reason, b.now()) })
	if err != nil {
		return err
	}
	err = b.next.SetOverride(ctx, o)
	b.after(ctx, probe, err)
	return err
}

// Override forwards key to the next Store, as SetOverride.
func (b *Breaker) Override(ctx context.Context, key string) (admit.Override, bool, error) {
	probe, err := b.before(func() error { return validate.OverrideKey(key) })
	if err != nil {
		return admit.Override{}, false, err
	}
	o, ok, err := b.next.Override(ctx, key)
	b.after(ctx, probe, err)
	return o, ok, err
}

// DeleteOverride forwards key to the next Store, as SetOverride.
func (b *Breaker) DeleteOverride(ctx context.Context, key string) (bool, error) {
	probe, err := b.before(func() error { return validate.OverrideKey(key) })
	if err != nil {
		return false, err
	}
	existed, err := b.next.DeleteOverride(ctx, key)
	b.after(ctx, probe, err)
	return existed, err
}

// Overrides forwards the listing to the next Store, as SetOverride.
func (b *Breaker) Overrides(ctx context.Context, policy, cursor string, n int) ([]admit.Override, string, error) {
	probe, err := b.before(func() error { return validate.OverridePage(policy, cursor, n) })
	if err != nil {
		return nil, "", err
	}
	page, next, err := b.next.Overrides(ctx, policy, cursor, n)
	b.after(ctx, probe, err)
	return page, next, err
}

// OverrideCount forwards the count to the next Store, as SetOverride.
func (b *Breaker) OverrideCount(ctx context.Context, policy string) (int64, error) {
	probe, err := b.before(func() error { return validate.OverridePage(policy, "", 1) })
	if err != nil {
		return 0, err
	}
	n, err := b.next.OverrideCount(ctx, policy)
	b.after(ctx, probe, err)
	return n, err
}
