package memstore

import (
	"sync/atomic"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
)

// Take's fast path: a single Request under a fixed window (aligned or not) or GCRA Limit, on a key
// that holds live state of that algorithm, the common case of a busy key. It holds the shard's lock
// for reading only, reads the entry's one changing word atomically, and writes an admission with a
// compare-and-swap of it, deciding again if another caller changed it in between. Its decisions and
// writes are exactly the general path's (shard.takeOne), which decides every other case and which
// the tests compare it with. Why that holds, the one difference in time, and why the path still
// advances the shard's latest time: docs/memstore.md#the-fast-path.

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
// written nothing if not. sh is a shard of tab; known is r's Limit as remembered valid, or nil. The
// caller holds sh.mu for reading (or writing), and has checked that r has no ID and acquires no
// lease.
func (sh *shard) takeFast(tab *table, r *admit.Request, known *knownLimit, h uint32, mono time.Duration, out *fastOutcome) bool {
	lim := &r.Limit
	if lim.Algorithm != admit.GCRA && lim.Algorithm != admit.FixedWindow {
		return false
	}
	if sh.override(r.OverrideKey, mono) != nil {
		return false // decided under other numbers: the general path (override.go)
	}
	i, ok := sh.find(r.Key, h)
	if !ok {
		return false
	}
	e := &sh.entries[i]
	if e.alg != lim.Algorithm {
		return false // other state, or a record: the general path reports or removes it
	}
	if lim.Algorithm == admit.FixedWindow {
		if e.deadline <= mono { // the window's end does not change under the read lock
			return false // ended: the general path removes it
		}
		now := instant{mono: mono}
		if lim.Aligned {
			now = tab.instant(mono) // an aligned window's state is measured in Unix time
		}
		for {
			held := entry{count: atomic.LoadInt64(&e.count), deadline: e.deadline}
			st := fixedWindowState(&held, lim, now)
			if fixedWindowStateCheck(st, lim, now) != nil {
				return false
			}
			out.fixed = fixedWindowResult(&st, lim, r.Cost, now)
			if out.fixed.Write == algo.WriteNone {
				break
			}
			if out.fixed.Write != algo.WriteIncrement {
				return false // not on live state; the general path decides it
			}
			if atomic.CompareAndSwapInt64(&e.count, held.count, held.count+r.Cost) {
				break // fixedWindowApply
			}
		}
		out.deadline = e.deadline
		return true
	}
	var g algo.GCRAParams
	if known != nil {
		g = known.gcra
	} else {
		g = algo.NewGCRAParams(*lim)
	}
	now := int64(mono / time.Microsecond) // micros
	word := (*int64)(&e.deadline)
	for {
		was := entry{deadline: time.Duration(atomic.LoadInt64(word))}
		if !gcraLive(&was, instant{mono: mono}) {
			return false // ended: the general path removes it
		}
		tat := gcraTAT(&was)
		if g.Check(algo.GCRAState{TAT: tat, TTL: was.deadline - mono}, now) != nil {
			return false
		}
		out.gcra = g.Decide(tat, now, r.Cost)
		if !out.gcra.Write {
			return true
		}
		next := was
		gcraApply(&next, out.gcra.TAT)
		if atomic.CompareAndSwapInt64(word, int64(was.deadline), int64(next.deadline)) {
			return true
		}
	}
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
