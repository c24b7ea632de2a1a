package memstore

import (
	"fmt"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
)

// The kernel of admit.SlidingLog: e.sliding.log holds the time of every admitted unit, Unix µs, oldest
// first; the entry is live until its newest entry leaves the window (SPEC §2.3, algo.SlidingLog). An
// admission trims the entries that have left the window, as the Redis module does; a rejection
// touches nothing. A log holds at most admit.MaxSlidingLogRate entries, 8 bytes each.

func slidingLogLive(e *entry, now instant) bool { return e.deadline > now.mono }

func slidingLogCheck(e *entry, lim admit.Limit, now instant) error {
	if err := algo.CheckSlidingLog(e.sliding.log, now.unixMicro); err != nil {
		return fmt.Errorf("%w (%d entries at %d, Limit %v)", err, len(e.sliding.log), now.unixMicro, lim)
	}
	return nil
}

func slidingLogDecide(e *entry, lim admit.Limit, cost int64, now instant) (admit.Decision, write) {
	var log []int64
	if e != nil {
		log = e.sliding.log
	}
	res := algo.SlidingLog(log, now.unixMicro, lim.Rate, lim.Period, cost)
	return admit.Decision{Allowed: res.Allowed, Limit: lim, Remaining: res.Remaining, RetryAfter: res.RetryAfter, ResetAfter: res.ResetAfter},
		writeOf(res.Write, e)
}

func slidingLogApply(e *entry, w write, lim admit.Limit, cost int64, now instant) {
	if w == writeCreate {
		e.sliding = &sliding{log: make([]int64, 0, cost)}
	}
	res := algo.SlidingLog(e.sliding.log, now.unixMicro, lim.Rate, lim.Period, cost)
	if res.Write == algo.WriteNone {
		return
	}
	log := e.sliding.log
	log = log[:copy(log, log[res.Trim:])] // in place: the array is reused
	for range cost {
		log = append(log, now.unixMicro)
	}
	e.sliding.log = log
	e.deadline = now.monoAt(now.unixMicro + lim.Period.Microseconds())
}
