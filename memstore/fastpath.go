package memstore

import (
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
)

// Take's fast path: a single Request under a fixed window (not aligned) or GCRA Limit, on a key that
// holds live state of that algorithm, the common case of a busy key. Under the shard's lock it does
// only what needs the state: find the entry, check it, decide, and write the admission; the Decision
// (a copy of the whole Limit among its fields) and the token are made after the lock is released,
// from what the lock holder saw. The decision and the write are exactly the general path's
// (shard.takeOne), which decides every other case — a missing or ended key, state of another
// algorithm, corrupt state (reported there) — and which the tests compare it with.

// A fastOutcome is what the fast path decided under the lock, for fill to make the Decision of.
type fastOutcome struct {
	fixed algo.FixedWindowResult // a fixed window's decision
	gcra  algo.GCRAResult        // a GCRA decision
	// deadline is the entry's deadline after the decision: a fixed window's end, which its token
	// names.
	deadline time.Duration
}

// takeFast decides r at mono, on the live entry of its key, whose hash is h, into out, and makes
// the write of an admission, when r is a case of the fast path; it reports whether it was, having
// written nothing if not. The caller holds sh.mu, and has checked that r has no ID and acquires no
// lease.
func (sh *shard) takeFast(r *admit.Request, h uint32, mono time.Duration, out *fastOutcome) bool {
	lim := &r.Limit
	if lim.Algorithm != admit.GCRA && (lim.Algorithm != admit.FixedWindow || lim.Aligned) {
		return false
	}
	i, ok := sh.find(r.Key, h)
	if !ok {
		return false
	}
	e := &sh.entries[i]
	if e.alg != lim.Algorithm || e.deadline <= mono {
		return false // other state, a record, or ended: the general path reports or removes it
	}
	if lim.Algorithm == admit.FixedWindow {
		st := algo.FixedWindowState{Count: e.count, TTL: e.deadline - mono} // fixedWindowState
		if algo.CheckFixedWindow(st, lim.Period) != nil {
			return false
		}
		out.fixed = algo.FixedWindow(&st, lim.Rate, lim.Period, r.Cost)
		if out.fixed.Write == algo.WriteIncrement {
			e.count += r.Cost // fixedWindowApply
		}
		out.deadline = e.deadline
		return true
	}
	g := sh.gcraParams(lim)
	now := int64(mono / time.Microsecond) // micros
	tat := gcraTAT(e)
	if g.Check(algo.GCRAState{TAT: tat, TTL: e.deadline - mono}, now) != nil {
		return false
	}
	out.gcra = g.Decide(tat, now, r.Cost)
	if out.gcra.Write {
		gcraApply(e, out.gcra.TAT)
	}
	return true
}

// fill sets *d to the Decision under lim that out holds, with its token: the general path's, for a
// table whose base is baseNano Unix nanoseconds.
func (out *fastOutcome) fill(lim *admit.Limit, baseNano int64, d *admit.Decision) {
	if lim.Algorithm == admit.FixedWindow {
		res := &out.fixed
		decided(d, lim, res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter)
		if res.Write == algo.WriteIncrement {
			d.Token = fixedWindowToken(out.deadline, baseNano)
		}
		return
	}
	res := &out.gcra
	decided(d, lim, res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter)
	if res.Write {
		d.Token = uint64(res.TAT + baseNano/1000) // kernel.token
	}
}
