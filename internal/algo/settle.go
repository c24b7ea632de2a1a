package algo

import (
	"sort"
	"time"

	"github.com/admit-dev/admit"
)

// Settling a reservation (docs/reserve-settle.md): a request admitted for an estimate of units, whose actual cost
// is known later, is settled at delta = actual − estimate on the key's state now.
//
//   - A refund (delta < 0) gives back at most −delta units, and only to the window the reservation
//     was counted in — named by its token, which the store made at Take — while that window still
//     holds the key's units; never to a later one.
//   - An overrun (delta > 0) consumes min(delta, what the key has left now) under the current state,
//     as a Take of that many units would (creating the key if it has none); it is whole when it
//     consumed delta.
//   - delta = 0 is a peek.
//
// Each transition reports the one write its store makes (none when nothing changes) and the key's
// Decision after it: a peek of the state after, or, when an overrun was not whole, the rejection of one
// unit more (the key is full: Allowed false, RetryAfter the time until a unit fits).

// Writes only settling asks for.
const (
	// WriteDecrement subtracts Units from the count and leaves the rest, the expiry included, alone:
	// DECRBY key units for a fixed window; for a sliding log, the removal of Units of the entries
	// logged at the reservation's time.
	WriteDecrement Write = iota + WriteIncrement + 1
	// WriteDelete deletes the key: a refund left it with nothing counted.
	WriteDelete
)

// FixedWindowSettled is the outcome of settling a fixed-window reservation.
type FixedWindowSettled struct {
	// FixedWindowResult holds the write and the key's Decision after it. Write is WriteNone;
	// WriteCreate or WriteIncrement of Units, an overrun, as a Take of Units writes; or, for a refund,
	// WriteDecrement of Units, or WriteDelete when the refund takes the count to 0 (a stored 0 is
	// corrupt state).
	FixedWindowResult
	// Units is the number of units the write consumes or gives back.
	Units int64
}

// FixedWindowSettle settles a reservation under limit units per window at delta = actual − reserved
// units. st is the key's state, nil when the key is missing or its window has ended, as for
// [FixedWindow]; same reports whether st's window is the one the reservation was counted in (its
// end is the reservation's token).
func FixedWindowSettle(st *FixedWindowState, same bool, limit int64, window time.Duration, delta int64) FixedWindowSettled {
	return fixedWindowSettle(st, same, limit, delta, func(st *FixedWindowState, n int64) FixedWindowResult {
		return FixedWindow(st, limit, window, n)
	})
}

// AlignedWindowSettle is [FixedWindowSettle] for an aligned window, at now (Unix microseconds): an
// overrun on a missing key creates it to expire at the end of the aligned window that holds now.
func AlignedWindowSettle(st *FixedWindowState, same bool, limit int64, window time.Duration, now, delta int64) FixedWindowSettled {
	return fixedWindowSettle(st, same, limit, delta, func(st *FixedWindowState, n int64) FixedWindowResult {
		return AlignedWindow(st, limit, window, now, n)
	})
}

// fixedWindowSettle settles a fixed-window reservation with decide, the window's transition.
func fixedWindowSettle(st *FixedWindowState, same bool, limit, delta int64, decide func(*FixedWindowState, int64) FixedWindowResult) FixedWindowSettled {
	var out FixedWindowSettled
	var after FixedWindowState
	whole := true
	if st != nil {
		after = *st
	}
	switch {
	case delta < 0 && st != nil && same:
		out.Units = min(-delta, st.Count)
		out.Write, after.Count = WriteDecrement, st.Count-out.Units
		if after.Count == 0 {
			out.Write = WriteDelete
		}
	case delta > 0:
		left := limit
		if st != nil {
			left = max(0, limit-st.Count)
		}
		out.Units, whole = overrun(delta, left)
		if out.Units > 0 {
			res := decide(st, out.Units)
			out.Write = res.Write
			if st == nil {
				after = FixedWindowState{Count: out.Units, TTL: res.ResetAfter}
			} else {
				after.Count += out.Units
			}
		}
	}
	w := out.Write
	if after.Count == 0 {
		out.FixedWindowResult = decide(nil, probe(whole))
	} else {
		out.FixedWindowResult = decide(&after, probe(whole))
	}
	out.Write = w
	return out
}

// overrun returns the units an overrun of delta consumes on a key with left units to spare, and
// whether they are the whole of it.
func overrun(delta, left int64) (units int64, whole bool) {
	units = min(delta, left)
	return units, units == delta
}

// probe returns the cost of the request whose Decision a settlement reports: 0, a peek, or 1 when an
// overrun was not whole, so that the Decision is the rejection of the full key.
func probe(whole bool) int64 {
	if whole {
		return 0
	}
	return 1
}

// SlidingWindowSettled is the outcome of settling a sliding-window reservation.
type SlidingWindowSettled struct {
	// SlidingWindowResult holds the write and the key's Decision after it. Write is WriteNone; for an
	// overrun, WriteIncrement of Units or WriteCreate, as a Take of Units writes; for a refund,
	// WriteCreate of the whole new State expiring at Expiry (two windows after State.Start), or
	// WriteDelete when nothing is left counted in either window.
	SlidingWindowResult
	// Units is the number of units the write consumes or gives back.
	Units int64
}

// SlidingWindowSettle settles a reservation whose token is the start of the window it was counted in
// (Unix µs), under limit units per window at now, at delta = actual − reserved units. st is the key's
// state, nil for a missing key, as for [SlidingWindow].
//
// A refund comes off the count of the token's window while the key still holds it: the current
// window's count when the token is the current window's start, the previous window's when it is the
// previous one's, and nothing once the token's window is older. A current count that reaches 0 leaves
// the previous one alone: the state is then stored as the previous window's, which it is.
func SlidingWindowSettle(st *SlidingWindowState, token, now, limit int64, window time.Duration, delta int64) SlidingWindowSettled {
	w := window.Microseconds()
	cur := now - now%w
	var out SlidingWindowSettled
	var after *SlidingWindowState
	if st != nil {
		a := *st
		after = &a
	}
	whole := true
	switch {
	case delta < 0 && st != nil && (token == cur || token == cur-w):
		r := -delta
		a := *st
		switch {
		case token == cur && st.Start == cur: // the current window's own count
			out.Units = min(r, st.Curr)
			a.Curr -= out.Units
		case token == cur-w && st.Start == cur: // the previous window's, kept beside the current one
			out.Units = min(r, st.Prev)
			a.Prev -= out.Units
		case token == cur-w && st.Start == cur-w: // the stored window has become the previous one
			out.Units = min(r, st.Curr)
			a.Curr -= out.Units
			a.Prev = 0 // two windows back: it weighs nothing now
		}
		if out.Units == 0 {
			break
		}
		if a.Curr == 0 && a.Start == cur && a.Prev > 0 {
			a = SlidingWindowState{Start: cur - w, Curr: a.Prev} // the previous window's count alone
		}
		if a.Curr == 0 {
			out.Write, after = WriteDelete, nil
			break
		}
		out.Write, out.State, out.Expiry, after = WriteCreate, a, a.Start+2*w, &a
	case delta > 0:
		out.Units, whole = overrun(delta, SlidingWindow(st, now, limit, window, 0).Remaining)
		if out.Units > 0 {
			res := SlidingWindow(st, now, limit, window, out.Units)
			out.Write, out.State, out.Expiry = res.Write, res.State, res.Expiry
			if res.Write == WriteIncrement {
				after.Curr += out.Units
			} else {
				a := res.State
				after = &a
			}
		}
	}
	res := SlidingWindow(after, now, limit, window, probe(whole))
	res.Write, res.State, res.Expiry = out.Write, out.State, out.Expiry
	out.SlidingWindowResult = res
	return out
}

// SlidingLogSettled is the outcome of settling a sliding-log reservation.
type SlidingLogSettled struct {
	// SlidingLogResult holds the write and the key's Decision after it. Write is WriteNone; for an
	// overrun, WriteCreate or WriteIncrement of Units entries at now (with Trim), as a Take of Units
	// writes; for a refund, WriteDecrement, the removal of Units of the entries logged at the
	// reservation's time, or WriteDelete when they are all the log holds.
	SlidingLogResult
	// Units is the number of entries the write adds or removes.
	Units int64
}

// SlidingLogSettle settles a reservation whose token is the time its units were logged at (Unix µs),
// under limit units per window at now, at delta = actual − reserved units. log holds the key's
// entries, oldest first, as for [SlidingLog].
//
// A refund removes up to −delta of the entries logged at the token, while that time is still in the
// window; once it has left the window the reservation weighs nothing and nothing is refunded.
// Admissions of the same microsecond are indistinguishable, and removing one of theirs is the same as
// removing one of the reservation's.
func SlidingLogSettle(log []int64, token, now, limit int64, window time.Duration, delta int64) SlidingLogSettled {
	var out SlidingLogSettled
	after := log
	whole := true
	switch {
	case delta < 0 && token > now-window.Microseconds() && token <= now:
		lo := sort.Search(len(log), func(i int) bool { return log[i] >= token })
		hi := sort.Search(len(log), func(i int) bool { return log[i] > token })
		out.Units = min(-delta, int64(hi-lo))
		if out.Units == 0 {
			break
		}
		out.Write = WriteDecrement
		if out.Units == int64(len(log)) {
			out.Write = WriteDelete
		}
		after = make([]int64, 0, len(log)-int(out.Units))
		after = append(append(after, log[:hi-int(out.Units)]...), log[hi:]...)
	case delta > 0:
		out.Units, whole = overrun(delta, SlidingLog(log, now, limit, window, 0).Remaining)
		if out.Units > 0 {
			res := SlidingLog(log, now, limit, window, out.Units)
			out.Write, out.Trim = res.Write, res.Trim
			after = make([]int64, 0, len(log)-res.Trim+int(out.Units))
			after = append(after, log[res.Trim:]...)
			for range out.Units {
				after = append(after, now)
			}
		}
	}
	res := SlidingLog(after, now, limit, window, probe(whole))
	res.Write, res.Trim = out.Write, out.Trim
	out.SlidingLogResult = res
	return out
}

// GCRASettled is the outcome of settling a GCRA reservation.
type GCRASettled struct {
	// GCRAResult holds the write and the key's Decision after it. Write reports whether the store
	// writes TAT: an overrun's, as a Take of Units writes, or a refund's, earlier than the key's.
	GCRAResult
	// Delete reports whether the store deletes the key instead: a refund took its TAT back to now,
	// a full bucket.
	Delete bool
	// Units is the number of units the write consumes or gives back.
	Units int64
}

// GCRASettle settles a reservation whose token is the TAT its admission left (µs, on the store's
// clock), at now under the GCRA Limit lim, on a key whose TAT is tat (as for [GCRA]), at
// delta = actual − reserved units.
//
// A refund of r units moves the TAT back by min(r × T, token − now): the part of the reservation the
// bucket has not yet drained, never more than r emission intervals; and never before now. The bucket
// is one queue, so the units it still holds for the reservation are those of its last emission
// intervals, which end at the token: once the token is at or before now they have all drained, and
// nothing is refunded. A refund so never gives back more than the reservation still holds, and never
// units that later admissions took.
func GCRASettle(tat, token, now int64, lim admit.Limit, delta int64) GCRASettled {
	interval := max(lim.EmissionInterval().Microseconds(), 1)
	var out GCRASettled
	after := tat
	whole := true
	switch {
	case delta < 0 && tat > now && token > now:
		give := min(-delta*interval, token-now) // -delta ≤ MaxRate and interval ≤ tolerance: no overflow
		after = max(tat-give, now)
		out.Units = min(-delta, (tat-after+interval-1)/interval)
		if after == now {
			out.Delete = true
		} else {
			out.Write, out.TAT = true, after
		}
	case delta > 0:
		out.Units, whole = overrun(delta, GCRA(tat, now, lim, 0).Remaining)
		if out.Units > 0 {
			res := GCRA(tat, now, lim, out.Units)
			out.Write, out.TAT, after = true, res.TAT, res.TAT
		}
	}
	res := GCRA(after, now, lim, probe(whole))
	res.Write, res.TAT = out.Write, out.TAT
	out.GCRAResult = res
	return out
}
