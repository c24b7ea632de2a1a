package redisstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/replsession"
	"github.com/admit-dev/admit/internal/slot"
	"github.com/redis/rueidis"
)

// takeInSession is takeReplicated for a call of a request that waits once for all its calls
// (replsession): the script runs on the session's dedicated connection to the keys' primary, kept
// in the session from call to call, and the WAIT is deferred to the session's Wait. A rejection
// defers nothing. A session that ended already is no session: the call waits on its own.
func (s *Store) takeInSession(parent context.Context, sess *replsession.Session, rs []admit.Request, ds []admit.Decision, tokens []uint64, keyBuf, argsBuf []string, n int64, wait time.Duration) (bool, error) {
	joined, ok := sess.Join(s, func() replsession.Pending { return &sessionWait{s: s} })
	if !ok {
		return s.takeReplicated(parent, rs, ds, tokens, keyBuf, argsBuf, n, wait)
	}
	p := joined.(*sessionWait)
	ctx, bounded := s.bound(parent)
	defer bounded.release()
	c, err := s.conn(ctx)
	if err != nil {
		return false, fmt.Errorf("redisstore: take: %w", err)
	}
	sc, err := p.connFor(ctx, c, rs[0].Key)
	if err != nil {
		return false, fmt.Errorf("redisstore: take: %w", err)
	}
	keys, args := appendTakeArgs(keyBuf, argsBuf, rs, s.tokens, tokens)
	reply, err := runOn(ctx, sc.dc, takeScript, keys, args)
	if err != nil {
		return false, fmt.Errorf("redisstore: take: %w", err)
	}
	allowed, err := parseTake(reply, rs, ds, tokens)
	if err != nil {
		return false, fmt.Errorf("redisstore: take: %w", err)
	}
	if allowed {
		p.wrote(sc, n, wait)
	}
	return allowed, nil
}

// A sessionWait is a Store's part of a replsession.Session: its dedicated connections, one per
// primary (on a cluster, one per hash slot: rueidis binds a dedicated cluster connection to the
// slot of its first command), and the most replicas and the longest wait its admissions asked.
type sessionWait struct {
	s     *Store
	mu    sync.Mutex
	conns []*sessionConn
	n     int64
	wait  time.Duration
}

// A sessionConn is a dedicated connection of a session, the slot it serves on a cluster, and
// whether an admission was written on it.
type sessionConn struct {
	dc      rueidis.DedicatedClient
	release func()
	slot    uint16
	written bool
}

// connFor returns the session's dedicated connection for key, dedicating one within ctx on its
// first use, bounded as takeReplicated's by s.dedicated.
func (p *sessionWait) connFor(ctx context.Context, c rueidis.Client, key string) (*sessionConn, error) {
	var sl uint16
	if c.Mode() == rueidis.ClientModeCluster {
		sl = slot.Of(key)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, sc := range p.conns {
		if sc.slot == sl {
			return sc, nil
		}
	}
	dc, release, err := p.s.dedicate(ctx, c)
	if err != nil {
		return nil, err
	}
	sc := &sessionConn{dc: dc, release: release, slot: sl}
	p.conns = append(p.conns, sc)
	return sc, nil
}

// wrote records an admission written on sc that waits for n replicas up to wait.
func (p *sessionWait) wrote(sc *sessionConn, n int64, wait time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sc.written = true
	p.n, p.wait = max(p.n, n), max(p.wait, wait)
}

// Wait sends one WAIT on each connection an admission was written on, in parallel when several,
// for the most replicas and the longest wait any admission asked, counted from now (or to ctx's
// deadline if sooner) and bounded on the client's own timer as takeReplicated's, and gives the
// connections back.
// WAIT counts the replicas that acknowledged the connection's writes, every admission of the
// session on that primary among them. An error matches errUndecided.
func (p *sessionWait) Wait(ctx context.Context) error {
	defer p.Release()
	p.mu.Lock()
	var written []*sessionConn
	for _, sc := range p.conns {
		if sc.written {
			written = append(written, sc)
		}
	}
	n, wait := p.n, p.wait
	p.mu.Unlock()
	end := waitEnd(ctx, wait) // the wait is counted from the end of the session's calls
	return replsession.All(len(written), func(i int) error { return p.s.waitReplicas(ctx, written[i].dc, n, wait, end) })
}

// Release gives the session's connections back, without waiting.
func (p *sessionWait) Release() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, sc := range conns {
		sc.release()
	}
}
