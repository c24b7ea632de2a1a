package redisstore

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/limittest"
)

// clusterBackend is a limittest.SharedBackend on a harness-started Redis Cluster, reached through
// its URL (one host and five seeds). In a child process of the suite it has only the URL.
type clusterBackend struct {
	c   *redistest.Cluster // nil in a child process
	url string
}

func (b clusterBackend) Open(t *testing.T) admit.Store { return openPatient(t, b.url) }

func (b clusterBackend) Sleep(t *testing.T, d time.Duration) { time.Sleep(d) }

// Now is the TIME of a master: every node runs on this machine's clock.
func (b clusterBackend) Now(t *testing.T) time.Time { return redisNow(t, b.c.Masters(t)[0]) }

func (b clusterBackend) Address() string { return b.url }

func (b clusterBackend) OpenAddress(t *testing.T, url string) admit.Store { return openPatient(t, url) }

// limittestChild reports whether this process is a child the conformance suite started (its
// MultiProcess race, or the holder of KilledHolder), which needs only the address it is given: it
// must not start a cluster of its own. The names are limittest's childEnv and holderEnv.
func limittestChild() bool {
	return os.Getenv("ADMIT_LIMITTEST_CHILD") != "" || os.Getenv("ADMIT_LIMITTEST_HOLDER") != ""
}

// The conformance suite, against a Redis Cluster of 3 masters and 3 replicas: the keys of one call
// share a hash slot, so every script runs unchanged, wherever its slot is.
func TestConformanceCluster(t *testing.T) {
	b := clusterBackend{}
	if !limittestChild() {
		b.c = redistest.StartCluster(t)
		b.url = b.c.URL()
	}
	limittest.TestStore(t, func(t *testing.T) limittest.Backend { return b })
}

// On a cluster a NOSCRIPT loads the scripts on the master that serves the key's slot, so every
// master has them once a key of its slots was decided, and again after SCRIPT FLUSH on one master.
func TestClusterLoadsScriptsOnEveryNode(t *testing.T) {
	c := redistest.StartCluster(t)
	s := openPatient(t, c.URL())
	masters := c.Masters(t)
	// One key per master, found by slot.
	keys := map[*redistest.Server]string{}
	for i := 0; len(keys) < len(masters); i++ {
		k := newKey(t)
		keys[c.MasterOfKey(t, k)] = k
		if i > 1000 {
			t.Fatal("no key found for some master")
		}
	}
	for m, k := range keys {
		if d := take(t, s, k, threePerMinute, 1); !d.Allowed || d.Remaining != 2 {
			t.Fatalf("first Take on %s's key: %+v; want allowed, 2 left", m.Addr(), d)
		}
		if v, _ := state(t, m, k); v != "1" {
			t.Fatalf("the key's value on its master %s is %q, want \"1\"", m.Addr(), v)
		}
	}
	// A URL of one node finds the cluster by itself.
	one := openPatient(t, c.Nodes()[5].URL())
	for m, k := range keys {
		if d := take(t, one, k, threePerMinute, 0); !d.Allowed || d.Remaining != 2 {
			t.Fatalf("Take of 0 on %s's key through one node's URL: %+v; want 2 left", m.Addr(), d)
		}
	}
	for _, m := range masters {
		exists, err := m.Do(t, "SCRIPT", "EXISTS", takeScript.sha).AsIntSlice()
		if err != nil || len(exists) != 1 || exists[0] != 1 {
			t.Fatalf("SCRIPT EXISTS take on %s = %v, %v; want [1]", m.Addr(), exists, err)
		}
	}
	for m, k := range keys {
		if err := m.Do(t, "SCRIPT", "FLUSH").Error(); err != nil {
			t.Fatalf("SCRIPT FLUSH on %s: %v", m.Addr(), err)
		}
		if d := take(t, s, k, threePerMinute, 1); !d.Allowed || d.Remaining != 1 {
			t.Fatalf("Take after SCRIPT FLUSH on %s: %+v; want allowed, 1 left", m.Addr(), d)
		}
	}
}

// Decisions through the Sentinel URL, then SENTINEL FAILOVER, then decisions go on: errors only
// during the switch (matching admit.ErrUnavailable), none READONLY, and the new primary serves.
func TestSentinelFailover(t *testing.T) {
	st := redistest.StartSentinel(t)
	s := open(t, st.URL())
	key := newKey(t)
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 1_000_000, Period: time.Hour}
	for range 5 {
		if d := take(t, s, key, lim, 1); !d.Allowed {
			t.Fatalf("Take through Sentinel: %+v; want allowed", d)
		}
	}
	old := st.Primary(t)
	if v, _ := state(t, old, key); v != "5" {
		t.Fatalf("the key on the primary %s is %q, want \"5\"", old.Addr(), v)
	}

	// Decisions keep coming while the failover runs.
	var (
		mu        sync.Mutex
		admitted  int
		failures  int
		firstFail time.Time
		lastFail  time.Time
		readonly  []error
		others    []error
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				d, err := s.Take(context.Background(), admit.Request{Key: key, Limit: lim, Cost: 1})
				mu.Lock()
				switch {
				case err == nil && d.Allowed:
					admitted++
				case err == nil:
					others = append(others, errors.New("rejected under a limit of a million"))
				default:
					failures++
					if firstFail.IsZero() {
						firstFail = time.Now()
					}
					lastFail = time.Now()
					if strings.Contains(err.Error(), "READONLY") {
						readonly = append(readonly, err)
					} else if !errors.Is(err, admit.ErrUnavailable) {
						others = append(others, err)
					}
				}
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	begin := time.Now()
	p := st.Failover(t)
	switched := time.Since(begin)

	// After the switch, decisions must succeed again, by themselves, on the new primary.
	var settled time.Time
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for {
		if _, err := s.Take(context.Background(), admit.Request{Key: newKey(t), Limit: lim, Cost: 1}); err == nil {
			settled = time.Now()
			break
		} else if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("decisions still fail 30s after the failover: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Then a stretch of decisions with no error at all.
	for range 200 {
		if _, err := s.Take(context.Background(), admit.Request{Key: key, Limit: lim, Cost: 1}); err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("Take after the switch: %v", err)
		}
	}
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	t.Logf("failover: sentinels named %s after %v; decisions working again %v after SENTINEL FAILOVER; "+
		"%d admitted, %d failed during the switch", p.Addr(), switched.Round(time.Millisecond),
		settled.Sub(begin).Round(time.Millisecond), admitted, failures)
	if failures > 0 {
		t.Logf("failed decisions from %v to %v after SENTINEL FAILOVER",
			firstFail.Sub(begin).Round(time.Millisecond), lastFail.Sub(begin).Round(time.Millisecond))
	}
	if len(readonly) > 0 {
		t.Errorf("%d READONLY errors, first: %v", len(readonly), readonly[0])
	}
	if len(others) > 0 {
		t.Errorf("%d unexpected outcomes, first: %v", len(others), others[0])
	}
	if v, _ := state(t, p, key); v == "" {
		t.Errorf("the key is not on the new primary %s", p.Addr())
	}
	// The store must write to the new primary, not to the old one: that one accepts writes until the
	// sentinels demote it, and loses whatever it counted then.
	for {
		fresh := newKey(t)
		take(t, s, fresh, lim, 1)
		if v, _ := state(t, p, fresh); v == "1" {
			t.Logf("the store writes to the new primary %v after SENTINEL FAILOVER", time.Since(begin).Round(time.Millisecond))
			break
		}
		if time.Since(begin) > 30*time.Second { // a hang guard
			t.Fatalf("30s after SENTINEL FAILOVER, the store still writes to the old primary, not to %s", p.Addr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A Store on Sentinel asks the sentinels for the primary every sentinelRefreshInterval, besides
// following their events; other topologies have no such option.
func TestSentinelRefreshInterval(t *testing.T) {
	for url, want := range map[string]time.Duration{
		"redis://127.0.0.1:26379?addr=127.0.0.1:26380&master_set=admit": sentinelRefreshInterval,
		"redis://127.0.0.1:7000?addr=127.0.0.1:7001":                    0,
		"redis://127.0.0.1:6379":                                        0,
	} {
		opt, err := clientOption(Config{URL: url})
		if err != nil {
			t.Fatalf("clientOption(%q): %v", url, err)
		}
		if got := opt.Sentinel.TopologyRefreshInterval; got != want {
			t.Errorf("clientOption(%q): Sentinel.TopologyRefreshInterval = %v, want %v", url, got, want)
		}
	}
}
