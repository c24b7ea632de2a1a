package algo

import (
	"errors"
	"math/bits"
	"time"
)

// The sliding window (docs/sliding-window.md): the counts of two consecutive windows aligned to Unix time, the
// previous one weighted by how much of it a window-long interval ending now still covers. Time is in
// Unix microseconds, as Redis's TIME gives it, and every quantity is an integer: the weighted count
// is rounded up, ⌈prev × (window − elapsed) / window⌉, so that the estimate never rounds an admission
// away, and the products behind it are computed exactly in 128 bits (the Lua module, with doubles,
// does the same exactly; see scripts/sliding_window.lua).

// SlidingWindowState is the stored state of one sliding-window key.
//
// The state means the same at any later time: a store passes it as it is, and SlidingWindow reads
// it at now — Curr as the current window's count while Start is the current window's start, as the
// previous window's once the next window has begun, and as nothing two windows after Start, when
// the state is equivalent to a missing key (and the key expires).
type SlidingWindowState struct {
	// Start is the start of the window that Curr counts, in Unix microseconds: a multiple of the
	// window, not after now.
	Start int64
	// Prev is the number of units admitted in the window before Start's, 0 … MaxCount.
	Prev int64
	// Curr is the number of units admitted in the window from Start, 1 … MaxCount.
	Curr int64
}

// Reasons a stored sliding-window state is corrupt, returned by [CheckSlidingWindow] (besides
// ErrCountOutOfRange for Curr).
var (
	ErrPrevOutOfRange   = errors.New("previous window's count is not an integer in 0...10^15")
	ErrStartMisaligned  = errors.New("window start is not a multiple of the window")
	ErrStartInTheFuture = errors.New("window start is in the future")
)

// CheckSlidingWindow reports why st cannot be the state of a sliding window of length window at
// now, Unix microseconds, or nil. A store must not decide, nor write, on state that fails this check.
// A Redis store also refuses a key that is not a hash of exactly the fields start, prev and curr, or
// has no expiry.
func CheckSlidingWindow(st SlidingWindowState, window time.Duration, now int64) error {
	w := window.Microseconds()
	switch {
	case st.Curr < 1 || st.Curr > MaxCount:
		return ErrCountOutOfRange
	case st.Prev < 0 || st.Prev > MaxCount:
		return ErrPrevOutOfRange
	case st.Start < 0 || st.Start%w != 0:
		return ErrStartMisaligned
	case st.Start > now:
		return ErrStartInTheFuture
	}
	return nil
}

// SlidingWindowResult is the outcome of one sliding-window transition.
type SlidingWindowResult struct {
	// Write is the one write the store must make: WriteNone for a rejection or a peek;
	// WriteIncrement adds n to the stored Curr and leaves the rest, expiry included, alone;
	// WriteCreate stores State in place of whatever the key held, expiring at Expiry.
	Write Write
	// Allowed reports whether the request is admitted.
	Allowed bool
	// Remaining is the allowance left after this request, never negative: the limit less the
	// estimate.
	Remaining int64
	// RetryAfter is 0 when allowed, else the exact time until the estimate has dropped enough for
	// the request, if nothing else is admitted meanwhile, rounded up to a whole millisecond.
	RetryAfter time.Duration
	// ResetAfter is the time until the estimate is 0, rounded up to a whole millisecond: 0 for a key
	// with nothing in either window, at most 2 windows.
	ResetAfter time.Duration
	// State is the state WriteCreate stores: the current window's start, its count n, and the
	// count of the window before it.
	State SlidingWindowState
	// Expiry is when the key written by WriteCreate expires, in Unix microseconds: two windows
	// after State.Start, when the state becomes equivalent to a missing key.
	Expiry int64
}

// SlidingWindow decides a request for n units (0 = peek) under limit units per window at now, in
// Unix microseconds. st is the key's state, nil when the key does not exist; it must have passed
// [CheckSlidingWindow].
//
// With cur the start of the window that holds now (a multiple of window in Unix time), e = now − cur
// and w the window, the previous window's count p and the current one's c, the estimate is
// ⌈p × (w − e) / w⌉ + c and the request is admitted when estimate + n ≤ limit.
func SlidingWindow(st *SlidingWindowState, now, limit int64, window time.Duration, n int64) SlidingWindowResult {
	w := window.Microseconds()
	cur := now - now%w
	e := now - cur
	var prev, curr int64
	same := false
	if st != nil {
		switch st.Start {
		case cur:
			prev, curr, same = st.Prev, st.Curr, true
		case cur - w: // the stored window is the previous one now
			prev = st.Curr
		}
	}
	used := ceilMulDiv(prev, w-e, w) + curr
	if used+n <= limit {
		res := SlidingWindowResult{Allowed: true, Remaining: limit - used - n, ResetAfter: ceilMillis(resetAfter(prev, curr+n, w, e))}
		switch {
		case n == 0:
		case same:
			res.Write = WriteIncrement
		default:
			res.Write = WriteCreate
			res.State = SlidingWindowState{Start: cur, Prev: prev, Curr: n}
			res.Expiry = cur + 2*w
		}
		return res
	}
	var wait int64
	if r := limit - curr - n; r >= 0 {
		// Later in this window: the first e' with ⌈prev × (w − e') / w⌉ ≤ r, that is
		// w − e' ≤ ⌊r × w / prev⌋. (prev > r here, or the request would fit.)
		q, _ := mulDiv(r, w, prev)
		wait = w - q - e
	} else {
		// In the next window, where curr weighs as the previous count and nothing is current: at its
		// start if curr + n fits, else at the first e' with curr × (w − e') ≤ (limit − n) × w.
		wait = w - e
		if r := limit - n; curr > r {
			q, _ := mulDiv(r, w, curr)
			wait += w - q
		}
	}
	return SlidingWindowResult{
		Remaining:  max(0, limit-used),
		RetryAfter: ceilMillis(wait),
		ResetAfter: ceilMillis(resetAfter(prev, curr, w, e)),
	}
}

// resetAfter returns the microseconds until the estimate is 0, at e into the current window, with
// prev units in the previous window and curr in the current one: curr weighs until the end of the
// next window, prev until the end of this one.
func resetAfter(prev, curr, w, e int64) int64 {
	switch {
	case curr > 0:
		return 2*w - e
	case prev > 0:
		return w - e
	}
	return 0
}

// ceilMillis returns us microseconds rounded up to a whole millisecond, as a Duration.
func ceilMillis(us int64) time.Duration {
	return time.Duration((us+999)/1000) * time.Millisecond
}

// mulDiv returns ⌊a × b / c⌋ and the remainder, exactly, for a, b ≥ 0 and c > 0 whose quotient
// fits in 63 bits: the product is computed in 128 bits.
func mulDiv(a, b, c int64) (q, r int64) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	uq, ur := bits.Div64(hi, lo, uint64(c))
	return int64(uq), int64(ur)
}

// ceilMulDiv returns ⌈a × b / c⌉, exactly.
func ceilMulDiv(a, b, c int64) int64 {
	q, r := mulDiv(a, b, c)
	if r > 0 {
		q++
	}
	return q
}
