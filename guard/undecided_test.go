package guard_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/guard"
	"github.com/admit-dev/admit/internal/redistest"
)

// stoppedReplica starts a primary and one replica of it, waits until the primary lists it, and
// stops it (SIGSTOP): a replicated decision on the primary is then undecided.
func stoppedReplica(t *testing.T) *redistest.Server {
	t.Helper()
	primary := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port()), "--repl-diskless-sync-delay", "0")
	deadline := time.Now().Add(time.Minute)
	for {
		info, _ := primary.Do(t, "INFO", "replication").ToString()
		if strings.Contains(info, "state=online") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no online replica within a minute:\n%s", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	replica.Freeze(t)
	t.Cleanup(func() { replica.Thaw(t) })
	return primary
}

var replicated = admit.Limit{Name: "pay", Algorithm: admit.FixedWindow, Rate: 100, Period: time.Minute, Replicas: 1, ReplicaTimeout: 50 * time.Millisecond}

// An undecided replicated decision is no outage: the primary answered. It does not trip the
// Breaker, so the async policies on the same Store go on being decided.
func TestBreakerUndecidedDoesNotTrip(t *testing.T) {
	primary := stoppedReplica(t)
	b := guard.NewBreaker(newRedisStore(t, primary.URL(), 2*time.Second), guard.BreakerOptions{Failures: 2, Now: newClock().Now})
	for i := range 5 {
		_, err := b.Take(t.Context(), admit.Request{Key: "rl:pay:v1:{a}", Limit: replicated, Cost: 1})
		if !errors.Is(err, admit.ErrUnavailable) || !strings.Contains(err.Error(), "undecided") {
			t.Fatalf("replicated take %d with the replica stopped: %v; want undecided", i, err)
		}
	}
	wantState(t, b, guard.BreakerClosed)
	if d, err := b.Take(t.Context(), req("async")); err != nil || !d.Allowed {
		t.Errorf("async take after the undecided ones: %+v, %v; want admitted", d, err)
	}
}

// An undecided replicated decision never fails open: nothing is admitted that the replicas did not
// confirm, not even by the local limiter.
func TestFailOpenUndecidedStaysClosed(t *testing.T) {
	primary := stoppedReplica(t)
	f := newFailOpen(t, openRedis(t, primary.URL()), guard.FailOpenOptions{Local: halfOf})
	d, err := f.Take(t.Context(), admit.Request{Key: "rl:pay:v1:{b}", Limit: replicated, Cost: 1})
	if !errors.Is(err, admit.ErrUnavailable) || !strings.Contains(err.Error(), "undecided") || d.Allowed || d.Degraded {
		t.Errorf("replicated take with the replica stopped, failing open: %+v, %v; want undecided, not admitted locally", d, err)
	}
}
