package redistest_test

import (
	"context"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/admit-dev/admit/internal/redistest"
)

// The cluster comes up with three masters, each with one replica, every slot served; a key written
// through a cluster client is on the master MasterOfKey names; a killed master is failed over to its
// replica, and, restarted, rejoins.
func TestCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	nodes := c.Nodes()
	if len(nodes) != 6 {
		t.Fatalf("%d nodes, want 6", len(nodes))
	}
	u, err := url.Parse(c.URL())
	if err != nil || u.Scheme != "redis" || u.User.String() != "admit:s3cret" || u.Host != nodes[0].Addr() || !slices.Equal(u.Query()["addr"], c.Addrs()[1:]) {
		t.Fatalf("URL() = %q (%v); want redis://admit:s3cret@%s?addr=… with the five other nodes", c.URL(), err, nodes[0].Addr())
	}
	masters := c.Masters(t)
	if len(masters) != 3 {
		t.Fatalf("%d masters, want 3", len(masters))
	}
	for _, m := range masters {
		if r := c.ReplicasOf(t, m); len(r) != 1 {
			out, _ := m.Do(t, "CLUSTER", "NODES").ToString()
			t.Fatalf("master %s has %d replicas, want 1\n%s", m.Addr(), len(r), out)
		}
	}
	for _, slot := range []int{0, 5000, 10000, 16383} {
		if m := c.MasterOf(t, slot); !slices.Contains(masters, m) {
			t.Fatalf("MasterOf(%d) = %s, not a master", slot, m.Addr())
		}
	}

	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), DisableCache: true})
	if err != nil {
		t.Fatalf("cluster client: %v", err)
	}
	defer client.Close()
	ctx := context.Background()
	const key = "rl:harness:{cluster}"
	if err := client.Do(ctx, client.B().Set().Key(key).Value("1").Build()).Error(); err != nil {
		t.Fatalf("SET through the cluster: %v", err)
	}
	owner := c.MasterOfKey(t, key)
	if v, err := owner.Do(t, "GET", key).ToString(); err != nil || v != "1" {
		t.Fatalf("GET %s on its master %s = %q, %v; want \"1\"", key, owner.Addr(), v, err)
	}
	replicas := c.ReplicasOf(t, owner)
	if len(replicas) != 1 {
		t.Fatalf("the key's master has %d replicas, want 1", len(replicas))
	}

	// Replication is asynchronous: wait until the replica has the write, or killing the master
	// loses it (as it would in production: docs/redis.md, state loss).
	if n, err := owner.Do(t, "WAIT", "1", "5000").AsInt64(); err != nil || n < 1 {
		t.Fatalf("WAIT 1 on %s = %d, %v; want the replica to acknowledge the write", owner.Addr(), n, err)
	}
	begin := time.Now()
	owner.Kill(t)
	c.WaitHealthy(t)
	if got := c.MasterOfKey(t, key); got != replicas[0] {
		t.Fatalf("after killing %s, %s is served by %s; want its replica %s", owner.Addr(), key, got.Addr(), replicas[0].Addr())
	}
	t.Logf("the replica took over in %v", time.Since(begin).Round(time.Millisecond))
	if v, err := replicas[0].Do(t, "GET", key).ToString(); err != nil || v != "1" {
		t.Fatalf("GET %s on the promoted replica = %q, %v; want \"1\"", key, v, err)
	}

	owner.Restart(t)
	c.WaitHealthy(t)
	if got := c.ReplicasOf(t, replicas[0]); !slices.Equal(got, []*redistest.Server{owner}) {
		t.Fatalf("after its restart, the old master is not the only replica of the new one")
	}
}

// The Sentinel setup comes up with its first server as primary; a write is replicated; Failover
// promotes a replica, which has the write, and the old primary follows it.
func TestSentinel(t *testing.T) {
	st := redistest.StartSentinel(t)
	servers, sentinels := st.Servers(), st.Sentinels()
	if len(servers) != 3 || len(sentinels) != 3 {
		t.Fatalf("%d servers and %d sentinels, want 3 and 3", len(servers), len(sentinels))
	}
	u, err := url.Parse(st.URL())
	if err != nil || u.User.String() != "admit:s3cret" || u.Host != sentinels[0].Addr() || u.Query().Get("master_set") != redistest.MasterName ||
		!slices.Equal(u.Query()["addr"], []string{sentinels[1].Addr(), sentinels[2].Addr()}) {
		t.Fatalf("URL() = %q (%v); want the three sentinels and master_set=%s", st.URL(), err, redistest.MasterName)
	}
	old := st.Primary(t)
	if old != servers[0] {
		t.Fatalf("Primary() = %s, want the first server %s", old.Addr(), servers[0].Addr())
	}
	if err := old.Do(t, "SET", "rl:harness:sentinel", "1").Error(); err != nil {
		t.Fatalf("SET on the primary: %v", err)
	}
	if err := old.Do(t, "WAIT", "2", "5000").Error(); err != nil {
		t.Fatalf("WAIT: %v", err)
	}

	begin := time.Now()
	p := st.Failover(t)
	t.Logf("failover in %v", time.Since(begin).Round(time.Millisecond))
	if p == old {
		t.Fatal("Failover returned the old primary")
	}
	if v, err := p.Do(t, "GET", "rl:harness:sentinel").ToString(); err != nil || v != "1" {
		t.Fatalf("GET on the new primary = %q, %v; want \"1\"", v, err)
	}
	st.WaitHealthy(t)
	if role, err := old.Do(t, "ROLE").ToArray(); err != nil || len(role) == 0 {
		t.Fatalf("ROLE on the old primary: %v", err)
	} else if r, _ := role[0].ToString(); r != "slave" {
		t.Fatalf("the old primary's role is %q, want slave", r)
	}
}
