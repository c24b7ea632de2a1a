// Package admit decides whether a request may proceed under rate limits shared by many processes.
//
// A [Limit] is one named policy: an algorithm and its numbers. A [KeyBuilder] turns a policy and a
// [Subject] the server verified into a key, with an HMAC under a server secret, so that no client
// chooses its own bucket. A [Store] keeps the state of many keys and decides a [Request] atomically, or
// several at once, all-or-nothing, with idempotent retries; a [Limiter] binds Limits, a KeyBuilder and
// a Store into Allow and AllowN. Being over the limit is a [Decision] with Allowed false, never an
// error: an error always means the Store could not decide, and matches [ErrUnavailable] (or
// [ErrCorruptState], a kind of it) or, for a caller's mistake, [ErrInvalidLimit] or [ErrInvalidRequest].
//
// The in-process store lives in package memstore, the Redis store in package redisstore; package
// limittest holds the conformance suite both pass.
package admit

import (
	"fmt"
	"time"

	"github.com/admit-dev/admit/internal/bound"
)

// Algorithm names how a Limit counts.
// The zero value is not a valid Algorithm.
type Algorithm uint8

// The algorithms a Limit may name. An Algorithm that [Limit.Validate] does not accept yet is named
// here so that configuration can refer to it; see the package documentation of each.
const (
	// FixedWindow admits at most Rate units per window of Period. The window starts at the first
	// admitted request for a key (the origin design), or, with Limit.Aligned, at a multiple of
	// Period in Unix time, as envoyproxy/ratelimit counts.
	FixedWindow Algorithm = iota + 1
	// SlidingWindow admits when an estimate of the units admitted in the last Period — the previous
	// fixed window weighted by how much of it still overlaps, plus the current one — leaves room.
	SlidingWindow
	// SlidingLog admits at most Rate units in any Period, exactly, by keeping every admission's time.
	SlidingLog
	// GCRA is the generic cell rate algorithm: a sustained Rate per Period with bursts of up to Burst
	// units (a token bucket). "token_bucket" in configuration names it too.
	GCRA
	// Concurrency admits at most Rate requests in flight: an admitted request holds a lease until it
	// is released, or until Period, the lease TTL, has passed since it was acquired (so the capacity of
	// a holder that crashed returns). Its Requests cost 0 (a peek) or 1 (one lease); any other cost,
	// above its Rate or not, is an invalid request.
	Concurrency
)

// String returns the algorithm's name as used in configuration, such as "fixed_window".
func (a Algorithm) String() string {
	switch a {
	case FixedWindow:
		return "fixed_window"
	case SlidingWindow:
		return "sliding_window"
	case SlidingLog:
		return "sliding_log"
	case GCRA:
		return "gcra"
	case Concurrency:
		return "concurrency"
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// ParseAlgorithm returns the Algorithm named s, as written by [Algorithm.String]; "token_bucket" is
// another name of GCRA.
func ParseAlgorithm(s string) (Algorithm, error) {
	for a := FixedWindow; a <= Concurrency; a++ {
		if s == a.String() {
			return a, nil
		}
	}
	if s == "token_bucket" {
		return GCRA, nil
	}
	return 0, fmt.Errorf("%w: unknown algorithm %q", ErrInvalidLimit, s)
}

// A Limit is one policy's numbers, and its name. Limits are values, compared with ==; one Store
// serves every Limit. The zero value is invalid.
type Limit struct {
	// Name is the policy's name: in keys, headers and metrics. It is empty, or 1 to 64
	// characters of a-z, 0-9, '_' and '-'. A KeyBuilder needs it; a Store does not.
	Name string
	// Tier is the tier of the policy whose numbers these are, "" for the policy's own: a name as
	// Name is. It is not in keys (docs/keys.md); a [Limiter] decides a [Subject] of a tier under it.
	Tier string
	// Algorithm says how to count.
	Algorithm Algorithm
	// Rate is the number of units admitted per Period, 1 to 10^15; for GCRA, at most one per
	// microsecond of Period (see [Limit.EmissionInterval]); for SlidingLog, at most 10,000 (its key
	// keeps every admission); for Concurrency, the most leases in flight, at most 100,000.
	Rate int64
	// Period is the window, a whole number of milliseconds between 1 ms and 366 days; for
	// Concurrency, the lease TTL: how long a lease that is never released holds its unit.
	Period time.Duration
	// Burst is GCRA's bucket size, the most units admitted at once: 1 to 10^15, or 0 for Rate, and
	// at most 2^52 µs / EmissionInterval (a bucket that empties within about 142 years). It must be
	// 0 for any other algorithm.
	Burst int64
	// Aligned makes a FixedWindow's windows start at multiples of Period in Unix time (Redis's
	// clock), as envoyproxy/ratelimit counts, instead of at a key's first admitted request. It must
	// be false for any other algorithm.
	Aligned bool
	// Shadow puts the policy in shadow mode (docs/http.md, "Shadow mode"): it is decided and counted as usual, but its
	// rejection rejects nothing. In a TakeAll, a shadow Request that does not fit writes nothing and
	// its Decision reports "would have limited" (Allowed false); one that fits is consumed when the
	// others are admitted. Keys and counts do not depend on it, so a policy moves from shadow to
	// enforced keeping its counters.
	Shadow bool
	// Replicas, above 0, makes the policy's durability replicated (docs/running-redis.md,
	// "Durability"): a Store with replicas reports a decision that consumed units under it as
	// admitted only once that many replicas confirmed the write (Redis's WAIT, after the script, on
	// the connection that ran it). When they do not confirm within ReplicaTimeout the decision is
	// undecided: an error matching [ErrUnavailable], the units stay consumed, nothing is admitted.
	// Rejections and peeks wait for nothing. 0, the default, is async durability: a failover may
	// forget the last admissions. At most 16. A Store without replicas refuses it: memstore with
	// an error matching [ErrInvalidLimit], as its state lives in the process; admit serve refuses
	// such a policy on it at start.
	Replicas int
	// ReplicaTimeout bounds the wait for Replicas: 0 for the Store's command timeout, else a whole
	// number of milliseconds up to a minute. It must be 0 when Replicas is.
	ReplicaTimeout time.Duration
}

// Validate reports why l cannot be used, as an error matching [ErrInvalidLimit], or nil.
func (l Limit) Validate() error {
	if err := l.validateAlgorithm(); err != nil {
		return err
	}
	switch {
	case l.Rate < 1 || l.Rate > bound.MaxRate:
		return fmt.Errorf("%w: rate %d outside 1-%d", ErrInvalidLimit, l.Rate, bound.MaxRate)
	case l.Period < bound.MinPeriod || l.Period > bound.MaxPeriod:
		return fmt.Errorf("%w: period %v outside %v-%v", ErrInvalidLimit, l.Period, bound.MinPeriod, bound.MaxPeriod)
	case l.Period%time.Millisecond != 0:
		return fmt.Errorf("%w: period %v is not a whole number of milliseconds", ErrInvalidLimit, l.Period)
	case l.Name != "" && !validName(l.Name):
		return fmt.Errorf("%w: policy name %q: want 1-%d characters of a-z, 0-9, '_' and '-'", ErrInvalidLimit, l.Name, bound.MaxNameLen)
	case l.Tier != "" && !validName(l.Tier):
		return fmt.Errorf("%w: tier name %q: want 1-%d characters of a-z, 0-9, '_' and '-'", ErrInvalidLimit, l.Tier, bound.MaxNameLen)
	case l.Burst != 0 && l.Algorithm != GCRA:
		return fmt.Errorf("%w: burst %d: only gcra has a burst", ErrInvalidLimit, l.Burst)
	case l.Aligned && l.Algorithm != FixedWindow:
		return fmt.Errorf("%w: only fixed_window windows can be aligned", ErrInvalidLimit)
	case l.Replicas < 0 || l.Replicas > bound.MaxReplicas:
		return fmt.Errorf("%w: replicas %d outside 0-%d", ErrInvalidLimit, l.Replicas, bound.MaxReplicas)
	case l.ReplicaTimeout != 0 && l.Replicas == 0:
		return fmt.Errorf("%w: replica timeout %v without replicas to wait for", ErrInvalidLimit, l.ReplicaTimeout)
	case l.ReplicaTimeout < 0 || l.ReplicaTimeout > bound.MaxReplicaTimeout || l.ReplicaTimeout%time.Millisecond != 0:
		return fmt.Errorf("%w: replica timeout %v: want 0 or a whole number of milliseconds up to %v", ErrInvalidLimit, l.ReplicaTimeout, bound.MaxReplicaTimeout)
	}
	return nil
}

// validateAlgorithm reports why l's algorithm cannot be used, with the numbers of l that only it
// constrains, or nil.
func (l Limit) validateAlgorithm() error {
	switch l.Algorithm {
	case FixedWindow:
		return nil
	case SlidingWindow:
		return nil
	case SlidingLog:
		if l.Rate > bound.MaxSlidingLogRate {
			return fmt.Errorf("%w: rate %d: a sliding_log keeps every admission, so its rate is at most %d", ErrInvalidLimit, l.Rate, bound.MaxSlidingLogRate)
		}
		return nil
	case GCRA:
		return l.validateGCRA()
	case Concurrency:
		if l.Rate > bound.MaxConcurrency {
			return fmt.Errorf("%w: rate %d: a concurrency key keeps every lease in flight, so its rate is at most %d", ErrInvalidLimit, l.Rate, bound.MaxConcurrency)
		}
		return nil
	}
	return fmt.Errorf("%w: unknown algorithm %v", ErrInvalidLimit, l.Algorithm)
}

// MaxWait returns the longest RetryAfter and ResetAfter a Decision under l can report: the time a
// key takes to return to its full allowance. For a fixed window and a sliding log it is Period; for
// a sliding window, 2 × Period (the rest of the current window, then the next one, in which the
// current window's count still weighs); for GCRA, the time a full bucket takes to empty,
// Capacity × EmissionInterval, rounded up to the millisecond; for Concurrency, Period, the lease TTL.
func (l Limit) MaxWait() time.Duration {
	switch l.Algorithm {
	case FixedWindow:
		return l.Period
	case SlidingWindow:
		return 2 * l.Period
	case SlidingLog:
		return l.Period
	case GCRA:
		return ceilMillisecond(l.gcraTolerance())
	}
	return l.Period
}

// validName reports whether s is 1 to bound.MaxNameLen characters of a-z, 0-9, '_' and '-'.
func validName(s string) bool {
	if s == "" || len(s) > bound.MaxNameLen {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// String returns a short description of l, such as "demo: 3 per 10s (fixed_window)",
// "demo: 3 per 10s (fixed_window, aligned)" for windows aligned to Unix time, "api: 10 per 1s,
// burst 50 (gcra)", "day: 1000 per 24h0m0s (fixed_window) [shadow]" in shadow mode, or
// "api tier pro: 1000 per 1m0s (fixed_window)" for a tier's.
func (l Limit) String() string {
	s := fmt.Sprintf("%d per %v (%v)", l.Rate, l.Period, l.Algorithm)
	switch {
	case l.Aligned:
		s = fmt.Sprintf("%d per %v (%v, aligned)", l.Rate, l.Period, l.Algorithm)
	case l.Burst != 0:
		s = fmt.Sprintf("%d per %v, burst %d (%v)", l.Rate, l.Period, l.Burst, l.Algorithm)
	}
	if l.Shadow {
		s += " [shadow]"
	}
	switch {
	case l.Tier != "" && l.Name != "":
		s = l.Name + " tier " + l.Tier + ": " + s
	case l.Tier != "":
		s = "tier " + l.Tier + ": " + s
	case l.Name != "":
		s = l.Name + ": " + s
	}
	return s
}
