package redisstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/redis/rueidis"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/slot"
)

// Coalescing says whether a Store gathers the concurrent decisions of its process into batch
// script calls (Config.Coalescing).
type Coalescing int

// The Coalescing modes.
const (
	// CoalescingDefault is CoalescingOn.
	CoalescingDefault Coalescing = iota
	// CoalescingOn gathers the takes that arrive while their lane (the whole server on
	// standalone and Sentinel, one hash slot on a cluster) already has laneCalls calls in flight,
	// and sends them together, as one batch script call, when one of those returns. A take that
	// finds fewer calls in flight goes at once, in a call of its own, as with CoalescingOff: below
	// that concurrency the client's pipeline carries the calls and a batch would only add a wait.
	CoalescingOn
	// CoalescingOff sends every take in a script call of its own.
	CoalescingOff
)

// String returns "on" or "off".
func (c Coalescing) String() string {
	if c == CoalescingOff {
		return "off"
	}
	return "on"
}

// maxBatch is the most takes one batch script call decides: a longer queue goes as several calls,
// pipelined, so that no take waits for more than the one call in flight before it.
const maxBatch = 128

// laneCalls is how many calls a lane has in flight, by default, before takes queue for a batch. At 16 callers
// on many keys a lane of one call (every take queued behind the one in flight) decided 0.72x the
// takes a second of calls of their own; with 16 the pipeline carries that load as before and
// batches form only beyond it, where they pay (BENCHMARKS.md, Coalescing).
const laneCalls = 16

// A coalescer gathers a Store's takes into batches, one lane per hash slot on a cluster and one for
// the whole server otherwise. A take that finds fewer than laneCalls calls of its lane in flight
// sends its own call at once (the one-call path); one that finds laneCalls joins the lane's queue,
// and the queue goes as a batch when a call in flight returns, that call's place going to the drain
// that sends it (several drains may be in flight: the pipeline stays laneCalls deep).
type coalescer struct {
	mu        sync.Mutex
	laneCalls int              // calls in flight before takes queue: laneCalls, or 1 under record
	one       lane             // standalone and Sentinel
	lanes     map[uint16]*lane // a cluster's, by slot
	pool      sync.Pool        // of *queuedTake
	// record, when not nil, is called with every take a lane decided, in the order Redis ran
	// them, while the lane is still busy (tests; they set laneCalls to 1 with it, so that a lane
	// has one call in flight and the order calls end in is the order Redis ran them).
	record func(p *queuedTake)
}

type lane struct {
	calls  int // in flight: one-call takes, and the drain's batch
	drains int // of the calls in flight, drains sending queued takes
	queue  []*queuedTake
}

// A queuedTake is one queued take: a copy of its requests, keys and arguments, and its answer.
type queuedTake struct {
	rs     []admit.Request
	ds     []admit.Decision
	tokens []uint64
	keys   []string
	args   []string
	done   chan struct{} // receives once the answer is in
	state  atomic.Int32
	ok     bool
	err    error

	rsBuf     [bound.MaxRequests]admit.Request
	dsBuf     [bound.MaxRequests]admit.Decision
	tokensBuf [bound.MaxRequests]uint64
	keysBuf   [2*bound.MaxRequests + 1]string
	argsBuf   [3 + takeArgsPerPolicy*bound.MaxRequests]string
}

// queuedTake states
const (
	takeQueued int32 = iota
	takeSent
	takeAnswered
	takeDropped // its caller gave up: not sent if it was still queued, its answer ignored if it was sent
)

// lane returns the lane of a take whose first key is key, on a cluster client or not.
func (co *coalescer) lane(key string, cluster bool) *lane {
	if !cluster {
		return &co.one
	}
	sl := uint16(slot.Of(key))
	l := co.lanes[sl]
	if l == nil {
		l = &lane{}
		co.lanes[sl] = l
	}
	return l
}

// join counts a call of l in flight and returns nil if l had fewer than laneCalls; else it queues a
// copy of the take and returns it.
func (co *coalescer) join(l *lane, rs []admit.Request, tokens []uint64, keys, args []string) *queuedTake {
	if l.calls < co.laneCalls {
		l.calls++
		return nil
	}
	p, _ := co.pool.Get().(*queuedTake)
	if p == nil {
		p = &queuedTake{done: make(chan struct{}, 1)}
	}
	p.state.Store(takeQueued)
	p.rs = append(p.rsBuf[:0], rs...)
	p.ds = p.dsBuf[:len(rs)]
	p.tokens = append(p.tokensBuf[:0], tokens...)
	p.keys = append(p.keysBuf[:0], keys...)
	p.args = append(p.argsBuf[:0], args...)
	l.queue = append(l.queue, p)
	return p
}

// takeLane is take's one-call path under coalescing: the take goes at once if its lane has room,
// else it waits, no longer than ctx allows, for the batch it joined.
func (s *Store) takeLane(ctx context.Context, c rueidis.Client, rs []admit.Request, ds []admit.Decision, tokens []uint64, keys, args []string) (bool, error) {
	co := s.co
	co.mu.Lock()
	l := co.lane(keys[0], c.Mode() == rueidis.ClientModeCluster)
	p := co.join(l, rs, tokens, keys, args)
	co.mu.Unlock()
	if p == nil {
		allowed, err := s.takeCall(ctx, c, rs, ds, tokens, keys, args)
		if co.record != nil {
			co.record(snapshot(rs, ds, tokens, keys, args, allowed, err))
		}
		co.next(s, l)
		return allowed, err
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		if p.state.CompareAndSwap(takeQueued, takeDropped) || p.state.CompareAndSwap(takeSent, takeDropped) {
			return false, fmt.Errorf("redisstore: take: %w", unavailable(ctx.Err()))
		}
		<-p.done // answered meanwhile
	}
	copy(ds, p.ds)
	allowed, err := p.ok, p.err
	p.err, p.rs, p.keys, p.args = nil, nil, nil, nil
	clear(p.rsBuf[:len(rs)])
	co.pool.Put(p)
	return allowed, err
}

// takeCall is one take in a call of its own.
func (s *Store) takeCall(ctx context.Context, c doer, rs []admit.Request, ds []admit.Decision, tokens []uint64, keys, args []string) (bool, error) {
	sc := takeScript
	if s.test != nil {
		sc, args = s.test.take, append(args, s.test.at)
	}
	reply, err := runOn(ctx, c, sc, keys, args)
	if err != nil {
		return false, fmt.Errorf("redisstore: take: %w", err)
	}
	allowed, err := parseTake(reply, rs, ds, tokens)
	if err != nil {
		return false, fmt.Errorf("redisstore: take: %w", err)
	}
	return allowed, nil
}

// next ends a one-call take of l: its place in flight goes to a drain of the queue if takes queued
// meanwhile, else it is given back. Several drains may be in flight, each a place of the lane's
// laneCalls, so that the pipeline stays as deep as without coalescing.
func (co *coalescer) next(s *Store, l *lane) {
	co.mu.Lock()
	q := l.queue
	if len(q) == 0 {
		l.calls--
		co.mu.Unlock()
		return
	}
	l.queue = nil
	l.drains++
	co.mu.Unlock()
	go co.drain(s, l, q)
}

// drain sends q, and then each queue gathered while it was in flight, until l's queue is empty.
func (co *coalescer) drain(s *Store, l *lane, q []*queuedTake) {
	for {
		co.send(s, q)
		co.mu.Lock()
		if len(l.queue) == 0 {
			l.calls--
			l.drains--
			clear(q[:cap(q)])
			l.queue = q[:0] // the next queue reuses the array
			co.mu.Unlock()
			return
		}
		q, l.queue = l.queue, nil
		co.mu.Unlock()
	}
}

// send decides the takes of q that are still wanted, at most maxBatch in each script call, the calls
// pipelined on one connection (a cluster's lane is one slot: one node), in q's order, and answers
// each: a take alone goes as the one-call path's call, a failed call fails each of its takes.
func (co *coalescer) send(s *Store, q []*queuedTake) {
	live := q[:0]
	for _, p := range q {
		if p.state.CompareAndSwap(takeQueued, takeSent) {
			live = append(live, p)
		}
	}
	if len(live) == 0 {
		return
	}
	ctx, bounded := s.bound(context.Background())
	defer bounded.release()
	c, err := s.conn(ctx)
	if err != nil {
		for _, p := range live {
			co.answer(p, false, fmt.Errorf("redisstore: take: %w", err))
		}
		return
	}
	if len(live) == 1 {
		p := live[0]
		ok, err := s.takeCall(ctx, c, p.rs, p.ds, p.tokens, p.keys, p.args)
		co.answer(p, ok, err)
		return
	}
	sc, clock := batchScript, ""
	if s.test != nil {
		sc, clock = s.test.batch, s.test.at
	}
	var calls []batchCall
	for at := 0; at < len(live); at += maxBatch {
		calls = append(calls, newBatchCall(live[at:min(at+maxBatch, len(live))], clock))
	}
	for i, r := range runBatches(ctx, c, sc, calls) {
		b := calls[i]
		var arr []rueidis.RedisMessage
		if r.err == nil {
			if arr, r.err = r.msg.ToArray(); r.err != nil || len(arr) != len(b.ps) {
				r.err = unavailable(fmt.Errorf("%w: want an array of %d replies", errBadReply, len(b.ps)))
			}
		}
		if r.err != nil {
			err := fmt.Errorf("redisstore: take: %w", r.err)
			for _, p := range b.ps {
				co.answer(p, false, err)
			}
			continue
		}
		for j, p := range b.ps {
			if err := arr[j].Error(); err != nil {
				co.answer(p, false, fmt.Errorf("redisstore: take: %w", scriptError(err)))
				continue
			}
			ok, err := parseTake(arr[j], p.rs, p.ds, p.tokens)
			if err != nil {
				err = fmt.Errorf("redisstore: take: %w", err)
			}
			co.answer(p, ok, err)
		}
	}
}

// answer gives p its answer, unless its caller gave up on it.
func (co *coalescer) answer(p *queuedTake, ok bool, err error) {
	p.ok, p.err = ok, err
	if co.record != nil {
		co.record(snapshot(p.rs, p.ds, p.tokens, p.keys, p.args, ok, err))
	}
	if p.state.CompareAndSwap(takeSent, takeAnswered) {
		p.done <- struct{}{}
	}
}

// testScripts are the test assemblies a test's Store decides with, at the time at, Unix µs.
type testScripts struct {
	take, batch *script
	at          string
}

// A batchCall is the keys and arguments of one batch script call.
type batchCall struct {
	ps         []*queuedTake
	keys, args []string
}

// newBatchCall returns the batch script's keys and arguments for ps (scripts/batch.lua), with
// clock, a test assembly's time, last when not "".
func newBatchCall(ps []*queuedTake, clock string) batchCall {
	nk, na := 0, 1+2*len(ps)
	for _, p := range ps {
		nk, na = nk+len(p.keys), na+len(p.args)
	}
	b := batchCall{ps: ps, keys: make([]string, 0, nk), args: make([]string, 1+2*len(ps), na+1)}
	b.args[0] = formatInt(int64(len(ps)))
	for j, p := range ps {
		b.keys = append(b.keys, p.keys...)
		b.args[1+j] = formatInt(int64(len(p.keys)))
		b.args[1+len(ps)+j] = formatInt(int64(len(p.args)))
	}
	for _, p := range ps {
		b.args = append(b.args, p.args...)
	}
	if clock != "" {
		b.args = append(b.args, clock)
	}
	return b
}

// A batchReply is one batch call's reply, or its error as runOn classifies it.
type batchReply struct {
	msg rueidis.RedisMessage
	err error
}

// runBatches sends calls of sc pipelined in one write, in order, and returns their replies; a call
// that meets NOSCRIPT goes again through runOn (which loads the script), after the others. NOSCRIPT
// proves a call did not run: nothing is counted twice.
func runBatches(ctx context.Context, c doer, sc *script, calls []batchCall) []batchReply {
	out := make([]batchReply, len(calls))
	if len(calls) == 1 {
		out[0].msg, out[0].err = runOn(ctx, c, sc, calls[0].keys, calls[0].args)
		return out
	}
	cmds := make(rueidis.Commands, len(calls))
	for i, b := range calls {
		cmds[i] = c.B().Evalsha().Sha1(sc.sha).Numkeys(int64(len(b.keys))).Key(b.keys...).Arg(b.args...).Build()
	}
	for i, r := range c.DoMulti(ctx, cmds...) {
		switch msg, err := r.ToMessage(); {
		case isNoScript(err):
			out[i].msg, out[i].err = runOn(ctx, c, sc, calls[i].keys, calls[i].args)
		case err != nil:
			out[i].err = scriptError(err)
		default:
			out[i].msg = msg
		}
	}
	return out
}

// snapshot returns a copy of a take decided on its own, for record.
func snapshot(rs []admit.Request, ds []admit.Decision, tokens []uint64, keys, args []string, ok bool, err error) *queuedTake {
	p := &queuedTake{ok: ok, err: err}
	p.rs = append(p.rsBuf[:0], rs...)
	p.ds = append(p.dsBuf[:0], ds...)
	p.tokens = append(p.tokensBuf[:0], tokens...)
	p.keys = append(p.keysBuf[:0], keys...)
	p.args = append(p.argsBuf[:0], args...)
	return p
}
