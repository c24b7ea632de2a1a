package memstore

import (
	"fmt"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
)

// The kernel of admit.GCRA (docs/gcra.md, algo.GCRA): the theoretical arrival time, in whole microseconds
// since the table's base, is e.deadline itself. The entry is live while the TAT is ahead of now; from
// the TAT on the bucket is full, the same as a missing key, and reclaim may drop the entry. e.count is
// unused.

func gcraLive(e *entry, now instant) bool { return e.deadline > now.mono }

// gcraCheck checks e under lim, clamping (algo.GCRAParams.Clamp) a TAT too far ahead when clamp is
// set: a Request with an OverrideKey.
func gcraCheck(e *entry, lim *admit.Limit, g *algo.GCRAParams, now instant, clamp bool) error {
	st := algo.GCRAState{TAT: gcraTAT(e), TTL: e.deadline - now.mono}
	check := g.Check(st, micros(now))
	if clamp {
		_, check = g.Clamp(st, micros(now))
	}
	if err := check; err != nil {
		return fmt.Errorf("%w (TAT %v ahead, Limit %v)", err, st.TTL, *lim)
	}
	return nil
}

// gcraDecide also returns the TAT an admission writes, which gcraApply then stores: the transition
// runs once per decision. g are lim's figures (see shard.gcraParams). It decides on the TAT
// clamped to lim (algo.GCRAParams.Clamp): e passed gcraCheck, so only a Request with an
// OverrideKey can hold a TAT that the clamp changes.
func gcraDecide(e *entry, lim *admit.Limit, g *algo.GCRAParams, cost int64, now instant, d *admit.Decision) (write, int64) {
	var tat int64 // a missing key
	if e != nil {
		tat, _ = g.Clamp(algo.GCRAState{TAT: gcraTAT(e), TTL: e.deadline - now.mono}, micros(now))
	}
	res := g.Decide(tat, micros(now), cost)
	decided(d, lim, res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter)
	switch {
	case !res.Write:
		return writeNone, 0
	case e == nil:
		return writeCreate, res.TAT
	}
	return writeUpdate, res.TAT
}

// gcraApply stores tat, the TAT gcraDecide returned with the write.
func gcraApply(e *entry, tat int64) {
	e.deadline = time.Duration(tat) * time.Microsecond
}

// gcraTAT returns the theoretical arrival time e holds, in microseconds since the table's base.
func gcraTAT(e *entry) int64 { return int64(e.deadline / time.Microsecond) }

// micros returns now in whole microseconds since the table's base, the resolution GCRA keeps.
func micros(now instant) int64 { return int64(now.mono / time.Microsecond) }

// gcraSettled runs the settle transition on e's TAT, or on a missing key when e is nil. The token is
// the TAT the reservation's admission left, offset by the table's base (see kernel.token).
func gcraSettled(e *entry, lim *admit.Limit, token uint64, delta int64, now instant) algo.GCRASettled {
	var tat int64 // a missing key
	if e != nil {
		tat = gcraTAT(e)
	}
	return algo.GCRASettle(tat, int64(token)-now.baseMicro(), micros(now), *lim, delta)
}

func gcraSettle(e *entry, lim *admit.Limit, token uint64, delta int64, now instant) (admit.Decision, write) {
	res := gcraSettled(e, lim, token, delta, now)
	d := admit.Decision{Allowed: res.Allowed, Limit: *lim, Remaining: res.Remaining, RetryAfter: res.RetryAfter, ResetAfter: res.ResetAfter}
	switch {
	case res.Delete:
		return d, writeDelete
	case !res.Write:
		return d, writeNone
	case e == nil:
		return d, writeCreate
	}
	return d, writeUpdate
}

func gcraSettleApply(e *entry, w write, lim *admit.Limit, token uint64, delta int64, now instant) {
	from := e
	if w == writeCreate {
		from = nil // a new entry
	}
	e.deadline = time.Duration(gcraSettled(from, lim, token, delta, now).TAT) * time.Microsecond
}

// A gcraCache holds the figures of the GCRA Limit a shard decided under last, which most often is
// the Limit of its next GCRA decision: computing them takes divisions, comparing three fields does
// not.
type gcraCache struct {
	rate, burst int64
	period      time.Duration
	params      algo.GCRAParams
}

// gcraParams returns the figures of the GCRA Limit lim (algo.NewGCRAParams), from the shard's cache
// when lim's are the last it computed. The caller holds sh.mu.
func (sh *shard) gcraParams(lim *admit.Limit) *algo.GCRAParams {
	c := &sh.gcra
	if c.rate != lim.Rate || c.period != lim.Period || c.burst != lim.Burst {
		*c = gcraCache{rate: lim.Rate, burst: lim.Burst, period: lim.Period, params: algo.NewGCRAParams(*lim)}
	}
	return &c.params
}
