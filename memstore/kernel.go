package memstore

import (
	"fmt"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
)

// A kernel is how memstore keeps and decides one admit.Algorithm's state in an entry, following the
// algorithm's transition in internal/algo, as the Redis script's module does. Its methods dispatch
// on the algorithm to the functions of its file (fixedwindow.go, gcra.go, …); an algorithm that
// admit.Limit.Validate accepts has a case in each. (A switch rather than an interface: the entries
// passed to an interface method would escape to the heap, and Take would allocate.)
type kernel admit.Algorithm

// live reports whether e holds live state at now. An entry that does not is as a missing key:
// takeAll removes it.
func (k kernel) live(e *entry, now instant) bool {
	switch admit.Algorithm(k) {
	case admit.FixedWindow:
		return fixedWindowLive(e, now)
	case admit.SlidingWindow:
		return slidingWindowLive(e, now)
	case admit.SlidingLog:
		return slidingLogLive(e, now)
	case admit.GCRA:
		return gcraLive(e, now)
	case admit.Concurrency:
		return concurrencyLive(e, now)
	}
	return false
}

// check reports why e's live state, with its further state x (shard.ext), cannot be lim's — it is
// corrupt for lim — or nil. g are lim's figures when it is a GCRA Limit (shard.gcraParams), and
// unused otherwise. clamp is shard.read's.
func (k kernel) check(e *entry, x *sliding, lim *admit.Limit, g *algo.GCRAParams, now instant, clamp bool) error {
	switch admit.Algorithm(k) {
	case admit.FixedWindow:
		return fixedWindowCheck(e, lim, now)
	case admit.SlidingWindow:
		return slidingWindowCheck(e, x, lim, now)
	case admit.SlidingLog:
		return slidingLogCheck(x, lim, now)
	case admit.GCRA:
		return gcraCheck(e, lim, g, now, clamp)
	case admit.Concurrency:
		return concurrencyCheck(x, lim, now)
	}
	return fmt.Errorf("no kernel for %v", lim.Algorithm)
}

// decide decides cost units under lim at now on e's live state, with its further state x
// (shard.ext), or on a missing key when e is nil, into *d, and reports the write an admission makes, and next: the new state the write stores, for an
// algorithm whose decision computes it (GCRA's TAT; 0 for the others), to be passed to apply. g are
// lim's figures when it is a GCRA Limit (shard.gcraParams), and unused otherwise. The Decision is
// written in place, not returned: it carries the whole Limit, and copying it back up each call
// costs as much as some of the deciding.
func (k kernel) decide(e *entry, x *sliding, lim *admit.Limit, g *algo.GCRAParams, cost int64, now instant, d *admit.Decision) (w write, next int64) {
	switch admit.Algorithm(k) {
	case admit.FixedWindow:
		w = fixedWindowDecide(e, lim, cost, now, d)
	case admit.SlidingWindow:
		w = slidingWindowDecide(e, x, lim, cost, now, d)
	case admit.SlidingLog:
		w = slidingLogDecide(e, x, lim, cost, now, d)
	case admit.GCRA:
		return gcraDecide(e, lim, g, cost, now, d)
	case admit.Concurrency:
		w = concurrencyDecide(e, x, lim, cost, now, d)
	default:
		*d = admit.Decision{Limit: *lim}
	}
	return w, 0
}

// decided sets *d to a kernel's Decision under lim, without a token (apply's, once written). It sets
// every field (so d need not be zero) one by one: a composite literal through the pointer is built
// aside and then copied, about 20 instructions more per Take. TestDecidedSetsEveryField keeps the
// list whole.
func decided(d *admit.Decision, lim *admit.Limit, allowed bool, remaining int64, retryAfter, resetAfter time.Duration) {
	d.Allowed = allowed
	d.Limit = *lim
	d.Remaining = remaining
	d.RetryAfter = retryAfter
	d.ResetAfter = resetAfter
	d.Replayed = false
	d.Degraded = false
	d.Overridden = false
	d.Token = 0
}

// apply makes w, the write decide reported with next, on e and its further state *x: a new entry
// holding only its algorithm, and no further state, for writeCreate. It sets e.deadline to the time
// from which e is no longer live. token names the lease a Concurrency admission acquires; other
// algorithms ignore it.
func (k kernel) apply(e *entry, x **sliding, w write, lim *admit.Limit, cost int64, now instant, token uint64, next int64) {
	switch admit.Algorithm(k) {
	case admit.FixedWindow:
		fixedWindowApply(e, w, lim, cost, now)
	case admit.SlidingWindow:
		slidingWindowApply(e, x, w, lim, cost, now)
	case admit.SlidingLog:
		slidingLogApply(e, x, w, lim, cost, now)
	case admit.GCRA:
		gcraApply(e, next)
	case admit.Concurrency:
		concurrencyApply(e, x, w, lim, cost, now, token)
	}
}

// token returns the token of the units an admission at now has just written to e (see
// admit.Decision.Token): the end of a fixed window's window in Unix milliseconds, rounded up; the
// start of a sliding window's current window, in Unix microseconds; the time a sliding log logged
// them, in Unix microseconds; a GCRA key's TAT, in microseconds since the table's base, offset by the
// base's Unix time. Each names the units' window to settle, as the Redis store's tokens do in Redis's
// time. A concurrency key's is lease, the token of the lease just acquired. x is e's further state.
func (k kernel) token(e *entry, x *sliding, now instant, lease uint64) uint64 {
	switch admit.Algorithm(k) {
	case admit.Concurrency:
		return lease
	case admit.FixedWindow:
		return fixedWindowToken(e.deadline, now.base)
	case admit.SlidingWindow:
		return uint64(x.start)
	case admit.SlidingLog:
		return uint64(now.unixMicro)
	case admit.GCRA:
		return uint64(gcraTAT(e) + now.baseMicro())
	}
	return 0
}

// settle settles a reservation under lim whose Take reported token, at delta = actual − reserved
// units, on e's live state, with its further state x, or on a missing key when e is nil, and reports
// the key's Decision after and the write settling makes: writeDelete when a refund leaves nothing
// counted.
func (k kernel) settle(e *entry, x *sliding, lim *admit.Limit, token uint64, delta int64, now instant) (admit.Decision, write) {
	switch admit.Algorithm(k) {
	case admit.FixedWindow:
		return fixedWindowSettle(e, lim, token, delta, now)
	case admit.SlidingWindow:
		return slidingWindowSettle(e, x, lim, token, delta, now)
	case admit.SlidingLog:
		return slidingLogSettle(e, x, lim, token, delta, now)
	case admit.GCRA:
		return gcraSettle(e, lim, token, delta, now)
	}
	return admit.Decision{Limit: *lim}, writeNone
}

// settleApply makes w, the write settle reported, other than writeDelete, on e and its further state
// *x: a new entry holding only its algorithm, and no further state, for writeCreate.
func (k kernel) settleApply(e *entry, x **sliding, w write, lim *admit.Limit, token uint64, delta int64, now instant) {
	switch admit.Algorithm(k) {
	case admit.FixedWindow:
		fixedWindowSettleApply(e, w, lim, token, delta, now)
	case admit.SlidingWindow:
		slidingWindowSettleApply(e, x, w, lim, token, delta, now)
	case admit.SlidingLog:
		slidingLogSettleApply(e, x, w, lim, token, delta, now)
	case admit.GCRA:
		gcraSettleApply(e, w, lim, token, delta, now)
	}
}

// A write is what an admission, or a settlement, does to a key's entry.
type write uint8

const (
	writeNone   write = iota // nothing: a peek, or a rejection
	writeCreate              // a new entry, for a key that has none (or whose entry has ended)
	writeUpdate              // a change of the key's live entry
	writeDelete              // the removal of the key's entry: a refund left nothing counted
)

// writeOf returns the write of an entry that makes the transition's write w: writeCreate on a missing
// key (e nil), else writeUpdate; writeNone and writeDelete as they are.
func writeOf(w algo.Write, e *entry) write {
	switch {
	case w == algo.WriteNone:
		return writeNone
	case w == algo.WriteDelete:
		return writeDelete
	case e == nil:
		return writeCreate
	}
	return writeUpdate
}

// An instant is the time of a decision: since the table's base on the monotonic clock, which
// deadlines use, and in Unix microseconds, for the algorithms that align to Unix time or keep
// timestamps, as Redis's TIME gives them.
type instant struct {
	mono      time.Duration
	unixMicro int64
	intoMicro time.Duration // how far mono is into the microsecond unixMicro names: 0 … 999 ns
	base      int64         // the table's base, in Unix nanoseconds: mono is since then
}

// baseMicro returns the table's base in Unix microseconds, truncated: the offset of the GCRA tokens.
func (now instant) baseMicro() int64 { return now.base / 1000 }
