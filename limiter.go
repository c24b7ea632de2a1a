package admit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/admit-dev/admit/internal/bound"
)

// A Limiter applies one or more Limits to the subjects of one Store, all-or-nothing, with keys made by
// a KeyBuilder. It is safe for concurrent use. Make one with [NewLimiter]; the zero value is not
// usable.
type Limiter struct {
	store    Store
	keys     *KeyBuilder
	limits   []Limit  // each policy's own Limit (Tier ""), in order: one Decision each
	tiers    []Limit  // the tier variants of those Limits (Tier set), nil for none
	versions []string // the key version of every Limit: bound.DefaultVersion
	err      error    // why the Limiter cannot decide anything, found by NewLimiter
}

// NewLimiter returns a Limiter that applies every one of limits to the subjects of store, keyed by
// keys in version "1". Each Limit needs a distinct Name, but tier variants: Limits of a Name and
// Algorithm of limits with Tier set. A [Subject] of Tier "pro" is decided, for each Name, under
// its Limit of Tier "pro"; under its own when the Name has no variants (a policy without tiers
// ignores the tier); else it is an error matching ErrInvalidRequest,
// `unknown tier "pro" for policy "api"`. Keys have no tier (docs/keys.md).
//
// NewLimiter checks its arguments at once, and never panics: call [Limiter.Validate] on the
// Limiter it returns, before serving, to stop on an invalid one — no store or keys, no limits or
// more than 16, an invalid, unnamed or repeated Limit, a tier variant without its policy's own
// Limit or of another Algorithm — with an error matching ErrInvalidLimit:
//
//	limiter := admit.NewLimiter(store, keys, perSecond, perDay)
//	if err := limiter.Validate(); err != nil {
//		log.Fatal(err) // a bad Limit: at start, never as a failure of each request
//	}
//
// A Limiter that does not pass Validate decides nothing: every call returns Validate's error, and
// httplimit's Middleware.Wrap refuses it.
func NewLimiter(store Store, keys *KeyBuilder, limits ...Limit) *Limiter {
	l := &Limiter{store: store, keys: keys, versions: []string{bound.DefaultVersion}}
	for _, lim := range limits {
		if lim.Tier == "" {
			l.limits = append(l.limits, lim)
		} else {
			l.tiers = append(l.tiers, lim)
		}
	}
	l.err = l.check()
	return l
}

// Validate reports why l cannot decide anything, as an error matching [ErrInvalidLimit], or nil:
// the arguments of [NewLimiter] that made it are checked once, there, without any I/O. It never
// panics; a nil or zero Limiter is invalid.
func (l *Limiter) Validate() error {
	switch {
	case l == nil:
		return fmt.Errorf("%w: a nil Limiter", ErrInvalidLimit)
	case l.err != nil:
		return l.err
	case l.store == nil || l.keys == nil:
		return l.check() // a zero Limiter, not made by NewLimiter
	}
	return nil
}

// check reports why l cannot decide anything, or nil.
func (l *Limiter) check() error {
	switch {
	case l.store == nil || l.keys == nil:
		return fmt.Errorf("%w: a Limiter needs a Store and a KeyBuilder", ErrInvalidLimit)
	case len(l.limits) == 0 || len(l.limits) > bound.MaxRequests:
		return fmt.Errorf("%w: %d limits; want 1-%d", ErrInvalidLimit, len(l.limits), bound.MaxRequests)
	}
	for i, lim := range l.limits {
		if err := lim.Validate(); err != nil {
			return fmt.Errorf("limit %d %q: %w", i, lim.Name, err)
		}
		if lim.Name == "" {
			return fmt.Errorf("%w: limit %d has no name", ErrInvalidLimit, i)
		}
		for _, prev := range l.limits[:i] {
			if prev.Name == lim.Name {
				return fmt.Errorf("%w: two limits named %q", ErrInvalidLimit, lim.Name)
			}
		}
	}
	return l.checkTiers()
}

// checkTiers reports why a tier variant of l cannot be used, or nil: each must be valid, of a Name
// that has its own Limit in l and of that Limit's Algorithm, and one of its Name and Tier.
func (l *Limiter) checkTiers() error {
	for i, lim := range l.tiers {
		if err := lim.Validate(); err != nil {
			return fmt.Errorf("limit %q tier %q: %w", lim.Name, lim.Tier, err)
		}
		base := -1
		for j := range l.limits {
			if l.limits[j].Name == lim.Name {
				base = j
			}
		}
		switch {
		case base < 0:
			return fmt.Errorf("%w: tier %q of %q: no limit named %q of no tier", ErrInvalidLimit, lim.Tier, lim.Name, lim.Name)
		case l.limits[base].Algorithm != lim.Algorithm:
			return fmt.Errorf("%w: tier %q of %q is %v, the limit %v: a tier keeps its policy's algorithm", ErrInvalidLimit, lim.Tier, lim.Name, lim.Algorithm, l.limits[base].Algorithm)
		}
		for _, prev := range l.tiers[:i] {
			if prev.Name == lim.Name && prev.Tier == lim.Tier {
				return fmt.Errorf("%w: two limits named %q of tier %q", ErrInvalidLimit, lim.Name, lim.Tier)
			}
		}
	}
	return nil
}

// Limits returns the Limits that l applies to a subject of no tier: each policy's own (Tier ""),
// in order, one per Decision of Take's ds. The tier variants given to NewLimiter are not among them.
func (l *Limiter) Limits() []Limit { return append([]Limit(nil), l.limits...) }

// limitFor returns the Limit that decides a subject of tier under lim, a policy's own Limit of l:
// as NewLimiter says.
func (l *Limiter) limitFor(lim Limit, tier string) (Limit, error) {
	tiered := false
	for i := range l.tiers {
		if t := &l.tiers[i]; t.Name == lim.Name {
			if t.Tier == tier {
				return *t, nil
			}
			tiered = true
		}
	}
	if !tiered {
		return lim, nil
	}
	return Limit{}, unknownTier(tier, lim.Name)
}

// unknownTier returns the error of a request naming tier, which the policy named policy does not
// have: it matches ErrInvalidRequest, and the service answers it (internal/validate.ClientMessage) as
// `invalid request: unknown tier "x" for policy "api"`, as package policy's LimitFor does.
func unknownTier(tier, policy string) error {
	return fmt.Errorf("%w: unknown tier %q for policy %q", ErrInvalidRequest, tier, policy)
}

// Allow is shorthand for AllowN(ctx, s, 1).
func (l *Limiter) Allow(ctx context.Context, s Subject) (Decision, error) {
	return l.AllowN(ctx, s, 1)
}

// AllowN consumes n units for s under every Limit of l if all of them have n available, and
// reports the deciding Decision (see [Deciding]); AllowN(ctx, s, 0) is a peek that consumes
// nothing. It is Take(ctx, s, n, "", nil).
func (l *Limiter) AllowN(ctx context.Context, s Subject, n int64) (Decision, error) {
	return l.Take(ctx, s, n, "", nil)
}

// Take decides n units for s under every Limit of l, all-or-nothing, with request ID id (empty for
// none; see [Request]). n is the Cost of each Limit's Request: 0 … its Capacity, and under a
// Concurrency Limit 0 or 1 — an admitted n of 1 takes one lease, which Take leaves held until it
// expires (use [Limiter.Admit] to release it). Any other n is an error matching ErrInvalidRequest,
// before any I/O. It fills ds, if not nil, with the Decision of each Limit in order — ds must then
// have len(l.Limits()) elements — and returns the deciding one (see [Deciding]).
func (l *Limiter) Take(ctx context.Context, s Subject, n int64, id string, ds []Decision) (Decision, error) {
	if l.err != nil {
		return Decision{}, l.err
	}
	if ds != nil && len(ds) != len(l.limits) {
		return Decision{}, fmt.Errorf("%w: %d Decisions for %d limits", ErrInvalidRequest, len(ds), len(l.limits))
	}
	if len(l.limits) == 1 {
		r := [1]Request{{Limit: l.limits[0]}}
		if s.Tier != "" && l.tiers != nil {
			var err error
			if r[0].Limit, err = l.limitFor(r[0].Limit, s.Tier); err != nil {
				return Decision{}, err
			}
		}
		if err := Requests(r[:], l.keys, l.versions, s, n, id); err != nil {
			return Decision{}, err
		}
		d, err := l.store.Take(ctx, r[0]) // decides as TakeAll does, without its slices
		if err == nil && ds != nil {
			ds[0] = d
		}
		return d, err
	}
	sc := takeScratches.Get().(*takeScratch)
	defer sc.put(len(l.limits))
	rs, out := sc.rs[:len(l.limits)], sc.ds[:len(l.limits)]
	if err := l.requests(rs, s, n, id); err != nil {
		return Decision{}, err
	}
	if _, err := l.store.TakeAll(ctx, rs, out); err != nil {
		return Decision{}, err
	}
	copy(ds, out)
	return out[Deciding(out)], nil
}

// A takeScratch holds the Requests and Decisions of one Take of several Limits. They are pooled:
// arrays on Take's stack would escape to the heap through the Store interface, two allocations of
// some 3 KB per call. A Store does not keep rs or ds once TakeAll returns.
type takeScratch struct {
	rs [bound.MaxRequests]Request
	ds [bound.MaxRequests]Decision
}

var takeScratches = sync.Pool{New: func() any { return new(takeScratch) }}

// put clears the first n Requests and Decisions of sc, so that the pool keeps no key alive, and
// returns sc to the pool.
func (sc *takeScratch) put(n int) {
	clear(sc.rs[:n])
	clear(sc.ds[:n])
	takeScratches.Put(sc)
}

// requests fills rs, len(l.limits) of them, with the Requests of s under l's Limits.
func (l *Limiter) requests(rs []Request, s Subject, n int64, id string) error {
	for i := range rs {
		rs[i] = Request{Limit: l.limits[i]}
		if s.Tier != "" && l.tiers != nil {
			var err error
			if rs[i].Limit, err = l.limitFor(rs[i].Limit, s.Tier); err != nil {
				return err
			}
		}
	}
	return Requests(rs, l.keys, l.versions, s, n, id)
}

// Admit decides n units for s under every Limit of l, all-or-nothing, as Take does, and returns the
// deciding Decision and release, which ends the leases the request holds under l's Concurrency
// Limits. It fills ds, if not nil, as Take does. Call release once the work is done — deferred, so
// that a panic releases too; release is never nil, does nothing for a rejected request or a Limiter
// without Concurrency Limits, and does nothing when called again. It releases even when ctx is
// done, within the Store's own timeout; a lease it cannot release (the Store unavailable) expires
// after its Limit's Period.
func (l *Limiter) Admit(ctx context.Context, s Subject, n int64, id string, ds []Decision) (d Decision, release func(), err error) {
	h, d, err := l.hold(ctx, s, n, id, ds)
	return d, h.release, err
}

// Reserve takes estimate units for s under every Limit of l, all-or-nothing, as AllowN does,
// for a request whose actual cost is known only once it is done (docs/reserve-settle.md), and returns the deciding
// Decision and settle. settle(ctx, actual) settles the reservation of each Limit at actual (see
// Store.Settle: a refund goes back only to the window it was counted in; an overrun consumes what is
// left) and releases the leases of its Concurrency Limits, and returns the deciding Decision of
// the settled Limits (the zero Decision when l has only Concurrency Limits). A reservation never
// settled stays consumed. estimate is a cost as Take's n is: under a Concurrency Limit 0 or 1, so
// a Limiter that reserves more than one unit has no Concurrency Limit. settle is never nil; for a
// rejected request, or when called again, it settles nothing and returns an error matching
// ErrInvalidRequest.
func (l *Limiter) Reserve(ctx context.Context, s Subject, estimate int64) (d Decision, settle func(ctx context.Context, actual int64) (Decision, error), err error) {
	h, d, err := l.hold(ctx, s, estimate, "", nil)
	return d, h.settle, err
}

// hold takes n units for s under every Limit of l with request ID id, fills ds if not nil, and
// returns what the request holds.
func (l *Limiter) hold(ctx context.Context, s Subject, n int64, id string, ds []Decision) (*holding, Decision, error) {
	switch {
	case l.err != nil:
		return noHolding(), Decision{}, l.err
	case ds != nil && len(ds) != len(l.limits):
		return noHolding(), Decision{}, fmt.Errorf("%w: %d Decisions for %d limits", ErrInvalidRequest, len(ds), len(l.limits))
	}
	rs := make([]Request, len(l.limits))
	if err := l.requests(rs, s, n, id); err != nil {
		return noHolding(), Decision{}, err
	}
	h, _, err := takeHolding(ctx, l.store, rs)
	if err != nil {
		return h, Decision{}, err
	}
	copy(ds, h.ds)
	return h, h.ds[Deciding(h.ds)], nil
}

// Hold decides rs on store all-or-nothing, as store.TakeAll does, fills ds (len(rs) elements) with
// their Decisions, and reports whether they were all allowed. It returns release, which ends the
// leases that an admitted request holds under the Concurrency Limits of rs: call it once the work
// is done — deferred, so that a panic releases too. release is never nil, does nothing for a
// rejected or undecided request or one without Concurrency Limits, and does nothing when called
// again. It releases even when ctx is done, within the Store's own timeout; a lease it cannot
// release (the Store unavailable) expires after its Limit's Period. Hold copies rs: the caller may
// reuse it, and ds, once Hold returns. [Limiter.Admit] is Hold for a Limiter's Limits.
func Hold(ctx context.Context, store Store, rs []Request, ds []Decision) (allowed bool, release func(), err error) {
	if len(ds) != len(rs) {
		return false, noHolding().release, fmt.Errorf("%w: %d Decisions for %d requests", ErrInvalidRequest, len(ds), len(rs))
	}
	h, allowed, err := takeHolding(ctx, store, append([]Request(nil), rs...))
	copy(ds, h.ds)
	return allowed, h.release, err
}

// takeHolding decides rs, which it keeps, on store, and returns what an admitted request holds.
func takeHolding(ctx context.Context, store Store, rs []Request) (*holding, bool, error) {
	h := &holding{store: store, ctx: context.WithoutCancel(ctx), rs: rs, ds: make([]Decision, len(rs))}
	h.done.Store(true) // until the request is admitted: nothing to release or settle
	allowed, err := store.TakeAll(ctx, h.rs, h.ds)
	if err != nil {
		return h, false, err
	}
	h.done.Store(!allowed)
	return h, allowed, nil
}

// noHolding returns the holding of a request that holds nothing.
func noHolding() *holding {
	h := &holding{}
	h.done.Store(true)
	return h
}

// A holding is what an admitted request holds under a Limiter's Limits until it ends: the leases of
// its Concurrency Limits and the reservations of the others.
type holding struct {
	store Store
	ctx   context.Context // the request's, without its cancellation: for releasing
	rs    []Request
	ds    []Decision
	done  atomic.Bool // set once the holding has ended, or never began
}

// release ends the holding's leases, once.
func (h *holding) release() {
	if h.done.Swap(true) {
		return
	}
	h.releaseLeases()
}

// releaseLeases releases the holding's leases, and reports the first error.
func (h *holding) releaseLeases() error {
	var first error
	for i := range h.rs {
		if h.rs[i].Limit.Algorithm != Concurrency || h.ds[i].Token == 0 {
			continue
		}
		err := h.store.Release(h.ctx, Lease{Key: h.rs[i].Key, Limit: h.rs[i].Limit, Token: h.ds[i].Token})
		if first == nil {
			first = err
		}
	}
	return first
}

// settle settles the holding's reservations at actual and releases its leases, once.
func (h *holding) settle(ctx context.Context, actual int64) (Decision, error) {
	if h.done.Swap(true) {
		return Decision{}, fmt.Errorf("%w: nothing to settle: the request was not admitted, or is settled already", ErrInvalidRequest)
	}
	first := h.releaseLeases()
	var settled [bound.MaxRequests]Decision
	ds := settled[:0]
	for i := range h.rs {
		r := &h.rs[i]
		if r.Limit.Algorithm == Concurrency || r.Cost == 0 {
			continue
		}
		d, err := h.store.Settle(ctx, Reservation{Request: *r, Token: h.ds[i].Token}, actual)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		ds = append(ds, d)
	}
	if first != nil || len(ds) == 0 {
		return Decision{}, first
	}
	return ds[Deciding(ds)], nil
}
