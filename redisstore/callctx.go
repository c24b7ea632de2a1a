package redisstore

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/admit-dev/admit/internal/validate"
)

// A callCtx bounds one script call by the command timeout, like context.WithTimeout, without its
// allocations and almost without its timer operations. Each Store pools its callCtxs, each with its
// own Done channel and timer. The timer is not stopped when a call ends nor reset when the next one
// starts: the next call, made later with the same timeout, has a later deadline, so a timer armed
// for an earlier call fires early, sees the current deadline still ahead, and arms itself again for
// the time left. That costs one timer operation per command timeout, not two per call.
//
// A callCtx ended by its deadline or its parent (its channel closed) never goes back to the pool:
// rueidis may still hold a call it abandoned. A parent that can be cancelled (Done not nil) is
// watched with context.AfterFunc, which allocates; a parent that cannot (context.Background, a
// context.WithoutCancel) costs nothing. A parent whose deadline comes first needs no callCtx at all:
// see [Store.bound].
//
// A call ended by its deadline reports a [deadlineError]: context.DeadlineExceeded, and
// validate.ErrClientLate when the time went in this process rather than in Redis.
type callCtx struct {
	pool     *sync.Pool // the Store's
	parent   context.Context
	epoch    time.Time     // the Store's: deadline counts from it
	deadline time.Duration // the call's deadline, as time since epoch
	done     chan struct{}
	why      atomic.Int32   // running, or why done was closed
	stop     func() bool    // stops watching a parent that can be cancelled, or nil
	replies  *atomic.Uint64 // the Store's count of replies that reached their callers (inflight.replies)
	seen     uint64         // replies when the call began
	began    time.Duration  // when the call began, as time since epoch
	lateAt   *atomic.Int64  // the Store's: when a timer last ran late, as time since epoch (inflight.lateAt)
	slack    time.Duration  // a timer later than this past the deadline says the process was not running
	grace    time.Duration  // how long a verdict without evidence waits for some (JudgeLate)
	in       *inflight      // the Store's: its grace timer (inflight.afterGrace)
	overdue  time.Duration  // how late past the deadline the timer ended the call; written before why
	verdict  atomic.Int32   // once ended by its deadline: undecided, judging, lateClient or lateRedis
	dlErr    deadlineError  // Err's error once ended by its deadline

	mu     sync.Mutex // guards inUse, armed and deadline against the timer
	inUse  bool       // between bound and release
	armed  bool       // the timer will run expire
	timer  *time.Timer
	expire func() // c.expireNow, made once
	cancel func() // c.end(parentCancelled), made once
}

// callCtx states: running, or the reason its channel was closed.
const (
	running int32 = iota
	deadlineExceeded
	parentCancelled
)

// Verdicts on a call ended by its deadline (callCtx.late), and judging: waiting for evidence in the
// grace that JudgeLate started.
const (
	undecided int32 = iota
	judging
	lateClient
	lateRedis
)

// A deadlineError is the error of a call ended by its deadline. It matches context.DeadlineExceeded,
// and validate.ErrClientLate when the client was late (callCtx.late), which guard's Breaker does not
// count as a failure. The verdict is asked for only when ErrClientLate is matched, as late as
// possible: a starved process counts the replies it has read only when it runs again.
type deadlineError struct{ c *callCtx }

var _ validate.LateVerdict = (*deadlineError)(nil)

// Error says the client was late when that is known already; it decides nothing, since wrapping the
// error (fmt.Errorf) reads it as soon as the call ends, before anyone asks for the verdict.
func (e *deadlineError) Error() string {
	if v := e.c.verdict.Load(); v == lateClient || v != lateRedis && e.c.evidence() {
		return "context deadline exceeded while Redis answered other calls or the process was not running (the client was late)"
	}
	return context.DeadlineExceeded.Error()
}

// Is reports whether target is context.DeadlineExceeded, or validate.ErrClientLate for a late client.
func (e *deadlineError) Is(target error) bool {
	switch target {
	case context.DeadlineExceeded:
		return true
	case validate.ErrClientLate:
		return e.c.late()
	}
	return false
}

// Timeout reports true, as context.DeadlineExceeded's does.
func (e *deadlineError) Timeout() bool { return true }

// JudgeLate makes the verdict of a call without evidence of the client's lateness yet wait for
// some, off the caller's path (validate.LateVerdict): after the grace, a reply that reached
// another call meanwhile, a timer of the Store late meanwhile (this grace timer's own included),
// or a slow pass through the run queue makes the client late; nothing of these, Redis. It returns
// false, and calls nothing, when the verdict is made already or there is evidence now. Until
// report is called, Is(validate.ErrClientLate) reports the evidence so far without deciding.
func (e *deadlineError) JudgeLate(report func(late bool)) bool {
	c := e.c
	if !c.verdict.CompareAndSwap(undecided, judging) {
		return false
	}
	if c.evidence() {
		c.verdict.Store(lateClient)
		return false
	}
	due := time.Since(c.epoch) + c.grace
	c.in.afterGrace(c.grace, func() {
		v := lateRedis
		if c.evidence() || time.Since(c.epoch)-due > c.slack || c.slowRunQueue() {
			v = lateClient
		}
		if !c.verdict.CompareAndSwap(judging, v) {
			v = c.verdict.Load() // evidence seen by late meanwhile
		}
		report(v == lateClient)
	})
	return true
}

func newCallCtx(pool *sync.Pool, epoch time.Time, in *inflight, slack, grace time.Duration) *callCtx {
	c := &callCtx{pool: pool, epoch: epoch, replies: &in.replies, lateAt: &in.lateAt, slack: slack, grace: grace, in: in, done: make(chan struct{})}
	c.expire = c.expireNow
	c.dlErr.c = c
	c.cancel = func() { c.end(parentCancelled) }
	return c
}

// bound returns ctx bounded by the command timeout, and the callCtx to release once the call is
// over: nil when ctx's own deadline comes first, and ctx is returned as it is.
//
// The clock read is time.Since(s.epoch), which reads only the monotonic clock: half the cost of
// time.Now, which reads the wall clock too.
func (s *Store) bound(ctx context.Context) (context.Context, *callCtx) {
	deadline := time.Since(s.epoch) + s.commandTimeout
	if d, ok := ctx.Deadline(); ok && d.Sub(s.epoch) <= deadline {
		return ctx, nil
	}
	c := s.calls.Get().(*callCtx)
	c.parent, c.seen = ctx, c.replies.Load()
	c.mu.Lock()
	c.deadline, c.began, c.inUse = deadline, deadline-s.commandTimeout, true
	if !c.armed { // else the timer fires at an earlier call's deadline, and arms itself again
		c.armed = true
		if c.timer == nil {
			c.timer = time.AfterFunc(s.commandTimeout, c.expire)
		} else {
			c.timer.Reset(s.commandTimeout)
		}
	}
	c.mu.Unlock()
	if ctx.Done() != nil {
		c.stop = context.AfterFunc(ctx, c.cancel)
		if ctx.Err() != nil {
			// Already cancelled: end c now, not when AfterFunc's goroutine runs, so that the
			// call sees a done context from its start, as under context.WithTimeout, and
			// never reaches Redis.
			c.end(parentCancelled)
			<-c.done // closed now, or in a moment by AfterFunc's goroutine if it won end's race
		}
	}
	return c, c
}

// expireNow runs on c's timer: it ends the call in progress if its deadline has passed, arms the
// timer again if not, and does nothing between calls.
func (c *callCtx) expireNow() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = false
	if !c.inUse || c.why.Load() != running {
		return
	}
	now := time.Since(c.epoch)
	left := c.deadline - now
	if left > 0 {
		c.armed = true
		c.timer.Reset(left)
		return
	}
	c.overdue = -left
	if c.overdue > c.slack {
		c.lateAt.Store(int64(now))
	}
	c.end(deadlineExceeded)
}

// end closes c's Done channel once, for the reason why.
func (c *callCtx) end(why int32) {
	if c.why.CompareAndSwap(running, why) {
		close(c.done)
	}
}

// release ends c's use, and returns c to its pool unless it ended. A nil c does nothing.
func (c *callCtx) release() {
	if c == nil {
		return
	}
	if c.stop != nil && !c.stop() {
		c.why.CompareAndSwap(running, parentCancelled) // the parent ended c, or is ending it
	}
	c.stop = nil
	c.mu.Lock()
	c.inUse = false
	ended := c.why.Load() != running
	c.mu.Unlock()
	if ended {
		return // its channel is closed, or is being closed: for the garbage collector
	}
	c.parent = nil
	c.pool.Put(c)
}

// Deadline returns the call's deadline. See context.Context.
func (c *callCtx) Deadline() (time.Time, bool) { return c.epoch.Add(c.deadline), true }

// Done returns a channel closed at the deadline or when the parent is cancelled. See context.Context.
func (c *callCtx) Done() <-chan struct{} { return c.done }

// Err returns context.DeadlineExceeded after the deadline, the parent's error after it was
// cancelled, and nil before. See context.Context.
func (c *callCtx) Err() error {
	switch c.why.Load() {
	case deadlineExceeded:
		return &c.dlErr
	case parentCancelled:
		if err := c.parent.Err(); err != nil {
			return err
		}
		return context.Canceled
	}
	return nil
}

// late reports whether the time of c, ended by its deadline, went in this process: a reply reached
// another call of the Store since c began; or a timer of the Store ran more than slack past its
// deadline since c began, c's own or another's (the process was not running then: a process back
// just before c's deadline runs c's timer on time, and the timers of the calls whose deadlines passed
// while it was away late); or, failing these, one pass through the scheduler's run queue
// (runtime.Gosched) takes longer than slack (the process runs, but its goroutines wait behind each
// other, the reader of the replies among them). The verdict is made once, by its first caller, and
// kept: a callCtx ended by its deadline is never reused. While JudgeLate's grace runs, late
// reports the evidence so far, deciding only when there is some.
func (c *callCtx) late() bool {
	switch v := c.verdict.Load(); v {
	case lateClient, lateRedis:
		return v == lateClient
	case judging:
		if !c.evidence() {
			return false
		}
		c.verdict.CompareAndSwap(judging, lateClient)
		return c.verdict.Load() == lateClient
	}
	v := lateRedis
	if c.evidence() || c.slowRunQueue() {
		v = lateClient
	}
	if !c.verdict.CompareAndSwap(undecided, v) {
		return c.late()
	}
	return v == lateClient
}

// evidence reports whether c's timer ran late, a reply reached another call since c began, or a
// timer of the Store ran late since c began.
func (c *callCtx) evidence() bool {
	return c.overdue > c.slack || c.replies.Load() != c.seen || time.Duration(c.lateAt.Load()) > c.began
}

// slowRunQueue reports whether one pass through the run queue takes longer than c's slack, or a
// reply reached another call meanwhile.
func (c *callCtx) slowRunQueue() bool {
	start := time.Now()
	runtime.Gosched()
	return time.Since(start) > c.slack || c.replies.Load() != c.seen
}

// Value returns the parent's value for key. See context.Context.
func (c *callCtx) Value(key any) any { return c.parent.Value(key) }
