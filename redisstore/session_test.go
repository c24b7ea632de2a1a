package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/internal/replsession"
)

// waits reads how many WAIT commands srv has run.
func waits(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	return commandCalls(t, srv, "wait")
}

// Several takes of one replsession: each runs its script on the session's one dedicated connection
// and none waits; the session's Wait sends one WAIT, after which the replica holds every take's
// write, not only the last's. A rejection defers nothing, a session of rejections waits for
// nothing, and every dedicated connection is given back. A take after the session ended waits on
// its own.
func TestSessionWaitsOnce(t *testing.T) {
	primary, replicas := redistest.StartReplicated(t, 1)
	s, err := New(Config{URL: primary.URL(), CommandTimeout: patientCommandTimeout, DialTimeout: patientCommandTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	repl := replicatedLimit(2, 1, patientCommandTimeout)
	keys := []string{newKey(t), newKey(t), newKey(t)}

	for round := 1; round <= 2; round++ {
		ctx, sess := replsession.New(context.Background())
		before := waits(t, primary)
		for i, key := range keys {
			if d, err := s.Take(ctx, admit.Request{Key: key, Limit: repl, Cost: 1}); err != nil || !d.Allowed {
				t.Fatalf("round %d, take %d in a session: %+v, %v; want admitted", round, i, d, err)
			}
		}
		if got := waits(t, primary) - before; got != 0 {
			t.Errorf("round %d: %d WAITs before the session's Wait, want 0", round, got)
		}
		if got := len(s.dedicated); got != 1 {
			t.Errorf("round %d: %d dedicated connections held by the session of 3 takes, want 1", round, got)
		}
		if err := sess.Wait(ctx); err != nil {
			t.Fatalf("round %d: the session's Wait: %v", round, err)
		}
		if got := waits(t, primary) - before; got != 1 {
			t.Errorf("round %d: %d WAITs for a session of 3 admitted takes, want 1", round, got)
		}
		for i, key := range keys {
			if n := counter(t, replicas[0], key); n != int64(round) {
				t.Errorf("round %d: the replica counts %d on take %d's key after the Wait, want %d", round, n, i, round)
			}
		}
		if got := len(s.dedicated); got != 0 {
			t.Errorf("round %d: %d dedicated connections held after the Wait, want 0", round, got)
		}
	}

	// The keys are full: a session of rejections and a peek waits for nothing.
	ctx, sess := replsession.New(context.Background())
	before := waits(t, primary)
	for i, key := range keys {
		if d, err := s.Take(ctx, admit.Request{Key: key, Limit: repl, Cost: 1}); err != nil || d.Allowed {
			t.Fatalf("rejection %d in a session: %+v, %v; want rejected, no error", i, d, err)
		}
	}
	if _, err := s.Take(ctx, admit.Request{Key: keys[0], Limit: repl, Cost: 0}); err != nil {
		t.Fatalf("peek in a session: %v", err)
	}
	if err := sess.Wait(ctx); err != nil {
		t.Fatalf("the Wait of a session of rejections: %v", err)
	}
	if got := waits(t, primary) - before; got != 0 {
		t.Errorf("%d WAITs for a session of rejections and a peek, want 0", got)
	}
	if got := len(s.dedicated); got != 0 {
		t.Errorf("%d dedicated connections held after a session of rejections, want 0", got)
	}

	// The session ended: a take with its context waits on its own, at once.
	before = waits(t, primary)
	if d, err := s.Take(ctx, admit.Request{Key: newKey(t), Limit: repl, Cost: 1}); err != nil || !d.Allowed {
		t.Fatalf("take after the session ended: %+v, %v; want admitted", d, err)
	}
	if got := waits(t, primary) - before; got != 1 {
		t.Errorf("%d WAITs for a take after its session ended, want 1 (its own)", got)
	}

	// A session aborted without its Wait gives its connection back and waits for nothing.
	ctx, sess = replsession.New(context.Background())
	before = waits(t, primary)
	if d, err := s.Take(ctx, admit.Request{Key: newKey(t), Limit: repl, Cost: 1}); err != nil || !d.Allowed {
		t.Fatalf("take in a session to release: %+v, %v; want admitted", d, err)
	}
	sess.Abort(errors.New("another call failed"))
	if got := waits(t, primary) - before; got != 0 {
		t.Errorf("%d WAITs for an aborted session, want 0", got)
	}
	if got := len(s.dedicated); got != 0 {
		t.Errorf("%d dedicated connections held after Abort, want 0", got)
	}
}

// With the replica stopped, a session's admissions answer admitted (their wait deferred), and the
// session's one Wait is undecided: an error matching errUndecided and admit.ErrUnavailable.
func TestSessionWaitUndecided(t *testing.T) {
	primary, replicas := redistest.StartReplicated(t, 1)
	s, err := New(Config{URL: primary.URL(), CommandTimeout: patientCommandTimeout, DialTimeout: patientCommandTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	replicas[0].Freeze(t)
	t.Cleanup(func() { replicas[0].Thaw(t) })
	repl := replicatedLimit(10, 1, 200*time.Millisecond)
	ctx, sess := replsession.New(context.Background())
	keys := []string{newKey(t), newKey(t)}
	for i, key := range keys {
		if d, err := s.Take(ctx, admit.Request{Key: key, Limit: repl, Cost: 1}); err != nil || !d.Allowed {
			t.Fatalf("take %d in a session, the replica stopped: %+v, %v; want admitted, its wait deferred", i, d, err)
		}
	}
	before := waits(t, primary)
	err = sess.Wait(ctx)
	if !errors.Is(err, errUndecided) || !errors.Is(err, admit.ErrUnavailable) {
		t.Fatalf("the session's Wait with the replica stopped: %v; want undecided", err)
	}
	if got := waits(t, primary) - before; got != 1 {
		t.Errorf("%d WAITs, want 1", got)
	}
	for i, key := range keys {
		if n := counter(t, primary, key); n != 1 {
			t.Errorf("take %d: the primary counts %d, want 1 (an undecided unit stays consumed)", i, n)
		}
	}
	if got := len(s.dedicated); got != 0 {
		t.Errorf("%d dedicated connections held after the Wait, want 0", got)
	}
}

// On a cluster rueidis binds a dedicated connection to the hash slot of its first command: a
// session keeps one per slot it writes to, and its Wait sends one WAIT on each, in parallel, so a
// master whose slots the request wrote twice runs two. Each master's replica holds the keys once
// the Wait returns (SCAN: a cluster replica redirects a GET), and the WAITs of two masters block
// at the same time.
func TestSessionWaitsPerSlotOnACluster(t *testing.T) {
	c := redistest.StartCluster(t)
	s := openPatient(t, c.URL())
	masters := c.Masters(t)
	if len(masters) != 3 {
		t.Fatalf("%d masters, want 3", len(masters))
	}
	a := keysOn(t, c, masters[0], 2)
	for c.Slot(t, a[0]) == c.Slot(t, a[1]) {
		a[1] = keysOn(t, c, masters[0], 1)[0]
	}
	keys := append(a, keysOn(t, c, masters[1], 1)...)
	repl := replicatedLimit(10, 1, patientCommandTimeout)
	before := make([]int64, len(masters))
	for i, m := range masters {
		before[i] = m.CommandCalls(t, "wait")
	}
	ctx, sess := replsession.New(context.Background())
	for i, key := range keys {
		if d, err := s.Take(ctx, admit.Request{Key: key, Limit: repl, Cost: 1}); err != nil || !d.Allowed {
			t.Fatalf("take %d in a session on a cluster: %+v, %v; want admitted", i, d, err)
		}
	}
	if err := sess.Wait(ctx); err != nil {
		t.Fatalf("the session's Wait on a cluster: %v", err)
	}
	for i, want := range []int64{2, 1, 0} {
		if got := masters[i].CommandCalls(t, "wait") - before[i]; got != want {
			t.Errorf("master %d: %d WAITs, want %d (one per slot written)", i, got, want)
		}
	}
	for i, key := range keys {
		m := c.MasterOfKey(t, key)
		for _, r := range c.ReplicasOf(t, m) {
			if !scanFinds(t, r, key) {
				t.Errorf("take %d: its master's replica %s has no key %s after the Wait", i, r.Addr(), key)
			}
		}
	}
	if got := len(s.dedicated); got != 0 {
		t.Errorf("%d dedicated connections held after the Wait, want 0", got)
	}

	// The WAITs of two masters run at once: with both masters' replicas stopped, each master has a
	// client blocked in WAIT at the same time; once the replicas resume, the Wait is confirmed.
	var frozen []*redistest.Server
	for _, m := range masters[:2] {
		frozen = append(frozen, c.ReplicasOf(t, m)...)
	}
	for _, r := range frozen {
		r.Freeze(t)
		t.Cleanup(func() { r.Thaw(t) })
	}
	ctx, sess = replsession.New(context.Background())
	long := replicatedLimit(10, 1, 20*time.Second)
	for i, key := range []string{keysOn(t, c, masters[0], 1)[0], keysOn(t, c, masters[1], 1)[0]} {
		if d, err := s.Take(ctx, admit.Request{Key: key, Limit: long, Cost: 1}); err != nil || !d.Allowed {
			t.Fatalf("take %d in a session, the replicas stopped: %+v, %v; want admitted, its wait deferred", i, d, err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- sess.Wait(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for blockedClients(t, masters[0]) == 0 || blockedClients(t, masters[1]) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("within 30s the two masters never had a client blocked in WAIT at once (%d and %d): the WAITs did not run in parallel", blockedClients(t, masters[0]), blockedClients(t, masters[1]))
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, r := range frozen {
		r.Thaw(t)
	}
	if err := <-done; err != nil {
		t.Errorf("the session's Wait, the replicas resumed: %v; want confirmed", err)
	}
}

// scanFinds reports whether SCAN of srv finds key.
func scanFinds(t *testing.T, srv *redistest.Server, key string) bool {
	t.Helper()
	for cursor := "0"; ; {
		reply, err := srv.Do(t, "SCAN", cursor, "MATCH", key, "COUNT", "1000").ToArray()
		if err != nil || len(reply) != 2 {
			t.Fatalf("SCAN on %s: %v", srv.Addr(), err)
		}
		found, _ := reply[1].AsStrSlice()
		if len(found) > 0 {
			return true
		}
		if cursor, _ = reply[0].ToString(); cursor == "0" {
			return false
		}
	}
}
