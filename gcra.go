package admit

import (
	"fmt"
	"strings"
	"time"

	"github.com/admit-dev/admit/internal/bound"
)

// GCRA keeps, per key, one time: the theoretical arrival time (TAT), in microseconds, the resolution of
// Redis's clock (TIME). Each admitted unit moves the TAT one emission interval later; a request fits
// while the TAT stays within the tolerance, Capacity emission intervals, of now. The bounds of
// validateGCRA (bound.MaxTolerance, bound.MaxIntervalRounding and minEmissionInterval) keep that
// arithmetic exact in integers, in Go and in the doubles of Redis's Lua (docs/gcra.md).

// minEmissionInterval is the shortest emission interval, Period/Rate, of a GCRA Limit: one
// microsecond, the resolution of the time GCRA keeps. A higher rate needs a longer Period.
const minEmissionInterval = time.Microsecond

// EmissionInterval returns the time a GCRA bucket takes to regain one unit: Period/Rate, rounded up to
// the microsecond, the resolution of the time GCRA keeps. It is exact when Period in microseconds is a
// multiple of Rate; otherwise the rate admitted is Period/EmissionInterval, a little below Rate and
// never above it ([Limit.Validate] refuses a Limit that rounding would slow by 1% or more). It returns
// 0 for a Limit without a positive Rate and Period.
func (l Limit) EmissionInterval() time.Duration {
	p := l.Period.Microseconds()
	if l.Rate < 1 || p < 1 {
		return 0
	}
	t := p / l.Rate
	if t*l.Rate < p {
		t++
	}
	return time.Duration(t) * time.Microsecond
}

// Capacity returns the most units a key holds under l: the Burst of a GCRA Limit, or its Rate when
// Burst is 0; the Rate of any other. A Request costs at most Capacity, and a Decision reports at most
// Capacity Remaining.
func (l Limit) Capacity() int64 {
	if l.Algorithm == GCRA && l.Burst != 0 {
		return l.Burst
	}
	return l.Rate
}

// validateGCRA reports why l cannot be a GCRA Limit, beyond the bounds every Limit has (which
// Validate reports), or nil.
func (l Limit) validateGCRA() error {
	if l.Burst < 0 || l.Burst > bound.MaxRate {
		return fmt.Errorf("%w: burst %d outside 1-%d (or 0 for the rate)", ErrInvalidLimit, l.Burst, bound.MaxRate)
	}
	p := l.Period.Microseconds()
	if l.Rate < 1 || l.Rate > bound.MaxRate || l.Period < bound.MinPeriod || l.Period > bound.MaxPeriod {
		return nil // Validate reports it
	}
	if p < l.Rate {
		return fmt.Errorf("%w: gcra: %d per %v is more than one unit per microsecond: the emission interval, period/rate, must be at least %s",
			ErrInvalidLimit, l.Rate, l.Period, plainDuration(minEmissionInterval))
	}
	t := l.EmissionInterval().Microseconds()
	if slower := t*l.Rate - p; slower*bound.MaxIntervalRounding >= p { // t*Rate < p + Rate ≤ 2p: no overflow
		return fmt.Errorf("%w: gcra: the emission interval %v/%d rounds up to %s, a rate %.2f%% lower; at most 1%% is allowed: use a rate that divides %d us, or a lower rate",
			ErrInvalidLimit, plainDuration(l.Period), l.Rate, plainDuration(l.EmissionInterval()), 100*float64(slower)/float64(t*l.Rate), p)
	}
	if c, most := l.Capacity(), bound.MaxTolerance.Microseconds()/t; c > most {
		return fmt.Errorf("%w: gcra: burst %d x emission interval %s exceeds %v (2^52 us); at most %d units at this rate",
			ErrInvalidLimit, c, plainDuration(l.EmissionInterval()), bound.MaxTolerance, most)
	}
	return nil
}

// plainDuration returns d as time.Duration.String does, with "us" for the microsecond sign: error
// strings are plain ASCII.
func plainDuration(d time.Duration) string {
	return strings.Replace(d.String(), "\u00b5s", "us", 1)
}

// gcraTolerance returns how long a full bucket of a valid GCRA Limit l takes to empty: Capacity ×
// EmissionInterval.
func (l Limit) gcraTolerance() time.Duration {
	return time.Duration(l.Capacity()) * l.EmissionInterval()
}

// ceilMillisecond returns d rounded up to a whole number of milliseconds, as Decisions report
// durations.
func ceilMillisecond(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1) / time.Millisecond * time.Millisecond
}
