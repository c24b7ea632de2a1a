package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A callCtx bounds one script call by the command timeout, like context.WithTimeout, without its
// allocations: callCtxs are pooled, each with its own timer and Done channel, and one goes back to
// the pool only when neither its timer nor its parent ended it (an ended one has a closed channel,
// and rueidis may still hold a call it abandoned; it is left to the garbage collector).
//
// A parent that can be cancelled (Done not nil) is watched with context.AfterFunc, which allocates;
// a parent that cannot (context.Background, a context.WithoutCancel) costs nothing. A parent whose
// deadline comes first needs no callCtx at all: see [Store.bound].
type callCtx struct {
	parent   context.Context
	deadline time.Time
	done     chan struct{}
	timer    *time.Timer // runs expire at the deadline
	state    atomic.Int32
	expire   func()      // c.end(deadlineExceeded), made once
	cancel   func()      // c.end(parentCancelled), made once
	stop     func() bool // stops watching a parent that can be cancelled, or nil
}

// callCtx states.
const (
	running int32 = iota
	deadlineExceeded
	parentCancelled
)

var callCtxs = sync.Pool{New: func() any {
	c := &callCtx{done: make(chan struct{})}
	c.expire = func() { c.end(deadlineExceeded) }
	c.cancel = func() { c.end(parentCancelled) }
	return c
}}

// bound returns ctx bounded by the command timeout, and the callCtx to release once the call is
// over: nil when ctx's own deadline comes first, and ctx is returned as it is.
func (s *Store) bound(ctx context.Context) (context.Context, *callCtx) {
	deadline := time.Now().Add(s.commandTimeout)
	if d, ok := ctx.Deadline(); ok && !d.After(deadline) {
		return ctx, nil
	}
	c := callCtxs.Get().(*callCtx)
	c.parent, c.deadline = ctx, deadline
	if c.timer == nil {
		c.timer = time.AfterFunc(s.commandTimeout, c.expire)
	} else {
		c.timer.Reset(s.commandTimeout)
	}
	if ctx.Done() != nil {
		c.stop = context.AfterFunc(ctx, c.cancel)
	}
	return c, c
}

// end closes c's Done channel once, for the reason why.
func (c *callCtx) end(why int32) {
	if c.state.CompareAndSwap(running, why) {
		close(c.done)
	}
}

// release returns c to the pool unless it ended, or may still end (its timer is already running).
// A nil c does nothing.
func (c *callCtx) release() {
	if c == nil {
		return
	}
	if !c.timer.Stop() {
		c.state.CompareAndSwap(running, deadlineExceeded) // expire runs, or is about to
	}
	if c.stop != nil && !c.stop() {
		c.state.CompareAndSwap(running, parentCancelled) // the parent ended c, or is ending it
	}
	c.stop = nil
	if c.state.Load() != running {
		return // its channel is closed, or is being closed: for the garbage collector
	}
	c.parent = nil
	callCtxs.Put(c)
}

// Deadline returns the call's deadline. See context.Context.
func (c *callCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Done returns a channel closed at the deadline or when the parent is cancelled. See context.Context.
func (c *callCtx) Done() <-chan struct{} { return c.done }

// Err returns context.DeadlineExceeded after the deadline, the parent's error after it was
// cancelled, and nil before. See context.Context.
func (c *callCtx) Err() error {
	switch c.state.Load() {
	case deadlineExceeded:
		return context.DeadlineExceeded
	case parentCancelled:
		if err := c.parent.Err(); err != nil {
			return err
		}
		return context.Canceled
	}
	return nil
}

// Value returns the parent's value for key. See context.Context.
func (c *callCtx) Value(key any) any { return c.parent.Value(key) }
