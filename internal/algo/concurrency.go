package algo

import (
	"errors"
	"sort"
	"time"

	"github.com/admit-dev/admit/internal/bound"
)

// The concurrency limit (docs/concurrency.md): a key holds the leases in flight, each named by a token and
// expiring at a time in Unix microseconds. A lease is live while its expiry is after now. A request
// for n leases (0 = peek, or 1) is admitted when the live leases plus n fit the limit; an admission
// removes the leases that have expired and adds its own, expiring one lease TTL (the Limit's Period)
// after now. A rejection and a peek write nothing: not even the expired leases are removed.
//
// RetryAfter is the latest time capacity returns if no one releases: the time until enough live
// leases expire. A release returns it sooner; a Store cannot know when that will be.

// MaxLeases is the most leases a concurrency key may hold: bound.MaxConcurrency. Every lease a key
// holds was admitted under a valid Limit, with room for it among the live leases.
const MaxLeases = int(bound.MaxConcurrency)

// A Lease is one lease of a concurrency key, as a store keeps it.
type Lease struct {
	// Token names the lease: never 0.
	Token uint64
	// Expiry is when the lease ends unless released first, Unix µs.
	Expiry int64
}

// Reasons a stored concurrency state is corrupt, returned by [CheckConcurrency].
var (
	ErrTooManyLeases   = errors.New("key holds more leases than any concurrency limit admits")
	ErrLeaseTooLong    = errors.New("key holds a lease that expires more than bound.MaxPeriod from now")
	ErrLeasesUnordered = errors.New("leases are not ordered by expiry")
)

// CheckConcurrency reports why leases, ordered by expiry, cannot be the state of a concurrency key at
// now, in Unix microseconds, or nil: more than MaxLeases, or a lease that ends later than
// bound.MaxPeriod from now (no valid Limit made it: the clock went backwards, or someone else wrote
// it). A lease may end later than the lease TTL of the Limit deciding: the key's shape does not change
// with the TTL (its shape is "cc", docs/keys.md), so leases acquired under a longer one keep their expiry. It checks
// the first and last leases only, in constant time. A store must not decide, nor write, on state that
// fails this check. A Redis store also refuses a key that is not a sorted set, a first or last lease
// whose member is not a decimal token or whose score is not an integer, and a key without expiry.
func CheckConcurrency(leases []Lease, now int64) error {
	switch {
	case len(leases) > MaxLeases:
		return ErrTooManyLeases
	case len(leases) == 0:
		return nil
	case leases[len(leases)-1].Expiry > now+bound.MaxPeriod.Microseconds():
		return ErrLeaseTooLong
	case leases[0].Expiry > leases[len(leases)-1].Expiry:
		return ErrLeasesUnordered
	}
	return nil
}

// ConcurrencyResult is the outcome of one concurrency transition.
type ConcurrencyResult struct {
	// Write is the one write the store must make: WriteNone for a rejection or a peek; WriteCreate
	// makes a key of one lease; WriteIncrement removes the Trim first leases, which have expired,
	// and adds one. Either way the lease expires at Expiry, and the key no sooner.
	Write Write
	// Allowed reports whether the request is admitted.
	Allowed bool
	// Remaining is the number of leases that could still be acquired after this request, never
	// negative.
	Remaining int64
	// RetryAfter is 0 when allowed, else the time until enough live leases expire for the request,
	// if none is released and nothing else is admitted meanwhile, rounded up to a whole millisecond,
	// and at most the TTL (see Concurrency).
	RetryAfter time.Duration
	// ResetAfter is the time until the last live lease expires, rounded up to a whole millisecond, and
	// at most the TTL: the TTL for an admission; 0 for a key with no live lease.
	ResetAfter time.Duration
	// Trim is the number of first leases that have expired, which WriteIncrement removes; 0 for any
	// other Write.
	Trim int
	// Expiry is when the lease an admission adds ends, Unix µs: now + ttl; 0 for WriteNone.
	Expiry int64
}

// Concurrency decides a request for n leases (0 = peek, or 1) under limit leases in flight, with
// lease TTL ttl, at now, in Unix microseconds. leases holds the key's leases ordered by expiry,
// earliest first, nil when the key does not exist; it must have passed [CheckConcurrency].
//
// The durations it reports are at most ttl, the longest a Decision under the Limit reports
// (admit.Limit.MaxWait): leases acquired under a longer TTL, before the Limit's was shortened, are
// reported as ending within ttl, though they keep their expiry. That is the only case where
// RetryAfter is earlier than the time the request fits; it ends one old TTL after the change.
func Concurrency(leases []Lease, now, limit int64, ttl time.Duration, n int64) ConcurrencyResult {
	first := sort.Search(len(leases), func(i int) bool { return leases[i].Expiry > now })
	live := int64(len(leases) - first)
	if live+n <= limit {
		res := ConcurrencyResult{Allowed: true, Remaining: limit - live - n}
		switch {
		case n > 0:
			res.ResetAfter, res.Expiry = ttl, now+ttl.Microseconds()
			res.Write, res.Trim = WriteIncrement, first
			if len(leases) == 0 {
				res.Write = WriteCreate
			}
		case live > 0:
			res.ResetAfter = ceilMillis(min(leases[len(leases)-1].Expiry-now, ttl.Microseconds()))
		}
		return res
	}
	// The k-th earliest live lease to expire makes room for the request.
	k := live + n - limit
	return ConcurrencyResult{
		Remaining:  max(0, limit-live),
		RetryAfter: ceilMillis(min(leases[first+int(k)-1].Expiry-now, ttl.Microseconds())),
		ResetAfter: ceilMillis(min(leases[len(leases)-1].Expiry-now, ttl.Microseconds())),
	}
}

// AddLease returns leases, ordered by expiry, with its first trim leases removed and l added in
// order, reusing the array of leases in place when it has room.
func AddLease(leases []Lease, trim int, l Lease) []Lease {
	if trim > 0 {
		leases = leases[:copy(leases, leases[trim:])]
	}
	i := len(leases) // a lease of the same TTL as the others ends last
	if i > 0 && leases[i-1].Expiry > l.Expiry {
		i = sort.Search(len(leases), func(i int) bool { return leases[i].Expiry > l.Expiry })
	}
	leases = append(leases, Lease{})
	copy(leases[i+1:], leases[i:])
	leases[i] = l
	return leases
}

// RemoveLease returns leases without the lease named token, keeping their order and array, and
// reports whether it held one.
func RemoveLease(leases []Lease, token uint64) ([]Lease, bool) {
	for i := range leases {
		if leases[i].Token == token {
			copy(leases[i:], leases[i+1:])
			leases[len(leases)-1] = Lease{}
			return leases[:len(leases)-1], true
		}
	}
	return leases, false
}
