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

// check reports why e's live state cannot be lim's — it is corrupt for lim — or nil.
func (k kernel) check(e *entry, lim admit.Limit, now instant) error {
	switch admit.Algorithm(k) {
	case admit.FixedWindow:
		return fixedWindowCheck(e, lim, now)
	case admit.SlidingWindow:
		return slidingWindowCheck(e, lim, now)
	case admit.SlidingLog:
		return slidingLogCheck(e, lim, now)
	case admit.GCRA:
		return gcraCheck(e, lim, now)
	case admit.Concurrency:
		return concurrencyCheck(e, lim, now)
	}
	return fmt.Errorf("no kernel for %v", lim.Algorithm)
}

// decide decides cost units under lim at now on e's live state, or on a missing key when e is nil,
// and reports the write an admission makes.
func (k kernel) decide(e *entry, lim admit.Limit, cost int64, now instant) (admit.Decision, write) {
	switch admit.Algorithm(k) {
	case admit.FixedWindow:
		return fixedWindowDecide(e, lim, cost, now)
	case admit.SlidingWindow:
		return slidingWindowDecide(e, lim, cost, now)
	case admit.SlidingLog:
		return slidingLogDecide(e, lim, cost, now)
	case admit.GCRA:
		return gcraDecide(e, lim, cost, now)
	case admit.Concurrency:
		return concurrencyDecide(e, lim, cost, now)
	}
	return admit.Decision{Limit: lim}, writeNone
}

// apply makes w, the write decide reported, on e: a new entry holding only its key and algorithm
// for writeCreate. It sets e.deadline to the time from which e is no longer live. token names the
// lease a Concurrency admission acquires; other algorithms ignore it.
func (k kernel) apply(e *entry, w write, lim admit.Limit, cost int64, now instant, token uint64) {
	switch admit.Algorithm(k) {
	case admit.FixedWindow:
		fixedWindowApply(e, w, lim, cost, now)
	case admit.SlidingWindow:
		slidingWindowApply(e, w, lim, cost, now)
	case admit.SlidingLog:
		slidingLogApply(e, w, lim, cost, now)
	case admit.GCRA:
		gcraApply(e, w, lim, cost, now)
	case admit.Concurrency:
		concurrencyApply(e, w, lim, cost, now, token)
	}
}

// A write is what an admission does to a key's entry.
type write uint8

const (
	writeNone   write = iota // nothing: a peek, or a rejection
	writeCreate              // a new entry, for a key that has none (or whose entry has ended)
	writeUpdate              // a change of the key's live entry
)

// writeOf returns the write of an admission whose transition asks for w on e, nil for a missing
// key: none, a new entry, or a change of e.
func writeOf(w algo.Write, e *entry) write {
	switch {
	case w == algo.WriteNone:
		return writeNone
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
}
