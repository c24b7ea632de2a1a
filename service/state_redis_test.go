package service_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/service"
	"github.com/redis/rueidis"
)

// everyAlgorithm has a policy of each algorithm, with windows long enough that no key expires
// during a test; the concurrency policy has a tier of short leases, on the policy's key.
const everyAlgorithm = `
policies:
  - name: fixed
    algorithm: fixed_window
    limit: 2
    window: 1h
  - name: aligned
    algorithm: fixed_window
    aligned: true
    limit: 5
    window: 1h
  - name: sliding
    algorithm: sliding_window
    limit: 5
    window: 1h
  - name: log
    algorithm: sliding_log
    limit: 5
    window: 1h
  - name: bucket
    algorithm: gcra
    limit: 5
    window: 1h
  - name: inflight
    algorithm: concurrency
    limit: 5
    lease_ttl: 1h
    tiers:
      short:
        lease_ttl: 50ms
`

// TestStateWritesNothingToRedis checks that Service.State is a read on Redis for every algorithm:
// no keyspace event, every key's DUMP unchanged and no expiry extended, on the states a peek might
// be tempted to tidy — a spent fixed window, a sliding window whose count belongs to the previous
// window, a sliding log holding entries that left its window, and leases that expired beside a live
// one — as well as fresh and partly used keys.
func TestStateWritesNothingToRedis(t *testing.T) {
	srv := redistest.Start(t, "--notify-keyspace-events", "KEA")
	store, err := redisstore.New(redisstore.Config{URL: srv.URL(), CommandTimeout: 2 * time.Second, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	s := newService(t, store, everyAlgorithm)
	cfg := s.Config()
	alice, bob := admit.Subject{ID: "alice"}, admit.Subject{ID: "bob"}

	// alice: two units under every policy (the fixed window spent), one lease of each TTL.
	for range 2 {
		if _, err := s.Check(t.Context(), service.Check{Policies: []string{"fixed", "aligned", "sliding", "log", "bucket", "inflight"}, Subject: alice, Cost: 1}); err != nil {
			t.Fatal(err)
		}
	}
	inflight, _ := cfg.Policy("inflight")
	short, _ := inflight.LimitFor("short")
	if d, err := store.Take(t.Context(), admit.Request{Key: stateKey(t, short, alice), Limit: short, Cost: 1}); err != nil || !d.Allowed {
		t.Fatalf("a short lease = %+v, %v", d, err)
	}
	// bob: the states written by hand, at Redis's time.
	now := redisNow(t, srv) // µs
	hour := time.Hour.Microseconds()
	prevStart := (now - now%hour - hour) / 1000 // ms: the window before the current one
	keySliding, keyLog, keyInflight := stateKey(t, limitOf(t, s, "sliding"), bob), stateKey(t, limitOf(t, s, "log"), bob), stateKey(t, inflight.Limit, bob)
	for _, cmd := range [][]string{
		{"HSET", keySliding, "start", itoa(prevStart), "prev", "1", "curr", "3"},
		{"PEXPIREAT", keySliding, itoa(prevStart + 2*time.Hour.Milliseconds())},
		{"ZADD", keyLog, itoa(now - 2*hour), itoa(now-2*hour) + ":1", itoa(now - 60e6), itoa(now-60e6) + ":1"},
		{"PEXPIREAT", keyLog, itoa((now-60e6)/1000 + time.Hour.Milliseconds())},
		{"ZADD", keyInflight, itoa(now - 1e6), "7", itoa(now + hour), "8"},
		{"PEXPIREAT", keyInflight, itoa((now + hour) / 1000)},
	} {
		srv.Do(t, cmd...)
	}
	time.Sleep(100 * time.Millisecond) // alice's short lease expires; every key lives on

	keys, err := srv.Do(t, "KEYS", "rl:*").AsStrSlice()
	if err != nil || len(keys) != 9 {
		t.Fatalf("KEYS rl:* = %q, %v; want 9 keys (6 of alice's, 3 of bob's)", keys, err)
	}
	before := snapshot(t, srv, keys)
	events := watchEvents(t, srv)
	for _, q := range []service.StateQuery{
		{Subject: alice}, {Subject: bob}, {Subject: admit.Subject{ID: "carol"}},
		{Subject: alice, Policy: "inflight", Tier: "short"}, {Subject: bob, Policy: "inflight", Tier: "short"},
	} {
		states, err := s.State(t.Context(), q)
		if err != nil {
			t.Fatalf("State(%+v): %v", q, err)
		}
		for _, st := range states {
			t.Logf("%s %s: %+v", q.Subject.ID, st.Decision.Limit.Name, st.Decision)
		}
	}
	if got := events.until(t); len(got) != 0 {
		t.Errorf("State caused keyspace events %q; want none", got)
	}
	after := snapshot(t, srv, keys)
	for i, k := range keys {
		if after[i].dump != before[i].dump {
			t.Errorf("DUMP of %s changed", k)
		}
		if after[i].pexpiretime != before[i].pexpiretime {
			t.Errorf("PEXPIRETIME of %s moved from %d to %d", k, before[i].pexpiretime, after[i].pexpiretime)
		}
	}
	if n, err := srv.Do(t, "DBSIZE").AsInt64(); err != nil || n != int64(len(keys))+2 { // and the markers
		t.Errorf("DBSIZE = %d, %v; want %d", n, err, len(keys)+2)
	}

	// What the peeks read: bob's states as written, alice's as counted. The previous window's 3
	// weigh by the part of it the sliding window still overlaps: 1 to 3 of them, by the time.
	want := map[string][2]int64{"sliding": {2, 4}, "log": {4, 4}, "inflight": {4, 4}} // 5 − 1 in the log's window, 5 − 1 live lease
	states, err := s.State(t.Context(), service.StateQuery{Subject: bob})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range states {
		if r, ok := want[st.Decision.Limit.Name]; ok && (st.Decision.Remaining < r[0] || st.Decision.Remaining > r[1]) {
			t.Errorf("bob under %s: %d remaining; want %d to %d", st.Decision.Limit.Name, st.Decision.Remaining, r[0], r[1])
		}
	}
	states, err = s.State(t.Context(), service.StateQuery{Subject: alice, Policy: "inflight", Tier: "short"})
	if err != nil || states[0].Decision.Remaining != 3 { // 5 − 2 live leases: the short one expired
		t.Errorf("alice under inflight, tier short: %+v, %v; want 3 remaining", states, err)
	}
}

// limitOf returns the Limit of the policy name of s's configuration.
func limitOf(t *testing.T, s *service.Service, name string) admit.Limit {
	t.Helper()
	p, ok := s.Config().Policy(name)
	if !ok {
		t.Fatalf("no policy %q", name)
	}
	return p.Limit
}

// stateKey returns the key of subject under lim, in the version of everyAlgorithm's policies (the
// default, "1"), with newService's secret.
func stateKey(t *testing.T, lim admit.Limit, subject admit.Subject) string {
	t.Helper()
	keys, err := admit.NewKeyBuilder([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	k, err := keys.Key(lim, "1", subject)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// redisNow returns Redis's clock in Unix microseconds.
func redisNow(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	tm, err := srv.Do(t, "TIME").AsStrSlice()
	if err != nil || len(tm) != 2 {
		t.Fatalf("TIME = %q, %v", tm, err)
	}
	sec, err1 := strconv.ParseInt(tm[0], 10, 64)
	usec, err2 := strconv.ParseInt(tm[1], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("TIME = %q", tm)
	}
	return sec*1e6 + usec
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A keyState is what a test compares of a key before and after.
type keyState struct {
	dump        string
	pexpiretime int64
}

// snapshot returns the DUMP and PEXPIRETIME of each of keys, every one of which must expire.
func snapshot(t *testing.T, srv *redistest.Server, keys []string) []keyState {
	t.Helper()
	return snapshotOf(t, srv, keys, true)
}

// snapshotOf returns the DUMP and PEXPIRETIME of each of keys (-1 for none), failing t on a key
// without an expiry when each must expire.
func snapshotOf(t *testing.T, srv *redistest.Server, keys []string, mustExpire bool) []keyState {
	t.Helper()
	out := make([]keyState, len(keys))
	for i, k := range keys {
		dump, err := srv.Do(t, "DUMP", k).ToString()
		if err != nil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		exp, err := srv.Do(t, "PEXPIRETIME", k).AsInt64()
		if err != nil || exp == -2 || (mustExpire && exp <= 0) {
			t.Fatalf("PEXPIRETIME %s = %d, %v; want an expiry", k, exp, err)
		}
		out[i] = keyState{dump, exp}
	}
	return out
}

// The keys a keyspaceEvents writes to know that the events before them have arrived: one until its
// subscription is live, another when it is asked for the events so far.
const (
	liveMarker  = "marker:live"
	untilMarker = "marker:until"
)

// keyspaceEvents collects the keyspace events of every key but its markers.
type keyspaceEvents struct {
	srv    *redistest.Server
	mu     sync.Mutex
	events []string // "key event"
	live   chan struct{}
	marked chan struct{}
}

// watchEvents subscribes to the keyspace events of every key of srv, and returns once the
// subscription is live (an event of the marker has arrived).
func watchEvents(t *testing.T, srv *redistest.Server) *keyspaceEvents {
	t.Helper()
	w := &keyspaceEvents{srv: srv, live: make(chan struct{}, 1), marked: make(chan struct{}, 1)}
	c := srv.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		c.Receive(ctx, c.B().Psubscribe().Pattern("__keyspace@0__:*").Build(), func(m rueidis.PubSubMessage) {
			key := strings.TrimPrefix(m.Channel, "__keyspace@0__:")
			switch key {
			case liveMarker:
				select {
				case w.live <- struct{}{}:
				default:
				}
				return
			case untilMarker:
				w.marked <- struct{}{}
				return
			}
			w.mu.Lock()
			w.events = append(w.events, key+" "+m.Message)
			w.mu.Unlock()
		})
	}()
	for deadline := time.Now().Add(15 * time.Second); ; {
		srv.Do(t, "SET", liveMarker, "1")
		select {
		case <-w.live:
			w.mu.Lock()
			w.events = nil // the setup's, which may still arrive before the subscription's first marker
			w.mu.Unlock()
			return w
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("keyspace subscription never became live")
		}
	}
}

// until writes its marker, waits for its event, and returns the events so far, sorted: Redis
// delivers notifications in order, so every event before the marker's has arrived. Call it once.
func (w *keyspaceEvents) until(t *testing.T) []string {
	t.Helper()
	w.srv.Do(t, "SET", untilMarker, "1")
	select {
	case <-w.marked:
	case <-time.After(5 * time.Second):
		t.Fatal("marker event never arrived")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(slices.Values(w.events))
}
