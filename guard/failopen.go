package guard

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/validate"
	"github.com/admit-dev/admit/memstore"
)

// DefaultFailOpenEntries is the local table's cap when FailOpenOptions.MaxEntries is 0: 100,000
// keys, about 6 MiB of fixed windows with 20-byte keys.
const DefaultFailOpenEntries = 100_000

// FailOpenOptions configures a FailOpen.
type FailOpenOptions struct {
	// Local returns the local limit of lim: the most units of a key that this process admits per
	// lim.Period on its own while the backend cannot decide (for a Concurrency Limit, the most
	// leases of a key in flight), 1 … lim.Rate; ok false makes lim fail closed. It is called on
	// every call that the backend failed, never while the backend decides, and must be safe for
	// concurrent use. nil fails every Limit closed, until [FailOpen.SetLocalLimits] gives the
	// local limits of a configuration, as admit serve's reload path does.
	Local func(lim admit.Limit) (local int64, ok bool)
	// MaxEntries caps the local table: the keys the local limiter holds state for, and, apart from
	// them, the leases and reservations it has handed out and not yet seen end. 0 or less means
	// DefaultFailOpenEntries. The key table is memstore's, whose cap is enforced per shard (64
	// shards): it holds at most MaxEntries rounded up to a multiple of 64.
	MaxEntries int
	// Now is the local limiter's clock; nil means time.Now. It must be safe for concurrent use.
	Now func() time.Time
}

// FailOpen is an admit.Store that decides on another, next, and lets a local in-process limiter
// decide instead when next cannot (failure: open). It is safe for concurrent use. Make one with
// [NewFailOpen]; the zero value is not usable.
//
// A call fails open only when next's error matches admit.ErrUnavailable and every Request of it
// has a local limit (FailOpenOptions.Local, or [FailOpen.SetLocalLimits]); corrupt state, a done
// ctx, a caller's mistake, one Request without a local limit or replicated (admit.Limit.Replicas:
// the local limiter has no replica to confirm an admission) or a full local table fail closed,
// with next's error. The local limiter is a [memstore.Store] made on the first call that fails
// open: it decides the same Requests, all-or-nothing, with each Rate replaced by its local limit,
// and its Decisions are marked Degraded. Leases and reservations it hands out are released and
// settled locally, never on next. Overrides (admit.Override) are not applied when failing open:
// next's are out of reach, and the local limiter decides under the local limit of the Request's
// own Limit, not overridden; the override methods go to next and never fail open. While next
// cannot decide, P processes admit per key at most
// P x local limit x (windows of the outage + 1), on top of what next admitted before: the rules,
// the bound and the table's cap are in docs/failure-modes.md#guardfailopen-in-the-library.
type FailOpen struct {
	next       admit.Store
	localLimit atomic.Pointer[func(admit.Limit) (int64, bool)] // nil, or a nil func: every Limit fails closed
	maxEntries int
	now        func() time.Time

	mu      sync.Mutex
	local   *memstore.Store    // made on the first call that fails open; nil before
	tokens  map[tokenRef]int64 // degraded leases and reservations: expiry in Unix nanoseconds
	pending int                // tokens that calls deciding locally may add
	prune   int64              // no expired token before this instant, Unix nanoseconds
	tracked atomic.Bool        // whether tokens has ever held anything: if not, Release and Settle go to next, locking nothing
}

// A tokenRef names a lease or a reservation the local limiter handed out.
type tokenRef struct {
	key   string
	token uint64
}

var _ admit.Store = (*FailOpen)(nil)

// NewFailOpen returns a FailOpen that decides on next, and on a local limiter configured by opts when
// next cannot.
func NewFailOpen(next admit.Store, opts FailOpenOptions) *FailOpen {
	f := &FailOpen{next: next, maxEntries: opts.MaxEntries, now: opts.Now}
	if opts.Local != nil {
		f.localLimit.Store(&opts.Local)
	}
	if f.maxEntries <= 0 {
		f.maxEntries = DefaultFailOpenEntries
	}
	if f.now == nil {
		f.now = time.Now
	}
	return f
}

// SetLocalLimits makes limits the local limits from now on, in place of FailOpenOptions.Local:
// a Limit that is a key of limits, exactly, fails open with its value as local limit (1 …
// its Rate); any other Limit fails closed, and so does every one for a nil or empty limits. The
// configuration's reload path calls it with the limits of each configuration it loads, so that a
// policy whose failure mode or local limit changes fails open (or closed) from its next decision
// on. f keeps limits: the caller must not change it after.
func (f *FailOpen) SetLocalLimits(limits map[admit.Limit]int64) {
	local := func(lim admit.Limit) (int64, bool) {
		n, ok := limits[lim]
		return n, ok
	}
	f.localLimit.Store(&local)
}

// Close stops the local limiter's background sweeper, if the local limiter was ever made. The
// FailOpen keeps working after Close; its local limiter then reclaims expired entries only as new
// keys arrive.
func (f *FailOpen) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.local != nil {
		f.local.Close()
	}
}

// Take decides r; it is TakeAll of one Request. See [FailOpen.TakeAll].
func (f *FailOpen) Take(ctx context.Context, r admit.Request) (admit.Decision, error) {
	rs := [1]admit.Request{r}
	var ds [1]admit.Decision
	_, err := f.TakeAll(ctx, rs[:], ds[:])
	return ds[0], err
}

// TakeAll decides rs on next and, when next cannot decide and every Request has a local limit, on
// the local limiter, marking the Decisions Degraded (see [FailOpen]). Otherwise it returns what next
// returned.
func (f *FailOpen) TakeAll(ctx context.Context, rs []admit.Request, ds []admit.Decision) (bool, error) {
	allowed, err := f.next.TakeAll(ctx, rs, ds)
	if err == nil || !f.failsOpen(ctx, err) {
		return allowed, err
	}
	var buf [bound.MaxRequests]admit.Request
	if len(rs) > len(buf) || len(ds) != len(rs) {
		return false, err
	}
	lrs := buf[:len(rs)]
	for i := range rs {
		lim, ok := f.localFor(rs[i].Limit)
		if !ok {
			return false, err // all-or-nothing: one policy that fails closed fails the call closed
		}
		lrs[i] = rs[i]
		lrs[i].Limit = lim
	}
	if admit.ValidateAll(lrs, ds) != nil {
		return false, err // a cost above the local capacity: the local limiter cannot decide it
	}
	local, ok := f.reserve(len(rs))
	if !ok {
		return false, err // the table of degraded tokens is full
	}
	allowed, lerr := local.TakeAll(ctx, lrs, ds)
	f.track(lrs, ds, lerr == nil)
	if lerr != nil {
		clear(ds)
		return false, err // the local table is full (memstore.ErrFull): fail closed with next's error
	}
	for i := range ds {
		ds[i].Degraded = true
	}
	return allowed, nil
}

// Release ends the lease l: locally if the local limiter handed it out, else on next.
func (f *FailOpen) Release(ctx context.Context, l admit.Lease) error {
	if local, ok := f.tracking(l.Key, l.Token, true); ok {
		if lim, ok := f.localFor(l.Limit); ok {
			l.Limit = lim
		}
		return local.Release(ctx, l)
	}
	return f.next.Release(ctx, l)
}

// Settle settles res at actual: locally, with the Decision marked Degraded, if the local limiter
// handed res out, else on next (see [FailOpen]). A settlement never fails open.
func (f *FailOpen) Settle(ctx context.Context, res admit.Reservation, actual int64) (admit.Decision, error) {
	if local, ok := f.tracking(res.Request.Key, res.Token, false); ok {
		if lim, ok := f.localFor(res.Request.Limit); ok {
			res.Request.Limit = lim
		}
		d, err := local.Settle(ctx, res, actual)
		if err == nil {
			d.Degraded = true
		}
		return d, err
	}
	return f.next.Settle(ctx, res, actual)
}

// Reset resets keys on next, and, once next has, in the local limiter too: a reset never fails
// open, and when next cannot reset, nothing is reset.
func (f *FailOpen) Reset(ctx context.Context, keys []string) error {
	if err := f.next.Reset(ctx, keys); err != nil {
		return err
	}
	f.mu.Lock()
	local := f.local
	f.mu.Unlock()
	if local == nil {
		return nil
	}
	return local.Reset(ctx, keys)
}

// failsOpen reports whether err, next's error for a call with ctx, lets the local limiter decide:
// next was unavailable, the state is not corrupt, the decision is not undecided (a replicated
// policy's unconfirmed admission), and the caller has not given up.
func (f *FailOpen) failsOpen(ctx context.Context, err error) bool {
	return f.localLimit.Load() != nil && ctx.Err() == nil &&
		errors.Is(err, admit.ErrUnavailable) && !errors.Is(err, admit.ErrCorruptState) &&
		!errors.Is(err, validate.ErrUndecided) // nothing is admitted that the replicas did not confirm
}

// localFor returns the Limit the local limiter decides lim under, and whether lim fails open.
func (f *FailOpen) localFor(lim admit.Limit) (admit.Limit, bool) {
	localLimit := f.localLimit.Load()
	if localLimit == nil || lim.Replicas > 0 { // the local limiter has no replica to confirm an admission
		return admit.Limit{}, false
	}
	n, ok := (*localLimit)(lim)
	if !ok {
		return admit.Limit{}, false
	}
	local, err := scaled(lim, n)
	return local, err == nil
}

// scaled returns the Limit a FailOpen's local limiter decides lim under with local limit n: lim
// with Rate n, and, for GCRA, Burst scaled by n/Rate (rounded down, at least 1; 0 stays 0). It
// reports an error matching admit.ErrInvalidLimit when n is outside 1 … lim.Rate or the result is
// not a valid Limit.
func scaled(lim admit.Limit, n int64) (admit.Limit, error) {
	if n < 1 || n > lim.Rate {
		return admit.Limit{}, fmt.Errorf("%w: local limit %d outside 1-%d", admit.ErrInvalidLimit, n, lim.Rate)
	}
	out := lim
	out.Rate = n
	if lim.Burst > 0 {
		// Burst × n / Rate without overflow: each is at most bound.MaxRate (10^15).
		hi, lo := bits.Mul64(uint64(lim.Burst), uint64(n))
		q, _ := bits.Div64(hi, lo, uint64(lim.Rate)) // hi < Rate, as n ≤ Rate
		out.Burst = max(1, int64(q))
	}
	if err := out.Validate(); err != nil {
		return admit.Limit{}, err
	}
	return out, nil
}

// reserve makes room for n tokens of a call about to decide locally, and returns the local limiter,
// made on first use. It reports false when the token table has no room, even after forgetting the
// tokens whose time is up.
func (f *FailOpen) reserve(n int) (*memstore.Store, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.local == nil {
		f.local = memstore.New(memstore.Options{Now: f.now, MaxEntries: f.maxEntries})
		f.tokens = make(map[tokenRef]int64)
	}
	if len(f.tokens)+f.pending+n > f.maxEntries {
		f.pruneLocked()
		if len(f.tokens)+f.pending+n > f.maxEntries {
			return nil, false
		}
	}
	f.pending += n
	return f.local, true
}

// pruneLocked forgets the tokens whose time is up, at most once until the earliest of the others is.
// The caller holds f.mu.
func (f *FailOpen) pruneLocked() {
	now := f.now().UnixNano()
	if now < f.prune {
		return
	}
	next := int64(1<<63 - 1)
	for ref, expiry := range f.tokens {
		if expiry <= now {
			delete(f.tokens, ref)
		} else {
			next = min(next, expiry)
		}
	}
	f.prune = next
}

// track remembers the tokens of the Decisions ds of the local Requests rs, if decided, and gives back
// the room reserve made for them.
func (f *FailOpen) track(rs []admit.Request, ds []admit.Decision, decided bool) {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending -= len(rs)
	if !decided {
		return
	}
	for i := range ds {
		if ds[i].Token == 0 {
			continue
		}
		expiry := now.Add(rs[i].Limit.MaxWait()).UnixNano()
		f.tokens[tokenRef{key: rs[i].Key, token: ds[i].Token}] = expiry
		f.prune = min(f.prune, expiry)
		f.tracked.Store(true)
	}
}

// tracking reports whether the local limiter handed out token of key and its time is not up, and
// then returns the local limiter. forget forgets the token: a lease is released once, while a
// reservation may be settled more than once (admit.Store.Settle).
func (f *FailOpen) tracking(key string, token uint64, forget bool) (*memstore.Store, bool) {
	if !f.tracked.Load() {
		return nil, false // nothing was ever decided locally: next, untouched
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ref := tokenRef{key: key, token: token}
	expiry, ok := f.tokens[ref]
	if !ok {
		return nil, false
	}
	if forget || expiry <= f.now().UnixNano() {
		delete(f.tokens, ref)
	}
	if expiry <= f.now().UnixNano() {
		return nil, false
	}
	return f.local, true
}

// SetOverride forwards o to the next Store; it never fails open: an error of next is returned.
// The local limiter keeps no Overrides.
func (f *FailOpen) SetOverride(ctx context.Context, o admit.Override) error {
	return f.next.SetOverride(ctx, o)
}

// Override forwards key to the next Store.
func (f *FailOpen) Override(ctx context.Context, key string) (admit.Override, bool, error) {
	return f.next.Override(ctx, key)
}

// DeleteOverride forwards key to the next Store.
func (f *FailOpen) DeleteOverride(ctx context.Context, key string) (bool, error) {
	return f.next.DeleteOverride(ctx, key)
}

// Overrides forwards the listing to the next Store.
func (f *FailOpen) Overrides(ctx context.Context, policy, cursor string, n int) ([]admit.Override, string, error) {
	return f.next.Overrides(ctx, policy, cursor, n)
}

// OverrideCount forwards the count to the next Store.
func (f *FailOpen) OverrideCount(ctx context.Context, policy string) (int64, error) {
	return f.next.OverrideCount(ctx, policy)
}
