package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// ringScale is the size of each connection's queue of commands in the client, as a power of two
// (rueidis.ClientOption.RingScaleEachConn): rueidis's default, 1,024, set explicitly because
// maxInFlight is derived from it.
const ringScale = 10

// maxInFlight bounds the commands a Store has in the client at once, answered or not, counting
// those its callers gave up on: 15/16 of one connection's queue, the rest left for the client's own
// keep-alive PINGs.
//
// rueidis queues each command in a fixed ring per connection, and a command given up on by its
// context keeps its place there until Redis answers it or the connection is dropped, which for a
// frozen server takes a second or more. With enough callers deciding in a loop the ring fills, and
// the next caller waits for a free place without looking at its context: a decision would outlive
// its deadline by seconds. Within maxInFlight, all of a Store's commands on one connection still fit
// its ring, so no caller ever waits inside the client; a caller that finds no room waits for it no
// longer than its own deadline, and fails then as unavailable.
const maxInFlight = 1<<ringScale - 1<<ringScale/16

// inlineMax is how many commands may be in the client at once for a caller to run its own command
// on its own goroutine (see inflight): enough for hundreds of concurrent callers on a healthy
// Redis, and only half of maxInFlight, so that after an outage the commands given up on still leave
// the workers room.
const inlineMax = maxInFlight / 2

// A bounded is the client a Store uses: rueidis's, with Do and DoMulti run within its inflight
// bound. Everything else is the client's own.
type bounded struct {
	rueidis.Client
	in *inflight
}

// Do runs cmd as the client's Do does, but returns by ctx's deadline whatever the client does. See
// inflight.
func (b *bounded) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return b.in.do(ctx, b.Client, cmd, nil).res
}

// DoMulti runs multi as the client's DoMulti does, but returns by ctx's deadline whatever the client
// does: then every result is ctx's error. See inflight.
func (b *bounded) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	if len(multi) == 0 {
		return nil
	}
	r := b.in.do(ctx, b.Client, rueidis.Completed{}, multi)
	if r.resps == nil {
		resps := make([]rueidis.RedisResult, len(multi))
		for i := range resps {
			resps[i] = r.res
		}
		return resps
	}
	return r.resps
}

// An inflight keeps a Store's commands in the client within maxInFlight. Each command in the client
// holds a token of sem until the client is done with it.
//
// While fewer than inlineMax tokens are held, a caller takes one and runs its command itself, with
// its own context, as without the bound: the hot path costs two channel operations. If its context
// ends first, the client gives the command up but may keep its place in the queue until the
// connection is dropped; the caller cannot know when, so the token is kept for hold, longer than
// the client takes to drop a connection that answers nothing, and then returned.
//
// Beyond inlineMax (many callers at once, or commands given up on during an outage) a caller waits
// for a token no longer than its context allows, then hands its command to a worker goroutine, which
// runs it with a deadlineCtx, so that the client never gives it up, and returns the token as soon as
// the client answers or fails it. The caller waits for that answer no longer than
// its context allows; a command it gave up on goes on holding its worker and its token. Workers are
// started as needed and stay, idle, until the Store is closed: at most as many as the most commands
// handed to workers at once.
type inflight struct {
	sem     chan struct{}               // one element per token held
	hold    time.Duration               // how long the token of a command given up on by its caller is kept
	release func()                      // returns one token, for time.AfterFunc
	work    chan *command               // unbuffered: a send reaches an idle worker
	quit    chan struct{}               // closed by stop: idle workers return
	calls   sync.Pool                   // of *command
	replies atomic.Uint64               // commands Redis answered to a caller still waiting (callCtx.late)
	lateAt  atomic.Int64                // when a call's timer last ran late, as time since the Store's epoch (callCtx.late)
	stall   func(ctx context.Context)   // tests only: runs before each command, as a descheduled caller
	grace   func(time.Duration, func()) // tests only: starts a verdict's grace (afterGrace), in place of time.AfterFunc
}

// afterGrace runs f on its own goroutine after d: the end of a late verdict's grace (JudgeLate).
func (in *inflight) afterGrace(d time.Duration, f func()) {
	if in.grace != nil {
		in.grace(d, f)
		return
	}
	time.AfterFunc(d, f)
}

// newInflight returns an inflight whose callers' abandoned commands keep their tokens for hold.
func newInflight(hold time.Duration) *inflight {
	in := &inflight{
		sem:  make(chan struct{}, maxInFlight),
		hold: hold,
		work: make(chan *command),
		quit: make(chan struct{}),
	}
	in.release = func() { <-in.sem }
	in.calls.New = func() any { return &command{in: in, done: make(chan struct{}, 1)} }
	return in
}

// abandonedHold returns how long the token of a command given up on by its caller is kept, for a
// client with opt: twice what rueidis takes at most to drop a connection that answers nothing, so
// that timers late on a loaded machine still leave a margin. rueidis looks at a connection once per
// keep-alive interval; the first time it has had no reply since the previous look, it sends a PING,
// and drops the connection if the PING has no answer within the write timeout: at most two
// keep-alive intervals and a write timeout after the command was sent (3s by default, so 6s).
//
// A server that goes on answering, but more than that far behind, is not dropped, and keeps such a
// command in the ring after its token is back: there the bound is exact only for the commands
// handed to workers.
func abandonedHold(opt rueidis.ClientOption) time.Duration {
	keepAlive := opt.Dialer.KeepAlive
	if keepAlive <= 0 {
		keepAlive = rueidis.DefaultTCPKeepAlive
	}
	return 2 * (2*keepAlive + opt.ConnWriteTimeout)
}

// A command is one call handed to a worker.
type command struct {
	in    *inflight
	ctx   deadlineCtx // the caller's deadline
	c     rueidis.Client
	one   rueidis.Completed
	multi []rueidis.Completed
	res   rueidis.RedisResult
	resps []rueidis.RedisResult
	state int32         // pending, answered or abandoned; guarded by mu
	mu    sync.Mutex    // orders the worker's answer against its caller giving up
	done  chan struct{} // signalled once answered, unless abandoned first
}

// command states.
const (
	pending int32 = iota
	answered
	abandoned
)

// A result is what do returns: res for Do, resps for DoMulti (nil if the call never ran or was
// given up on, res then saying why).
type result struct {
	res   rueidis.RedisResult
	resps []rueidis.RedisResult
}

// do runs one (multi nil) or multi on c within the bound and returns its result, or ctx's error once
// ctx is done before the client answered.
func (in *inflight) do(ctx context.Context, c rueidis.Client, one rueidis.Completed, multi []rueidis.Completed) result {
	if in.stall != nil {
		in.stall(ctx)
	}
	if err := ctx.Err(); err != nil {
		return result{res: rueidis.NewErrorResult(err)}
	}
	if len(in.sem) < inlineMax {
		select {
		case in.sem <- struct{}{}:
			return in.inline(ctx, c, one, multi)
		default:
		}
	}
	select {
	case in.sem <- struct{}{}:
	case <-ctx.Done():
		return result{res: rueidis.NewErrorResult(ctx.Err())}
	}
	cmd := in.calls.Get().(*command)
	cmd.c, cmd.one, cmd.multi, cmd.state = c, one, multi, pending
	cmd.ctx.deadline, cmd.ctx.ok = ctx.Deadline()
	select {
	case in.work <- cmd:
	default:
		go in.worker(cmd)
	}
	select {
	case <-cmd.done:
	case <-ctx.Done():
		cmd.mu.Lock()
		gaveUp := cmd.state == pending
		if gaveUp {
			cmd.state = abandoned // the worker recycles cmd
		}
		cmd.mu.Unlock()
		if gaveUp {
			return result{res: rueidis.NewErrorResult(ctx.Err())}
		}
		<-cmd.done // answered just now
	}
	r := result{res: cmd.res, resps: cmd.resps}
	if r.answered() {
		in.replies.Add(1) // reached its caller: as inline's
	}
	cmd.recycle()
	return r
}

// answered reports whether Redis answered r's command (a reply, or an error reply).
func (r *result) answered() bool {
	if r.resps == nil {
		return r.res.NonRedisError() == nil
	}
	for _, res := range r.resps {
		if res.NonRedisError() != nil {
			return false
		}
	}
	return true
}

// inline runs one or multi on c with ctx, holding a token taken by the caller, and returns the
// token when the client is done with the command: at once, unless ctx ended the call, when the
// client may still hold the command; then after in.hold.
func (in *inflight) inline(ctx context.Context, c rueidis.Client, one rueidis.Completed, multi []rueidis.Completed) result {
	var r result
	failed := false
	if multi != nil {
		r.resps = c.DoMulti(ctx, multi...)
		for _, res := range r.resps {
			failed = failed || res.NonRedisError() != nil
		}
	} else {
		r.res = c.Do(ctx, one)
		failed = r.res.NonRedisError() != nil
	}
	// A reply that reached its caller came before the caller's deadline, or while the caller had
	// not yet run to see its deadline pass: either way Redis answered in time for this process.
	switch {
	case !failed:
		in.replies.Add(1)
		<-in.sem
	case failed && ctx.Err() != nil:
		time.AfterFunc(in.hold, in.release) // allocates, on a failure only
	default:
		<-in.sem
	}
	return r
}

// worker runs cmd, then every command handed to it, until stop.
func (in *inflight) worker(cmd *command) {
	for {
		cmd.run()
		select {
		case cmd = <-in.work:
		case <-in.quit:
			return
		}
	}
}

// stop makes idle workers return, and busy ones once the client is done with their command: a Store
// stops its workers when it is closed, after which the client fails every command at once.
func (in *inflight) stop() { close(in.quit) }

// run runs cmd on its client with its deadlineCtx, returns its token, and hands the result to its
// caller, or recycles cmd if the caller gave up on it.
func (cmd *command) run() {
	if cmd.multi != nil {
		cmd.resps = cmd.c.DoMulti(&cmd.ctx, cmd.multi...)
	} else {
		cmd.res = cmd.c.Do(&cmd.ctx, cmd.one)
	}
	if cmd.answeredInTime() {
		cmd.in.replies.Add(1)
	}
	cmd.in.release()
	cmd.mu.Lock()
	wanted := cmd.state == pending
	cmd.state = answered
	cmd.mu.Unlock()
	if wanted {
		cmd.done <- struct{}{}
		return
	}
	cmd.recycle()
}

// answeredInTime reports whether Redis answered cmd, which has run, before its caller's deadline.
func (cmd *command) answeredInTime() bool {
	r := result{res: cmd.res, resps: cmd.resps}
	return cmd.ctx.Err() == nil && r.answered()
}

// recycle clears cmd and puts it back in its pool.
func (cmd *command) recycle() {
	cmd.c, cmd.one, cmd.multi, cmd.ctx = nil, rueidis.Completed{}, nil, deadlineCtx{}
	cmd.res, cmd.resps = rueidis.RedisResult{}, nil
	cmd.in.calls.Put(cmd)
}

// A deadlineCtx is the context a worker runs a command with: its caller's deadline, but a nil Done
// channel. rueidis gives a queued command up only when Done is closed, so with a deadlineCtx it
// waits for the answer, or for the connection to fail, and the worker knows when the command has
// left the queue. The deadline still bounds what rueidis bounds by it alone: dialling and the
// handshake of a new connection (which callers that join the dial wait for without looking at
// their own contexts), and a call on a connection not yet pipelining, which rueidis fails at the
// deadline by closing the connection. Err reports the deadline once it has passed, so that a
// command whose deadline passed before the worker took it up is not sent.
type deadlineCtx struct {
	deadline time.Time
	ok       bool // a deadline is set
}

// Deadline returns the caller's deadline. See context.Context.
func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, c.ok }

// Done returns nil: a deadlineCtx is never done. See context.Context.
func (c *deadlineCtx) Done() <-chan struct{} { return nil }

// Err returns context.DeadlineExceeded once the deadline has passed, else nil. See context.Context.
func (c *deadlineCtx) Err() error {
	if c.ok && !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Value returns nil: a deadlineCtx carries no values. See context.Context.
func (c *deadlineCtx) Value(any) any { return nil }
