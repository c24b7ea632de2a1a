package algo

import (
	"errors"
	"sort"
	"time"

	"github.com/admit-dev/admit/internal/bound"
)

// The sliding log (docs/sliding-log.md): the time of every admitted unit, in Unix microseconds. A request is
// admitted when the units in (now − window, now] plus its own fit the limit; its n units are then
// logged at now. Entries that have left the window are trimmed only by an admission's write: a
// rejection writes nothing.

// MaxLogLen is the most entries a sliding-log key may hold: bound.MaxSlidingLogRate. Every entry in
// a log was in the window of an admission under a valid Limit.
const MaxLogLen = int(bound.MaxSlidingLogRate)

// Reasons a stored sliding log is corrupt, returned by [CheckSlidingLog].
var (
	ErrLogTooLong       = errors.New("log holds more entries than any sliding_log rate admits")
	ErrEntryInTheFuture = errors.New("log holds an entry after now")
)

// CheckSlidingLog reports why log, oldest entry first, cannot be the state of a sliding log at now,
// in Unix microseconds, or nil. A store must not decide, nor write, on state that fails this check.
// A Redis store also refuses a key that is not a sorted set, a newest entry whose member is not
// "<its score>:<sequence>", or a key without expiry.
func CheckSlidingLog(log []int64, now int64) error {
	switch {
	case len(log) > MaxLogLen:
		return ErrLogTooLong
	case len(log) > 0 && log[len(log)-1] > now:
		return ErrEntryInTheFuture
	}
	return nil
}

// SlidingLogResult is the outcome of one sliding-log transition.
type SlidingLogResult struct {
	// Write is the one write the store must make: WriteNone for a rejection or a peek; WriteCreate
	// makes a log of n entries at now; WriteIncrement removes the Trim oldest entries, which have
	// left the window, and appends n entries at now. Either way the key expires one window after
	// now.
	Write Write
	// Allowed reports whether the request is admitted.
	Allowed bool
	// Remaining is the allowance left after this request, never negative.
	Remaining int64
	// RetryAfter is 0 when allowed, else the time until enough entries have left the window for
	// the request, if nothing else is admitted meanwhile, rounded up to a whole millisecond.
	RetryAfter time.Duration
	// ResetAfter is the time until the newest entry in the window leaves it, rounded up to a whole
	// millisecond; 0 for a log with none in the window.
	ResetAfter time.Duration
	// Trim is the number of oldest entries that have left the window, which WriteIncrement removes;
	// 0 for any other Write.
	Trim int
}

// SlidingLog decides a request for n units (0 = peek) under limit units per window at now, in Unix
// microseconds. log holds the times of the key's admitted units, oldest first, nil when the key does
// not exist; it must have passed [CheckSlidingLog].
//
// An entry at time s is in the window while s > now − window: it leaves at s + window.
func SlidingLog(log []int64, now, limit int64, window time.Duration, n int64) SlidingLogResult {
	w := window.Microseconds()
	first := sort.Search(len(log), func(i int) bool { return log[i] > now-w })
	count := int64(len(log) - first)
	if count+n <= limit {
		res := SlidingLogResult{Allowed: true, Remaining: limit - count - n}
		switch {
		case n > 0:
			res.ResetAfter = window
			res.Write, res.Trim = WriteIncrement, first
			if len(log) == 0 {
				res.Write = WriteCreate
			}
		case count > 0:
			res.ResetAfter = ceilMillis(log[len(log)-1] + w - now)
		}
		return res
	}
	// The k-th oldest entry in the window leaves at its time + w; then count + n − k fits.
	k := count + n - limit
	return SlidingLogResult{
		Remaining:  max(0, limit-count),
		RetryAfter: ceilMillis(log[first+int(k)-1] + w - now),
		ResetAfter: ceilMillis(log[len(log)-1] + w - now),
	}
}
