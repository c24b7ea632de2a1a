package memstore

import (
	"fmt"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
)

// The kernel of admit.FixedWindow: e.count units admitted in a window that ends at e.deadline
// (SPEC §2.1, algo.FixedWindow).

func fixedWindowLive(e *entry, now instant) bool { return e.deadline > now.mono }

func fixedWindowCheck(e *entry, lim admit.Limit, now instant) error {
	ttl := e.deadline - now.mono
	if err := algo.CheckFixedWindow(algo.FixedWindowState{Count: e.count, TTL: ttl}, lim.Period); err != nil {
		return fmt.Errorf("%w (window left %v, Limit %v)", err, ttl, lim)
	}
	return nil
}

func fixedWindowDecide(e *entry, lim admit.Limit, cost int64, now instant) (admit.Decision, write) {
	var st *algo.FixedWindowState
	var buf algo.FixedWindowState
	if e != nil {
		buf = algo.FixedWindowState{Count: e.count, TTL: e.deadline - now.mono}
		st = &buf
	}
	res := algo.FixedWindow(st, lim.Rate, lim.Period, cost)
	d := admit.Decision{Allowed: res.Allowed, Limit: lim, Remaining: res.Remaining, RetryAfter: res.RetryAfter, ResetAfter: res.ResetAfter}
	switch res.Write {
	case algo.WriteCreate:
		return d, writeCreate
	case algo.WriteIncrement:
		return d, writeUpdate
	}
	return d, writeNone
}

func fixedWindowApply(e *entry, w write, lim admit.Limit, cost int64, now instant) {
	switch w {
	case writeCreate:
		e.count, e.deadline = cost, now.mono+lim.Period
	case writeUpdate:
		e.count += cost
	}
}
