package algo

import (
	"errors"
	"time"

	"github.com/admit-dev/admit"
)

// The generic cell rate algorithm (docs/gcra.md), a token bucket kept as one time: the theoretical
// arrival time (TAT), when the bucket is full again. Times are integer microseconds on the store's
// clock (Unix time for Redis, whose TIME has that resolution). With T the emission interval
// (admit.Limit.EmissionInterval) and τ = capacity × T the tolerance, a request for n units at now
// fits when max(TAT, now) + n·T − now ≤ τ; an admission moves the TAT to max(TAT, now) + n·T.

// MaxTAT is the largest theoretical arrival time a GCRA key may hold, in microseconds: 2^53 − 1, the
// largest integer below which Redis's Lua doubles hold every integer exactly.
const MaxTAT = 1<<53 - 1

// GCRAState is the stored state of one GCRA key.
type GCRAState struct {
	// TAT is the theoretical arrival time, in microseconds on the store's clock: from then on the
	// bucket is full, and the key is as good as missing.
	TAT int64
	// TTL is the key's time to live; negative when it has none.
	TTL time.Duration
}

// Reasons a stored GCRA state is corrupt, returned by [CheckGCRA].
var (
	ErrTATOutOfRange    = errors.New("theoretical arrival time is not an integer in 1...2^53-1")
	ErrTATNoExpiry      = errors.New("theoretical arrival time has no expiry")
	ErrTATExpiryTooLong = errors.New("theoretical arrival time expires later than a full bucket empties")
	ErrTATTooFar        = errors.New("theoretical arrival time is further ahead than a full bucket")
)

// CheckGCRA reports why st, read at now (µs), cannot be the state of a key under the GCRA Limit lim,
// or nil. A store must not decide, nor write, on state that fails this check. A TAT at or before now
// is a bucket that has emptied: valid, and decided as a missing key.
func CheckGCRA(st GCRAState, now int64, lim admit.Limit) error {
	return NewGCRAParams(lim).Check(st, now)
}

// Check is [CheckGCRA] under the Limit whose figures p are.
func (p GCRAParams) Check(st GCRAState, now int64) error {
	tolerance := p.Tolerance
	switch {
	case st.TAT < 1 || st.TAT > MaxTAT:
		return ErrTATOutOfRange
	case st.TTL < 0:
		return ErrTATNoExpiry
	case st.TTL > GCRAExpiry(tolerance):
		return ErrTATExpiryTooLong
	case st.TAT-now > tolerance:
		return ErrTATTooFar
	}
	return nil
}

// GCRAExpiry returns the time to live of a key whose TAT is backlog microseconds after now: the
// backlog rounded up to the millisecond, the resolution of a Redis expiry, and one millisecond more,
// because Redis counts the expiry from the millisecond its command started, which may be up to one
// before the script read its clock. The key so outlives its TAT, never the other way round.
func GCRAExpiry(backlog int64) time.Duration {
	return ceilMillisecond(backlog) + time.Millisecond
}

// GCRAResult is the outcome of one GCRA transition.
type GCRAResult struct {
	// Write reports whether the store must write TAT: an admission of n ≥ 1. A rejection or a peek
	// writes nothing.
	Write bool
	// Allowed reports whether the request is admitted.
	Allowed bool
	// Remaining is the number of units that fit at once after this request: floor((τ − backlog)/T),
	// where backlog is what the TAT is ahead of now once the request is decided. Never negative.
	Remaining int64
	// RetryAfter is 0 when allowed, else the time until the same request fits, rounded up to the
	// millisecond.
	RetryAfter time.Duration
	// ResetAfter is the time until the bucket is full again (the TAT, once the request is decided,
	// minus now), rounded up to the millisecond.
	ResetAfter time.Duration
	// TAT is the theoretical arrival time to write when Write is true, and 0 otherwise.
	TAT int64
}

// GCRAParams are the figures of a GCRA Limit that its decisions use, computed from the Limit by
// [NewGCRAParams]: a store that decides many requests under one Limit computes them once (each takes
// a division) and passes them to [GCRAParams.Decide] and [GCRAParams.Check], with the same results
// as [GCRA] and [CheckGCRA].
type GCRAParams struct {
	// Interval is T, the emission interval in microseconds (admit.Limit.EmissionInterval); 1 for an
	// invalid Limit, so that no decision divides by 0.
	Interval int64
	// Tolerance is τ = capacity × T, the microseconds a full bucket takes to empty.
	Tolerance int64
}

// NewGCRAParams returns the figures of the GCRA Limit lim.
func NewGCRAParams(lim admit.Limit) GCRAParams {
	t := lim.EmissionInterval().Microseconds()
	return GCRAParams{Interval: max(t, 1), Tolerance: lim.Capacity() * t}
}

// GCRA decides a request for n units (0 = peek) at now under the GCRA Limit lim, on a key whose
// theoretical arrival time is tat: 0, or any time at or before now, for a missing key or an emptied
// bucket. All times are microseconds on one clock. A live state must have passed [CheckGCRA]; one
// further ahead than a full bucket (which CheckGCRA refuses) is decided as over its limit.
func GCRA(tat, now int64, lim admit.Limit, n int64) GCRAResult {
	return NewGCRAParams(lim).Decide(tat, now, n)
}

// Decide is [GCRA] under the Limit whose figures p are.
func (p GCRAParams) Decide(tat, now, n int64) GCRAResult {
	interval := p.Interval
	backlog := max(tat-now, 0)
	room := p.Tolerance - backlog
	need := n * interval // n ≤ capacity, so at most the tolerance: no overflow
	if need > room {
		return GCRAResult{Remaining: max(room/interval, 0), RetryAfter: ceilMillisecond(need - room), ResetAfter: ceilMillisecond(backlog)}
	}
	r := GCRAResult{Allowed: true, Remaining: (room - need) / interval, ResetAfter: ceilMillisecond(backlog + need)}
	if n > 0 {
		r.Write, r.TAT = true, now+backlog+need
	}
	return r
}

// ceilMillisecond returns us microseconds rounded up to a whole number of milliseconds.
func ceilMillisecond(us int64) time.Duration {
	return time.Duration((us+999)/1000) * time.Millisecond
}

// Clamp is [GCRAParams.Check] for a Request with an override key, whose numbers may have changed
// since the TAT was written (an Override set, changed or deleted): it returns the TAT to decide
// on. A TAT further ahead than a full bucket (now + τ), or whose TTL exceeds GCRAExpiry(τ), is not
// corrupt but clamped to now + τ, a bucket empty under the numbers now in force; the stored state
// is left as it is (a rejection still writes nothing, and an admission writes from the clamped
// TAT). A TAT outside 1 … MaxTAT or without an expiry stays corrupt: no numbers write it.
func (p GCRAParams) Clamp(st GCRAState, now int64) (int64, error) {
	switch {
	case st.TAT < 1 || st.TAT > MaxTAT:
		return 0, ErrTATOutOfRange
	case st.TTL < 0:
		return 0, ErrTATNoExpiry
	case st.TTL > GCRAExpiry(p.Tolerance) || st.TAT-now > p.Tolerance:
		return now + p.Tolerance, nil
	}
	return st.TAT, nil
}
