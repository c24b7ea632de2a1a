package memstore

import (
	"fmt"
	"sort"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
)

// The kernel of admit.SlidingLog: e.sliding.log holds the time of every admitted unit, Unix µs, oldest
// first; the entry is live until its newest entry leaves the window (docs/sliding-log.md, algo.SlidingLog). An
// admission trims the entries that have left the window, as the Redis module does; a rejection
// touches nothing. A log holds at most 10,000 entries, 8 bytes each.

func slidingLogLive(e *entry, now instant) bool { return e.deadline > now.mono }

func slidingLogCheck(x *sliding, lim *admit.Limit, now instant) error {
	if err := algo.CheckSlidingLog(x.log, now.unixMicro); err != nil {
		return fmt.Errorf("%w (%d entries at %d, Limit %v)", err, len(x.log), now.unixMicro, *lim)
	}
	return nil
}

func slidingLogDecide(e *entry, x *sliding, lim *admit.Limit, cost int64, now instant, d *admit.Decision) write {
	var log []int64
	if e != nil {
		log = x.log
	}
	res := algo.SlidingLog(log, now.unixMicro, lim.Rate, lim.Period, cost)
	decided(d, lim, res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter)
	return writeOf(res.Write, e)
}

func slidingLogApply(e *entry, x **sliding, w write, lim *admit.Limit, cost int64, now instant) {
	if w == writeCreate {
		*x = &sliding{log: make([]int64, 0, cost)}
	}
	st := *x
	res := algo.SlidingLog(st.log, now.unixMicro, lim.Rate, lim.Period, cost)
	if res.Write == algo.WriteNone {
		return
	}
	log := st.log
	log = log[:copy(log, log[res.Trim:])] // in place: the array is reused
	for range cost {
		log = append(log, now.unixMicro)
	}
	st.log = log
	e.deadline = now.monoAt(now.unixMicro + lim.Period.Microseconds())
}

// slidingLogSettled runs the settle transition on e's log, or on a missing key when e is nil.
func slidingLogSettled(e *entry, x *sliding, lim *admit.Limit, token uint64, delta int64, now instant) algo.SlidingLogSettled {
	var log []int64
	if e != nil {
		log = x.log
	}
	return algo.SlidingLogSettle(log, int64(token), now.unixMicro, lim.Rate, lim.Period, delta)
}

func slidingLogSettle(e *entry, x *sliding, lim *admit.Limit, token uint64, delta int64, now instant) (admit.Decision, write) {
	res := slidingLogSettled(e, x, lim, token, delta, now)
	return admit.Decision{Allowed: res.Allowed, Limit: *lim, Remaining: res.Remaining, RetryAfter: res.RetryAfter, ResetAfter: res.ResetAfter}, writeOf(res.Write, e)
}

// slidingLogSettleApply makes an overrun's write as an admission of its units does, or removes a
// refund's entries: the newest of those logged at the token, as the Redis module removes the members
// of the highest sequence numbers. The expiry stays: the entries left leave the window no later.
func slidingLogSettleApply(e *entry, x **sliding, w write, lim *admit.Limit, token uint64, delta int64, now instant) {
	if w == writeCreate {
		slidingLogApply(e, x, w, lim, slidingLogSettled(nil, nil, lim, token, delta, now).Units, now)
		return
	}
	res := slidingLogSettled(e, *x, lim, token, delta, now)
	switch res.Write {
	case algo.WriteCreate, algo.WriteIncrement:
		slidingLogApply(e, x, w, lim, res.Units, now)
	case algo.WriteDecrement:
		st := *x
		log, at := st.log, int64(token)
		hi := sort.Search(len(log), func(i int) bool { return log[i] > at })
		st.log = append(log[:hi-int(res.Units)], log[hi:]...)
	}
}
