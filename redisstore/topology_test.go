package redisstore

import (
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
)

// Topology changes on one Redis Cluster, in turn: a failover, then a slot resharded under load.
func TestClusterTopologyChanges(t *testing.T) {
	c := redistest.StartCluster(t)
	s := openCluster(t, c.URL())
	t.Run("FailoverLoadsScriptsOnNewMaster", func(t *testing.T) { testFailoverLoadsScripts(t, c, s) })
}

// After a failover the promoted replica has no scripts (Redis 7 does not pass SCRIPT LOAD to
// replicas), and the store's view of the cluster still names the old master. Once the topology has
// settled, the first decision on a key of the failed-over slot must succeed: the store follows the
// old master's MOVED, meets NOSCRIPT on the new master, and must load the script there, not only on
// the nodes its stale view lists.
func testFailoverLoadsScripts(t *testing.T, c *redistest.Cluster, s *Store) {
	key := newKey(t)
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 1000, Period: time.Hour}
	if d := take(t, s, key, lim, 1); !d.Allowed {
		t.Fatalf("first Take: %+v; want allowed", d)
	}
	m := c.MasterOfKey(t, key)
	replicas := c.ReplicasOf(t, m)
	if len(replicas) != 1 {
		t.Fatalf("master %s has replicas %v, want one", m.Addr(), replicas)
	}
	r := replicas[0]
	if scriptExists(t, r) {
		t.Fatalf("the replica %s has the take script before the failover: this test proves nothing", r.Addr())
	}
	if err := r.Do(t, "CLUSTER", "FAILOVER").Error(); err != nil {
		t.Fatalf("CLUSTER FAILOVER on %s: %v", r.Addr(), err)
	}
	awaitMaster(t, r, time.Now())
	c.WaitHealthy(t)
	if got := c.MasterOfKey(t, key); got != r {
		t.Fatalf("after the failover the key's slot is served by %s, want %s", got.Addr(), r.Addr())
	}
	// The first decisions after the switch, on the key and on a new key of its slot.
	for i, k := range []string{key, key + ":other"} {
		d, err := s.Take(t.Context(), admit.Request{Key: k, Limit: lim, Cost: 1})
		if err != nil {
			t.Fatalf("the first Take on key %d of the failed-over slot: %v", i, err)
		}
		if want := lim.Rate - int64(2-i); !d.Allowed || d.Remaining != want {
			t.Fatalf("the first Take on key %d of the failed-over slot: %+v; want allowed, %d left", i, d, want)
		}
	}
	if !scriptExists(t, r) {
		t.Errorf("the new master %s lacks the take script after a decision on its slot", r.Addr())
	}
}

// scriptExists reports whether srv has the take script in its cache.
func scriptExists(t *testing.T, srv *redistest.Server) bool {
	t.Helper()
	exists, err := srv.Do(t, "SCRIPT", "EXISTS", takeScript.sha).AsIntSlice()
	if err != nil || len(exists) != 1 {
		t.Fatalf("SCRIPT EXISTS on %s: %v, %v", srv.Addr(), exists, err)
	}
	return exists[0] == 1
}
