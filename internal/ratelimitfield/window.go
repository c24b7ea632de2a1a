package ratelimitfield

import (
	"math/bits"
	"time"

	"github.com/admit-dev/admit"
)

// A Limit's quota, [admit.Limit.Capacity], and quota window are the one description of a policy
// that its clients see: the q and w of the RateLimit-Policy header field. For a window they are
// Rate per Period. For GCRA they are the bucket, Capacity, and the time an empty bucket takes to
// fill again at the nominal rate, Capacity x Period / Rate: with a limit of 10 per second and a
// burst of 20, a quota of 20 in 2 s; with 3 per 10 s and a burst of 3, 3 in 10 s.

// Window returns the time over which a client is granted l.Capacity() units: Period for the fixed
// window, the sliding window and the sliding log; for GCRA, the time an empty bucket takes to fill
// again at the nominal rate, Capacity x Period / Rate, computed exactly and rounded up to the
// nanosecond (not Capacity x EmissionInterval, whose rounding to the microsecond would make 3 per
// 10 s with a burst of 3 a window of 10.000002 s, 11 s once rounded up to whole seconds). A
// Concurrency Limit has no window: Window returns 0, as it does for a GCRA Limit without a
// positive Rate and Period.
func Window(l admit.Limit) time.Duration {
	switch l.Algorithm {
	case admit.Concurrency:
		return 0
	case admit.GCRA:
		if l.Rate < 1 || l.Period <= 0 || l.Capacity() < 1 {
			return 0
		}
		hi, lo := bits.Mul64(uint64(l.Capacity()), uint64(l.Period))
		if hi >= uint64(l.Rate) {
			return time.Duration(1<<63 - 1) // beyond any valid Limit's
		}
		q, rem := bits.Div64(hi, lo, uint64(l.Rate))
		if rem > 0 {
			q++
		}
		return time.Duration(min(q, 1<<63-1))
	}
	return l.Period
}
