package algo

import (
	"errors"
	"time"
)

// The aligned fixed window (admit.Limit.Aligned): a fixed window whose windows are the intervals
// [k·window, (k+1)·window) of Unix time, as envoyproxy/ratelimit counts, instead of starting at a
// key's first admitted request. Its state is a FixedWindowState whose TTL runs to the end of the
// window it was written in; a store reads the time, in Unix microseconds, from the same clock its
// keys expire by (Redis's TIME).

// ErrExpiryAfterWindowEnd is why a stored aligned-window state is corrupt when its counter expires
// after the end of the aligned window that holds now: no aligned window wrote it (another Limit on
// the same raw key, or a clock that went backwards).
var ErrExpiryAfterWindowEnd = errors.New("counter expires after its aligned window ends")

// AlignedWindowLeft returns the time from now, in Unix microseconds, to the end of the aligned
// window of length window that holds now: the next multiple of window in Unix time. It is more than
// 0 and at most window. window is taken in whole microseconds; an invalid one, shorter than a
// microsecond, counts as one (it never panics).
//
// The Redis store computes it in whole milliseconds, from the millisecond that holds now: its figure
// is this one rounded up to a millisecond, and both name the same window end.
func AlignedWindowLeft(now int64, window time.Duration) time.Duration {
	w := max(window.Microseconds(), 1)
	into := now % w
	if into < 0 { // before 1970: the window still starts at a multiple of w below now
		into += w
	}
	return time.Duration(w-into) * time.Microsecond
}

// CheckAlignedWindow reports why st cannot be the state of an aligned window of length window at
// now (Unix microseconds), or nil: the counter must be in 1 … MaxCount and expire, no later than the
// end of the aligned window that holds now. A store must not decide, nor write, on state that fails
// this check.
func CheckAlignedWindow(st FixedWindowState, window time.Duration, now int64) error {
	switch {
	case st.Count < 1 || st.Count > MaxCount:
		return ErrCountOutOfRange
	case st.TTL <= 0:
		return ErrNoExpiry
	case st.TTL > AlignedWindowLeft(now, window):
		return ErrExpiryAfterWindowEnd
	}
	return nil
}

// AlignedWindow decides a request for n units (0 = peek) under limit units per aligned window of
// length window, at now (Unix microseconds). st is the key's state, nil when the key does not exist
// or its window has ended; it must have passed [CheckAlignedWindow]. It decides as [FixedWindow],
// but a missing key is created to expire at the end of the aligned window that holds now, so
// ResetAfter is the time until then: every key's window ends at the same instants.
func AlignedWindow(st *FixedWindowState, limit int64, window time.Duration, now int64, n int64) FixedWindowResult {
	if st == nil && n > 0 {
		return FixedWindowResult{Write: WriteCreate, Allowed: true, Remaining: limit - n, ResetAfter: AlignedWindowLeft(now, window)}
	}
	return FixedWindow(st, limit, window, n)
}
