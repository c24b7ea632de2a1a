package service_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/service"
)

// count reads the counter of a fixed window's key on srv: 0 when it holds none.
func count(t *testing.T, srv *redistest.Server, key string) int64 {
	t.Helper()
	v, err := srv.Do(t, "GET", key).ToString()
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("counter of %s: %q", key, v)
	}
	return n
}

// Issue 28, "several policies in one call: one wait covers the call". A request of three
// replicated Items in three hash slots is three TakeAll calls, Separately (an Envoy domain that is
// not atomic) and BySlot alike, and one WAIT on the primary: once it returns, the replica holds
// every Item's unit. Rejections wait for nothing. With the replica stopped (SIGSTOP) the whole
// request is undecided, an error matching admit.ErrUnavailable with nothing admitted, its units
// consumed on the primary; a request of async Items in the same slots carries on without a wait.
func TestReplicatedRequestWaitsOnce(t *testing.T) {
	primary, replicas := redistest.StartReplicated(t, 1)
	replica := replicas[0]
	redis, err := redisstore.New(redisstore.Config{URL: primary.URL(), CommandTimeout: 2 * time.Second, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { redis.Close() })
	store := &recordingStore{Store: redis}
	keys, err := admit.NewKeyBuilder([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	s, err := service.New(store, keys, &policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	// A patient timeout while the replica runs: on a loaded machine it may take long to acknowledge.
	// The timeout is not in the key: the stalled requests below count on the same keys.
	const limit = 3
	patient := admit.Limit{Name: "payment", Algorithm: admit.FixedWindow, Rate: limit, Period: time.Hour, Replicas: 1, ReplicaTimeout: 10 * time.Second}
	async := admit.Limit{Name: "api", Algorithm: admit.FixedWindow, Rate: 1000, Period: time.Hour}
	items := func(lim admit.Limit, g service.Grouping) []service.Item {
		its := make([]service.Item, 3)
		for i := range its {
			its[i] = service.Item{Limit: lim, Version: "1", Subject: admit.Subject{ID: "alice", Slot: fmt.Sprintf("%d-slot-%d", g, i)}, Cost: 1}
		}
		return its
	}
	keyOf := func(it service.Item) string {
		k, err := keys.Key(it.Limit, it.Version, it.Subject)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	// decide decides its, checking it made len(its) TakeAll calls, and returns the WAITs it sent.
	decide := func(its []service.Item, ds []admit.Decision, g service.Grouping) (int64, error) {
		t.Helper()
		waits := primary.CommandCalls(t, "wait")
		store.mu.Lock()
		calls := len(store.calls)
		store.mu.Unlock()
		err := s.DecideItems(ctx, its, ds, g)
		store.mu.Lock()
		calls = len(store.calls) - calls
		store.mu.Unlock()
		if calls != len(its) {
			t.Fatalf("grouping %d: %d TakeAll calls for %d Items in as many slots, want %d", g, calls, len(its), len(its))
		}
		return primary.CommandCalls(t, "wait") - waits, err
	}

	for _, g := range []service.Grouping{service.Separately, service.BySlot} {
		repl := items(patient, g)
		ds := make([]admit.Decision, len(repl))
		for round := 1; round <= limit; round++ {
			waits, err := decide(repl, ds, g)
			if err != nil {
				t.Fatalf("grouping %d, request %d of 3 replicated Items: %v", g, round, err)
			}
			for i, d := range ds {
				if !d.Allowed {
					t.Errorf("grouping %d, request %d: Item %d not allowed: %+v", g, round, i, d)
				}
			}
			if waits != 1 {
				t.Errorf("grouping %d, request %d of 3 replicated Items in 3 slots: %d WAITs on the primary, want 1", g, round, waits)
			}
			for i, it := range repl {
				if n := count(t, replica, keyOf(it)); n != int64(round) {
					t.Errorf("grouping %d, request %d: the replica counts %d for Item %d once the request answered, want %d", g, round, n, i, round)
				}
			}
		}
		// Each key is full: three rejections, no wait.
		waits, err := decide(repl, ds, g)
		if err != nil || waits != 0 {
			t.Errorf("grouping %d, a request of 3 rejections: %v, %d WAITs; want no error, 0 WAITs", g, err, waits)
		}
		for i, d := range ds {
			if d.Allowed {
				t.Errorf("grouping %d: rejected Item %d allowed: %+v", g, i, d)
			}
		}
	}

	replica.Freeze(t)
	t.Cleanup(func() { replica.Thaw(t) })
	stalled := patient
	stalled.Rate, stalled.ReplicaTimeout = 100, 300*time.Millisecond
	for _, g := range []service.Grouping{service.Separately, service.BySlot} {
		// An async Item in a slot of its own rides along, its unit counted as any async one's.
		mixed := append(items(stalled, g), service.Item{Limit: async, Version: "1", Subject: admit.Subject{ID: "bob", Slot: fmt.Sprintf("%d-slot-async", g)}, Cost: 1})
		ds := make([]admit.Decision, len(mixed))
		before := make([]int64, len(mixed))
		for i, it := range mixed {
			before[i] = count(t, primary, keyOf(it))
		}
		begin := time.Now()
		waits, err := decide(mixed, ds, g)
		elapsed := time.Since(begin)
		// Redis answers the timed-out WAIT "0 of 1", or, a server cron tick late, after the Store's
		// own timer has ended the wait: either is undecided.
		if !errors.Is(err, admit.ErrUnavailable) || !strings.Contains(err.Error(), "undecided") {
			t.Fatalf("grouping %d, the replica stopped: %v; want undecided (ErrUnavailable)", g, err)
		}
		t.Logf("grouping %d, %d Items, the replica stopped: undecided after %v (timeout 300ms): %v", g, len(mixed), elapsed.Round(time.Millisecond), err)
		if waits != 1 {
			t.Errorf("grouping %d, the replica stopped: %d WAITs, want 1", g, waits)
		}
		for i, d := range ds {
			if d.Allowed {
				t.Errorf("grouping %d, the replica stopped: Item %d admitted: %+v", g, i, d)
			}
		}
		for i, it := range mixed {
			if n := count(t, primary, keyOf(it)); n != before[i]+1 {
				t.Errorf("grouping %d, the replica stopped: Item %d counts %d on the primary, want %d (its unit consumed)", g, i, n, before[i]+1)
			}
		}
		// Async Items alone, the same slots: decided, no wait.
		plain := items(async, g)
		waits, err = decide(plain, make([]admit.Decision, len(plain)), g)
		if err != nil || waits != 0 {
			t.Errorf("grouping %d, async Items with the replica stopped: %v, %d WAITs; want decided, 0 WAITs", g, err, waits)
		}
	}
}
