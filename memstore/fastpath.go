package memstore

import (
	"sync/atomic"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
)

// Take's fast path: a single Request under a fixed window (aligned or not) or GCRA Limit, on a key
// that holds live state of that algorithm, the common case of a busy key. It holds the shard's lock
// for reading only, so that callers of one key do not queue behind one another, and a caller
// preempted on the path holds up no other caller of the path — only a writer of the shard (a new
// key in it, a sweep, a TakeAll or Settle), which waits for every reader to leave, and the readers
// that come after that writer (sync.RWMutex lets no new reader in while a writer waits). It finds
// the entry, reads its one changing word (a fixed window's count, a GCRA key's deadline, which is
// its TAT) atomically, checks and decides on that, and writes an admission with a compare-and-swap
// of the word, deciding again on the new value if another caller changed it in between. Nothing
// else of an entry changes under the read lock, and every other change (a new, ended, removed or
// moved entry, a window's start) holds the lock for writing. The Decision (a copy of the whole
// Limit among its fields) and the token are made after the lock is released, from what the path
// saw.
//
// The decision and the write are exactly the general path's (shard.takeOne), which decides every
// other case — a missing or ended key, state of another algorithm, corrupt state (reported there) —
// and which the tests compare it with. One difference in time alone: callers that overlap may commit
// in an order other than that of their times (shard.at), by at most how long they overlap. Each
// still decides at a time within its call, on the state left by every decision committed before it;
// an earlier time only makes a GCRA decision stricter (the bucket has refilled less), and a fixed
// window's decision depends on its window, which cannot start anew under the read lock.
//
// The path still advances the shard's latest time (shard.at), though its own commits would not need
// it: a caller that read the clock before waiting for the write lock (TakeAll, or this path falling
// back) decides at the latest time instead of its own read, and so never at a time before a decision
// committed meanwhile, which would make that decision's state look ahead of it, corrupt. Deciding at
// the time read on the monotonic clock, without advancing the latest time, was tried: the conformance
// suite's short windows on the real clock then met such false corrupt-state errors.

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
