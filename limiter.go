package admit

import (
	"context"
	"fmt"
)

// DefaultVersion is the key version of a Limiter made by NewLimiter.
const DefaultVersion = "1"

// A Limiter applies one or more Limits to the subjects of one Store, all-or-nothing, with keys made by
// a KeyBuilder. It is safe for concurrent use. Make one with [NewLimiter]; the zero value is not
// usable.
type Limiter struct {
	store   Store
	keys    *KeyBuilder
	limits  []Limit
	version string
	err     error // why the Limiter cannot decide anything, found by NewLimiter
}

// NewLimiter returns a Limiter that applies every one of limits to the subjects of store, keyed by
// keys in version DefaultVersion. Each Limit needs a distinct Name. Invalid limits — none, more than
// MaxRequests, an invalid or unnamed or repeated one — are reported by every call, as an error
// matching ErrInvalidLimit.
func NewLimiter(store Store, keys *KeyBuilder, limits ...Limit) *Limiter {
	l := &Limiter{store: store, keys: keys, limits: append([]Limit(nil), limits...), version: DefaultVersion}
	l.err = l.check()
	return l
}

// check reports why l cannot decide anything, or nil.
func (l *Limiter) check() error {
	switch {
	case l.store == nil || l.keys == nil:
		return fmt.Errorf("%w: a Limiter needs a Store and a KeyBuilder", ErrInvalidLimit)
	case len(l.limits) == 0 || len(l.limits) > MaxRequests:
		return fmt.Errorf("%w: %d limits; want 1…%d", ErrInvalidLimit, len(l.limits), MaxRequests)
	}
	for i, lim := range l.limits {
		if err := lim.Validate(); err != nil {
			return err
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
	return nil
}

// Limits returns the Limits that l applies.
func (l *Limiter) Limits() []Limit { return append([]Limit(nil), l.limits...) }

// Allow is shorthand for AllowN(ctx, subject, 1).
func (l *Limiter) Allow(ctx context.Context, subject string) (Decision, error) {
	return l.AllowN(ctx, subject, 1)
}

// AllowN consumes n units for subject under every Limit of l if all of them have n available, and
// reports the deciding Decision (see [Deciding]); AllowN(ctx, subject, 0) is a peek that consumes
// nothing.
func (l *Limiter) AllowN(ctx context.Context, subject string, n int64) (Decision, error) {
	return l.Take(ctx, Subject{ID: subject}, n, "", nil)
}

// Take decides n units for s under every Limit of l, all-or-nothing, with request ID id (empty for
// none; see [Request]). It fills ds, if not nil, with the Decision of each Limit in order — ds must
// then have len(l.Limits()) elements — and returns the deciding one (see [Deciding]).
func (l *Limiter) Take(ctx context.Context, s Subject, n int64, id string, ds []Decision) (Decision, error) {
	if l.err != nil {
		return Decision{}, l.err
	}
	if ds != nil && len(ds) != len(l.limits) {
		return Decision{}, fmt.Errorf("%w: %d Decisions for %d limits", ErrInvalidRequest, len(ds), len(l.limits))
	}
	if len(l.limits) == 1 {
		r, err := l.request(0, s, n, id)
		if err != nil {
			return Decision{}, err
		}
		d, err := l.store.Take(ctx, r)
		if err == nil && ds != nil {
			ds[0] = d
		}
		return d, err
	}
	var rbuf [MaxRequests]Request
	var dbuf [MaxRequests]Decision
	rs, out := rbuf[:len(l.limits)], dbuf[:len(l.limits)]
	for i := range rs {
		r, err := l.request(i, s, n, id)
		if err != nil {
			return Decision{}, err
		}
		rs[i] = r
	}
	if _, err := l.store.TakeAll(ctx, rs, out); err != nil {
		return Decision{}, err
	}
	copy(ds, out)
	return out[Deciding(out)], nil
}

// request returns the Request of s under the i-th Limit.
func (l *Limiter) request(i int, s Subject, n int64, id string) (Request, error) {
	key, err := l.keys.Key(l.limits[i], l.version, s)
	if err != nil {
		return Request{}, err
	}
	r := Request{Key: key, Limit: l.limits[i], Cost: n, ID: id}
	return r, r.Validate() // before the Store: a decorator in between need not

}
