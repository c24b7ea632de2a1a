// Package algo holds the limiting algorithms as pure transitions, (state, limit, n) -> (write,
// decision), with no I/O and no clock: an algorithm that needs the time, such as a sliding window,
// takes it as an argument, in Unix microseconds as Redis's TIME gives it. It is the executable spec
// that the Redis scripts and the in-memory store both follow.
package algo

import (
	"errors"
	"time"

	"github.com/admit-dev/admit/internal/bound"
)

// Write names the single write a transition asks its store to make.
type Write uint8

// The writes a fixed-window transition may ask for.
const (
	// WriteNone leaves the key as it is: a rejection or a peek.
	WriteNone Write = iota
	// WriteCreate creates the key with value n, expiring when the new window ends: ResetAfter from
	// now (SET key n PX window; for an aligned window, SET key n PXAT end).
	WriteCreate
	// WriteIncrement adds n to the value and leaves the time to live alone (INCRBY key n).
	WriteIncrement
)

// FixedWindowState is the stored state of one fixed-window key.
//
// A key whose time to live has run down to 0 has ended its window: at that instant, and after it, a
// store passes nil (a missing key), never a state with TTL 0, and never reports it corrupt. For Redis
// this is the key's expiry millisecond, when GET still returns the key while PTTL answers 0; memstore
// decides the same instant the same way, so both start a new window exactly one window after the
// first admission.
type FixedWindowState struct {
	// Count is the number of units admitted in the current window, at least 1.
	Count int64
	// TTL is the time left in the current window, more than 0 and at most the window.
	TTL time.Duration
}

// MaxCount is the largest count a fixed-window key may hold: bound.MaxRate.
const MaxCount = bound.MaxRate

// Reasons a stored fixed-window state is corrupt, returned by [CheckFixedWindow].
var (
	ErrCountOutOfRange = errors.New("counter is not an integer in 1...10^15")
	ErrNoExpiry        = errors.New("counter has no expiry")
	ErrExpiryTooLong   = errors.New("counter expires after more than one window")
)

// CheckFixedWindow reports why st cannot be the state of a fixed window of length window, or nil.
// A store must not decide, nor write, on state that fails this check.
func CheckFixedWindow(st FixedWindowState, window time.Duration) error {
	switch {
	case st.Count < 1 || st.Count > MaxCount:
		return ErrCountOutOfRange
	case st.TTL <= 0:
		return ErrNoExpiry
	case st.TTL > window:
		return ErrExpiryTooLong
	}
	return nil
}

// FixedWindowResult is the outcome of one fixed-window transition.
type FixedWindowResult struct {
	// Write is the one write the store must make; WriteNone for a rejection or a peek.
	Write Write
	// Allowed reports whether the request is admitted.
	Allowed bool
	// Remaining is the allowance left after this request, never negative.
	Remaining int64
	// RetryAfter is 0 when allowed, else the time until the window ends.
	RetryAfter time.Duration
	// ResetAfter is the time until the key returns to its full allowance.
	ResetAfter time.Duration
}

// FixedWindow decides a request for n units (0 = peek) under limit units per window. st is the
// key's state, nil when the key does not exist; it must have passed [CheckFixedWindow].
// The window starts at the first admitted request: a missing key is created with a TTL of window.
func FixedWindow(st *FixedWindowState, limit int64, window time.Duration, n int64) FixedWindowResult {
	if st == nil {
		if n == 0 {
			return FixedWindowResult{Allowed: true, Remaining: limit}
		}
		return FixedWindowResult{Write: WriteCreate, Allowed: true, Remaining: limit - n, ResetAfter: window}
	}
	if st.Count+n > limit {
		return FixedWindowResult{Remaining: max(0, limit-st.Count), RetryAfter: st.TTL, ResetAfter: st.TTL}
	}
	w := WriteIncrement
	if n == 0 {
		w = WriteNone
	}
	return FixedWindowResult{Write: w, Allowed: true, Remaining: limit - st.Count - n, ResetAfter: st.TTL}
}
