// Package admit decides whether a request may proceed under a rate limit shared by many processes.
//
// A [Limit] names an algorithm and its numbers; a [Store] keeps the state of many keys and decides
// atomically; a [Limiter] binds one Limit to a Store. Being over the limit is a [Decision] with
// Allowed false, never an error: an error always means the Store could not decide, and matches
// [ErrUnavailable] (or [ErrCorruptState], a kind of it) or, for a caller's mistake, [ErrInvalidLimit]
// or [ErrInvalidRequest].
//
// The in-process store lives in package memstore, the Redis store in package redisstore; package
// limittest holds the conformance suite both pass.
package admit

import (
	"context"
	"fmt"
	"time"
)

// Algorithm names how a Limit counts.
// The zero value is not a valid Algorithm.
type Algorithm uint8

// The algorithms a Limit may name.
const (
	// FixedWindow admits at most Rate units per window of Period, the window starting at the first
	// admitted request for a key (not at a clock boundary).
	FixedWindow Algorithm = iota + 1
)

// String returns the algorithm's name as used in configuration, such as "fixed_window".
func (a Algorithm) String() string {
	switch a {
	case FixedWindow:
		return "fixed_window"
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// ParseAlgorithm returns the Algorithm named s, as written by [Algorithm.String].
func ParseAlgorithm(s string) (Algorithm, error) {
	switch s {
	case "fixed_window":
		return FixedWindow, nil
	}
	return 0, fmt.Errorf("%w: unknown algorithm %q", ErrInvalidLimit, s)
}

// Bounds on a Limit and a request, enforced by [Limit.Validate] and [ValidateRequest].
const (
	// MaxRate is the largest Rate: 10^15, inside the structured-field integer range and exact in the
	// doubles that Redis's Lua uses.
	MaxRate int64 = 1_000_000_000_000_000
	// MinPeriod is the shortest Period.
	MinPeriod = time.Millisecond
	// MaxPeriod is the longest Period: 366 days.
	MaxPeriod = 366 * 24 * time.Hour
	// MaxKeyLen is the longest key, in bytes.
	MaxKeyLen = 512
)

// A Limit is one policy's numbers. Limits are values, compared with ==; one Store serves every Limit.
// The zero value is invalid.
type Limit struct {
	// Algorithm says how to count.
	Algorithm Algorithm
	// Rate is the number of units admitted per Period, 1 … MaxRate.
	Rate int64
	// Period is the window, a whole number of milliseconds between MinPeriod and MaxPeriod.
	Period time.Duration
}

// Validate reports why l cannot be used, as an error matching [ErrInvalidLimit], or nil.
func (l Limit) Validate() error {
	switch {
	case l.Algorithm != FixedWindow:
		return fmt.Errorf("%w: unknown algorithm %v", ErrInvalidLimit, l.Algorithm)
	case l.Rate < 1 || l.Rate > MaxRate:
		return fmt.Errorf("%w: rate %d outside 1…%d", ErrInvalidLimit, l.Rate, MaxRate)
	case l.Period < MinPeriod || l.Period > MaxPeriod:
		return fmt.Errorf("%w: period %v outside %v…%v", ErrInvalidLimit, l.Period, MinPeriod, MaxPeriod)
	case l.Period%time.Millisecond != 0:
		return fmt.Errorf("%w: period %v is not a whole number of milliseconds", ErrInvalidLimit, l.Period)
	}
	return nil
}

// String returns a short description of l, such as "3 per 10s (fixed_window)".
func (l Limit) String() string {
	return fmt.Sprintf("%d per %v (%v)", l.Rate, l.Period, l.Algorithm)
}

// ValidateRequest reports why a request for n units of key under lim cannot be decided, as an error
// matching [ErrInvalidLimit] or [ErrInvalidRequest], or nil. Every Store calls it before any I/O.
func ValidateRequest(key string, lim Limit, n int64) error {
	if err := lim.Validate(); err != nil {
		return err
	}
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidRequest)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: key of %d bytes exceeds %d", ErrInvalidRequest, len(key), MaxKeyLen)
	case n < 0 || n > lim.Rate:
		return fmt.Errorf("%w: cost %d outside 0…%d", ErrInvalidRequest, n, lim.Rate)
	}
	return nil
}

// A Decision is the outcome of one check. Being over the limit is a Decision with Allowed false,
// never an error.
type Decision struct {
	// Allowed reports whether the request was admitted. A peek (cost 0) is allowed unless the key
	// is already over its limit.
	Allowed bool
	// Limit is the Limit that decided.
	Limit Limit
	// Remaining is the number of units still available in the current window.
	Remaining int64
	// RetryAfter is 0 when Allowed; otherwise the time after which the same request could first be
	// admitted if no one else consumed meanwhile. It is a lower bound, never a reservation.
	RetryAfter time.Duration
	// ResetAfter is the time until the key returns to its full allowance.
	ResetAfter time.Duration
}

// RetryAfterSeconds returns RetryAfter as the whole seconds of an HTTP Retry-After field:
// max(1, ceil(RetryAfter in seconds)). It is meant for a rejected Decision; it never returns less than 1.
func (d Decision) RetryAfterSeconds() int64 {
	return CeilSeconds(d.RetryAfter)
}

// CeilSeconds returns d rounded up to whole seconds, and at least 1.
func CeilSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(1, s)
}

// A Store keeps limit state for many keys. Implementations are safe for concurrent use.
//
// Take consumes n units of key under lim if they are available and reports the Decision. A cost of 0
// is a peek: it reports the state and consumes nothing. A rejected Take writes nothing. An error
// means the Store could not decide; it matches ErrInvalidLimit or ErrInvalidRequest (nothing was
// attempted), or ErrUnavailable.
type Store interface {
	Take(ctx context.Context, key string, lim Limit, n int64) (Decision, error)
}

// A Limiter applies one Limit to many keys of one Store. It is safe for concurrent use.
// Make one with [NewLimiter]; the zero value is not usable.
type Limiter struct {
	store Store
	limit Limit
}

// NewLimiter returns a Limiter that applies lim to keys of store. An invalid lim is reported by
// every call, as an error matching ErrInvalidLimit.
func NewLimiter(store Store, lim Limit) *Limiter {
	return &Limiter{store: store, limit: lim}
}

// Limit returns the Limit that l applies.
func (l *Limiter) Limit() Limit { return l.limit }

// Allow is shorthand for AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (Decision, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN consumes n units of key if they are available and reports the Decision.
// AllowN(ctx, key, 0) is a peek that consumes nothing.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (Decision, error) {
	if err := ValidateRequest(key, l.limit, n); err != nil {
		return Decision{}, err
	}
	return l.store.Take(ctx, key, l.limit, n)
}
