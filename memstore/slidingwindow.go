package memstore

import (
	"fmt"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
)

// The kernel of admit.SlidingWindow: e.count units admitted in the window that starts at
// e.sliding.start (Unix µs, aligned to the window), e.sliding.prev in the window before it; the
// entry is live until two windows after the start, when the state is equivalent to a missing key
// (docs/sliding-window.md, algo.SlidingWindow).

// A sliding is the state of a sliding window or log, or of a concurrency key, beyond an entry's count
// and deadline, kept out of line so that the entries of other algorithms stay small.
type sliding struct {
	start int64   // sliding_window: the start of the window e.count counts, Unix µs
	prev  int64   // sliding_window: the units admitted in the window before it
	log   []int64 // sliding_log: the times of admitted units, Unix µs, oldest first
	// concurrency: the leases, ordered by expiry
	leases []algo.Lease
	rec    *record // an idempotency record's entry: the record
}

func slidingWindowLive(e *entry, now instant) bool { return e.deadline > now.mono }

// slidingWindowState returns the algorithm's view of e.
func slidingWindowState(e *entry, x *sliding) algo.SlidingWindowState {
	return algo.SlidingWindowState{Start: x.start, Prev: x.prev, Curr: e.count}
}

func slidingWindowCheck(e *entry, x *sliding, lim *admit.Limit, now instant) error {
	st := slidingWindowState(e, x)
	if err := algo.CheckSlidingWindow(st, lim.Period, now.unixMicro); err != nil {
		return fmt.Errorf("%w (state %+v at %d, Limit %v)", err, st, now.unixMicro, *lim)
	}
	return nil
}

func slidingWindowDecide(e *entry, x *sliding, lim *admit.Limit, cost int64, now instant, d *admit.Decision) write {
	res := slidingWindowResult(e, x, lim, cost, now)
	decided(d, lim, res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter)
	switch {
	case res.Write == algo.WriteNone:
		return writeNone
	case e == nil:
		return writeCreate
	}
	return writeUpdate
}

// slidingWindowResult runs the transition on e's state, or on a missing key when e is nil.
func slidingWindowResult(e *entry, x *sliding, lim *admit.Limit, cost int64, now instant) algo.SlidingWindowResult {
	var st *algo.SlidingWindowState
	var buf algo.SlidingWindowState
	if e != nil {
		buf = slidingWindowState(e, x)
		st = &buf
	}
	return algo.SlidingWindow(st, now.unixMicro, lim.Rate, lim.Period, cost)
}

func slidingWindowApply(e *entry, x **sliding, w write, lim *admit.Limit, cost int64, now instant) {
	var res algo.SlidingWindowResult
	if w == writeCreate { // a new entry
		*x = &sliding{}
		res = slidingWindowResult(nil, nil, lim, cost, now)
	} else {
		res = slidingWindowResult(e, *x, lim, cost, now)
	}
	switch res.Write {
	case algo.WriteIncrement:
		e.count += cost
	case algo.WriteCreate:
		(*x).start, (*x).prev, e.count = res.State.Start, res.State.Prev, res.State.Curr
		e.deadline = now.monoAt(res.Expiry)
	}
}

// monoAt returns the time on the table's monotonic clock that is Unix time us: the first instant
// whose unixMicro is us.
func (now instant) monoAt(us int64) time.Duration {
	return time.Duration(us-(now.unixMicro-now.mono.Microseconds())) * time.Microsecond
}

// slidingWindowSettled runs the settle transition on e's state, or on a missing key when e is nil.
func slidingWindowSettled(e *entry, x *sliding, lim *admit.Limit, token uint64, delta int64, now instant) algo.SlidingWindowSettled {
	var st *algo.SlidingWindowState
	var buf algo.SlidingWindowState
	if e != nil {
		buf = slidingWindowState(e, x)
		st = &buf
	}
	return algo.SlidingWindowSettle(st, int64(token), now.unixMicro, lim.Rate, lim.Period, delta)
}

func slidingWindowSettle(e *entry, x *sliding, lim *admit.Limit, token uint64, delta int64, now instant) (admit.Decision, write) {
	res := slidingWindowSettled(e, x, lim, token, delta, now)
	return admit.Decision{Allowed: res.Allowed, Limit: *lim, Remaining: res.Remaining, RetryAfter: res.RetryAfter, ResetAfter: res.ResetAfter}, writeOf(res.Write, e)
}

func slidingWindowSettleApply(e *entry, x **sliding, w write, lim *admit.Limit, token uint64, delta int64, now instant) {
	var res algo.SlidingWindowSettled
	if w == writeCreate { // a new entry
		*x = &sliding{}
		res = slidingWindowSettled(nil, nil, lim, token, delta, now)
	} else {
		res = slidingWindowSettled(e, *x, lim, token, delta, now)
	}
	switch res.Write {
	case algo.WriteIncrement:
		e.count += res.Units
	case algo.WriteCreate:
		(*x).start, (*x).prev, e.count = res.State.Start, res.State.Prev, res.State.Curr
		e.deadline = now.monoAt(res.Expiry)
	}
}
