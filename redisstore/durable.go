package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/validate"
	"github.com/redis/rueidis"
)

// errUndecided is the error of a replicated decision whose replicas did not confirm its write in
// time: the units stay consumed on the primary, and nothing is admitted that a failover can forget.
// It matches admit.ErrUnavailable; guard tells it from an outage (the primary answered).
var errUndecided = validate.ErrUndecided

// waitMargin is how long after its end a replicated decision's wait is given for Redis's answer
// before the client stops waiting itself: Redis may answer a timed-out WAIT up to a server cron
// tick late (100 ms at hz 10), and an undecided decision answers within its timeout and 50 ms.
const waitMargin = 20 * time.Millisecond

// replication returns the replicas a decision of rs must wait for and how long, the most any of
// its Requests asks (one wait covers the call), or 0 when none is replicated or every replicated
// Request is a peek, which writes nothing. A ReplicaTimeout of 0 is commandTimeout.
func replication(rs []admit.Request, commandTimeout time.Duration) (int64, time.Duration) {
	var n int64
	var wait time.Duration
	for i := range rs {
		lim := &rs[i].Limit
		if lim.Replicas == 0 || rs[i].Cost == 0 {
			continue
		}
		n = max(n, int64(lim.Replicas))
		t := lim.ReplicaTimeout
		if t == 0 {
			t = commandTimeout
		}
		wait = max(wait, t)
	}
	return n, wait
}

// takeReplicated is take for a call that must wait for n replicas (docs/running-redis.md,
// "Durability"). The script and the WAIT run on one dedicated connection of the client's pool, not
// on the pipelined connections the other callers share: WAIT blocks the connection it is sent on,
// and on a shared one every command queued behind it would wait as long. WAIT counts the replicas
// that acknowledged this connection's writes, the script's among them. A rejection writes nothing
// and waits for nothing; an admission the replicas do not confirm within wait is undecided, an
// error matching admit.ErrUnavailable.
//
// The script is bounded by the command timeout, as any call, and dialing a new dedicated
// connection counts within the call's deadline (dedicate). The wait ends wait after the call
// began (or at the caller's deadline if sooner), on the client's own timer, waitMargin later:
// Redis ends a WAIT only at its timeout's next server cron tick, every 1/hz s, up to 100 ms late
// at the default hz 10 (docs/running-redis.md, "The timeout"). A WAIT that fails or is abandoned
// closes its connection, so that its late reply is never read as the next command's.
func (s *Store) takeReplicated(parent context.Context, rs []admit.Request, ds []admit.Decision, tokens []uint64, keyBuf, argsBuf []string, n int64, wait time.Duration) (bool, error) {
	end := waitEnd(parent, wait)
	ctx, bounded := s.bound(parent)
	defer bounded.release()
	c, err := s.conn(ctx)
	if err != nil {
		return false, fmt.Errorf("redisstore: take: %w", err)
	}
	dc, release, err := s.dedicate(ctx, c)
	if err != nil {
		return false, fmt.Errorf("redisstore: take: %w", err)
	}
	defer release()
	keys, args := appendTakeArgs(keyBuf, argsBuf, rs, s.tokens, tokens)
	reply, err := runOn(ctx, dc, takeScript, keys, args)
	if err != nil {
		return false, fmt.Errorf("redisstore: take: %w", err)
	}
	allowed, err := parseTake(reply, rs, ds, tokens)
	if err != nil || !allowed {
		if err != nil {
			err = fmt.Errorf("redisstore: take: %w", err)
		}
		return allowed, err
	}
	if err := s.waitReplicas(parent, dc, n, wait, end); err != nil {
		for i := range ds { // undecided: nothing is admitted, no lease is handed out
			ds[i].Allowed, ds[i].Token = false, 0
		}
		return false, err
	}
	return true, nil
}

// waitEnd returns when a wait for replicas of wait, starting now, ends: wait from now, or ctx's
// deadline if sooner.
func waitEnd(ctx context.Context, wait time.Duration) time.Time {
	end := time.Now().Add(wait)
	if d, ok := ctx.Deadline(); ok && d.Before(end) {
		end = d
	}
	return end
}

// waitReplicas sends WAIT n on dc for what is left until end (at least a millisecond: WAIT 0
// would block for ever), and waits for its reply on the client's own timer until waitMargin after
// end; none is sent when no time is left (a slow dial or script). It returns an error matching
// errUndecided, naming wait, the wait asked, when fewer than n replicas confirmed. A WAIT that
// fails or is abandoned closes dc, so that its late reply is never read as the next command's.
func (s *Store) waitReplicas(parent context.Context, dc rueidis.DedicatedClient, n int64, wait time.Duration, end time.Time) error {
	ctx, cancel := context.WithDeadline(parent, end.Add(waitMargin))
	defer cancel()
	var got int64
	err := ctx.Err()
	if err == nil {
		res := dc.Do(ctx, dc.B().Wait().Numreplicas(n).Timeout(max(time.Until(end).Milliseconds(), 1)).Build())
		if res.NonRedisError() != nil {
			dc.Close() // its WAIT may still be answered: the connection is not given back
		}
		got, err = res.AsInt64()
	}
	switch {
	case err != nil:
		return fmt.Errorf("redisstore: take: %w: WAIT for %d replicas not answered within %v: %w", errUndecided, n, wait, err)
	case got < n:
		return fmt.Errorf("redisstore: take: %w: %d of %d replicas confirmed within %v", errUndecided, got, n, wait)
	}
	return nil
}

// A dedication is a dedicated connection and the func that gives it back.
type dedication struct {
	dc      rueidis.DedicatedClient
	release func()
}

// dedicate takes a place in s.dedicated, waiting for one no longer than ctx, and returns a
// dedicated connection of c, and the func that gives it back and frees the place. rueidis hands
// out a dedicated connection without looking at a context, waiting for one when its pool is
// spent: the Store's own bound keeps it from that. Its Dedicate takes no context and dials a
// connection when its pool has none idle, bounded only by the dial timeout: it runs on its own
// goroutine, waited for no longer than ctx, so that the dial counts within the call's deadline.
// A connection that comes after ctx ended goes back to the pool, for the next call.
func (s *Store) dedicate(ctx context.Context, c rueidis.Client) (rueidis.DedicatedClient, func(), error) {
	select {
	case s.dedicated <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, unavailable(fmt.Errorf("no dedicated connection free for a replicated decision: %w", ctx.Err()))
	}
	got := make(chan dedication, 1)
	go func() {
		dc, release := c.Dedicate()
		got <- dedication{dc, release}
	}()
	select {
	case d := <-got:
		return d.dc, func() { d.release(); <-s.dedicated }, nil
	case <-ctx.Done():
		go func() {
			d := <-got
			d.release()
			<-s.dedicated
		}()
		return nil, nil, unavailable(fmt.Errorf("no dedicated connection for a replicated decision within its deadline: %w", ctx.Err()))
	}
}
