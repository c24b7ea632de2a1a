package memstore

import (
	"fmt"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
)

// The kernel of admit.FixedWindow: e.count units admitted in a window that ends at e.deadline
// (docs/fixed-window.md, algo.FixedWindow). With Limit.Aligned the windows are aligned to Unix time
// (algo.AlignedWindow): a new entry's deadline is the end of the aligned window that holds
// now.unixMicro, measured from the start of that microsecond, so the entry ends exactly at the
// boundary, as a Redis key written with PXAT ends at its millisecond.

func fixedWindowLive(e *entry, now instant) bool { return e.deadline > now.mono }

func fixedWindowCheck(e *entry, lim *admit.Limit, now instant) error {
	return fixedWindowStateCheck(fixedWindowState(e, lim, now), lim, now)
}

// fixedWindowStateCheck is fixedWindowCheck of an entry whose state at now is st.
func fixedWindowStateCheck(st algo.FixedWindowState, lim *admit.Limit, now instant) error {
	var err error
	if lim.Aligned {
		err = algo.CheckAlignedWindow(st, lim.Period, now.unixMicro)
	} else {
		err = algo.CheckFixedWindow(st, lim.Period)
	}
	if err != nil {
		return fmt.Errorf("%w (window left %v, Limit %v)", err, st.TTL, *lim)
	}
	return nil
}

// fixedWindowState returns e's state at now. The time left in an aligned window is measured from
// the start of the microsecond now.unixMicro names, as algo.AlignedWindowLeft measures it.
func fixedWindowState(e *entry, lim *admit.Limit, now instant) algo.FixedWindowState {
	if lim.Aligned {
		return algo.FixedWindowState{Count: e.count, TTL: e.deadline - (now.mono - now.intoMicro)}
	}
	return algo.FixedWindowState{Count: e.count, TTL: e.deadline - now.mono}
}

func fixedWindowDecide(e *entry, lim *admit.Limit, cost int64, now instant, d *admit.Decision) write {
	var st *algo.FixedWindowState
	var buf algo.FixedWindowState
	if e != nil {
		buf = fixedWindowState(e, lim, now)
		st = &buf
	}
	res := fixedWindowResult(st, lim, cost, now)
	decided(d, lim, res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter)
	switch res.Write {
	case algo.WriteCreate:
		return writeCreate
	case algo.WriteIncrement:
		return writeUpdate
	}
	return writeNone
}

// fixedWindowResult decides a request of cost units at now on the state st (nil for a missing key)
// under lim, aligned or not.
func fixedWindowResult(st *algo.FixedWindowState, lim *admit.Limit, cost int64, now instant) algo.FixedWindowResult {
	if lim.Aligned {
		return algo.AlignedWindow(st, lim.Rate, lim.Period, now.unixMicro, cost)
	}
	return algo.FixedWindow(st, lim.Rate, lim.Period, cost)
}

func fixedWindowApply(e *entry, w write, lim *admit.Limit, cost int64, now instant) {
	switch {
	case w == writeCreate && lim.Aligned:
		e.count, e.deadline = cost, now.mono-now.intoMicro+algo.AlignedWindowLeft(now.unixMicro, lim.Period)
	case w == writeCreate:
		e.count, e.deadline = cost, now.mono+lim.Period
	case w == writeUpdate:
		e.count += cost
	}
}

// fixedWindowToken returns the token of a window that ends at deadline, in a table whose base is
// baseNano Unix nanoseconds: its end in Unix milliseconds, rounded up, as the Redis store reports a
// key's PEXPIRETIME. Two windows of a key end at least a millisecond apart, so no two share a token.
func fixedWindowToken(deadline time.Duration, baseNano int64) uint64 {
	return uint64((baseNano + int64(deadline) + int64(time.Millisecond) - 1) / int64(time.Millisecond))
}

// fixedWindowSettled runs the settle transition on e's state, or on a missing key when e is nil: a
// refund lands only in the window whose token is token.
func fixedWindowSettled(e *entry, lim *admit.Limit, token uint64, delta int64, now instant) algo.FixedWindowSettled {
	var st *algo.FixedWindowState
	var buf algo.FixedWindowState
	same := false
	if e != nil {
		buf = fixedWindowState(e, lim, now)
		st, same = &buf, fixedWindowToken(e.deadline, now.base) == token
	}
	if lim.Aligned {
		return algo.AlignedWindowSettle(st, same, lim.Rate, lim.Period, now.unixMicro, delta)
	}
	return algo.FixedWindowSettle(st, same, lim.Rate, lim.Period, delta)
}

func fixedWindowSettle(e *entry, lim *admit.Limit, token uint64, delta int64, now instant) (admit.Decision, write) {
	res := fixedWindowSettled(e, lim, token, delta, now)
	return admit.Decision{Allowed: res.Allowed, Limit: *lim, Remaining: res.Remaining, RetryAfter: res.RetryAfter, ResetAfter: res.ResetAfter}, writeOf(res.Write, e)
}

func fixedWindowSettleApply(e *entry, w write, lim *admit.Limit, token uint64, delta int64, now instant) {
	if w == writeCreate {
		fixedWindowApply(e, w, lim, fixedWindowSettled(nil, lim, token, delta, now).Units, now)
		return
	}
	res := fixedWindowSettled(e, lim, token, delta, now)
	switch res.Write {
	case algo.WriteIncrement:
		fixedWindowApply(e, w, lim, res.Units, now)
	case algo.WriteDecrement:
		e.count -= res.Units
	}
}
