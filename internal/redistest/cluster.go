package redistest

import (
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// clusterNodes is how many redis-servers a Cluster runs: 3 masters, each with one replica.
	clusterNodes = 6
	// clusterSlots is how many hash slots Redis Cluster has.
	clusterSlots = 16384
	// clusterNodeTimeout is the cluster-node-timeout of every node, in milliseconds: short, so that a
	// killed master is failed over within seconds, long enough that a busy 2-core machine does not
	// fail over a healthy one.
	clusterNodeTimeout = 2000
	// topologyTimeout bounds how long a cluster or Sentinel setup waits to become healthy, and a
	// failover to complete: a hang guard, not a performance claim.
	topologyTimeout = 60 * time.Second
	// pollPause is the pause between two looks at a topology that is not yet as wanted.
	pollPause = 50 * time.Millisecond
)

// A Cluster is a Redis Cluster of six redis-servers started by [StartCluster]: three masters, each
// with one replica, on free 127.0.0.1 ports. Nodes are [Server]s: a test may Kill, Freeze or Restart
// any of them (a restarted node keeps its cluster identity, from the nodes.conf in its directory,
// and rejoins; its data is gone). The zero value is not usable.
type Cluster struct {
	nodes []*Server
}

// StartCluster starts a Redis Cluster of 3 masters and 3 replicas, each node in its own t.TempDir()
// without persistence, creates it with redis-cli --cluster create, and returns once every node
// reports cluster_state:ok with all 16384 slots covered, every node knows the five others, and every
// replica is in sync with its master. Extra args are passed to every redis-server. Every node is
// killed at t's cleanup. Like [Start], it skips t when redis-server is missing (or fails it when
// ADMIT_REQUIRE_REDIS is 1).
func StartCluster(t testing.TB, args ...string) *Cluster {
	t.Helper()
	requireRedis(t)
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redistest: redis-server is installed but redis-cli, which creates a cluster, is not on PATH: %v", err)
	}
	begin := time.Now()
	c := &Cluster{nodes: make([]*Server, clusterNodes)}
	errs := make([]error, clusterNodes)
	var wg sync.WaitGroup
	for i := range clusterNodes {
		wg.Go(func() {
			// The bus port defaults to port+10000, which may be beyond 65535 or taken: choose it too.
			bus, err := pickPort()
			if err != nil {
				errs[i] = err
				return
			}
			nodeArgs := append([]string{
				"--cluster-enabled", "yes",
				"--cluster-config-file", "nodes.conf",
				"--cluster-port", strconv.Itoa(bus),
				"--cluster-node-timeout", strconv.Itoa(clusterNodeTimeout),
				// Replicas sync without persistence, diskless: at once, not after the default 5s.
				"--repl-diskless-sync-delay", "0",
			}, args...)
			c.nodes[i], errs[i] = start(t, nil, nodeArgs, ACLRules+" "+ResetACLRules+" "+ClusterACLRules)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("redistest: cluster node: %v", err)
	}
	create := []string{"--cluster", "create"}
	for _, n := range c.nodes {
		create = append(create, n.Addr())
	}
	create = append(create, "--cluster-replicas", "1", "--cluster-yes")
	out, err := exec.CommandContext(t.Context(), cli, create...).CombinedOutput()
	if err != nil {
		t.Fatalf("redistest: redis-cli %s: %v\n%s", strings.Join(create, " "), err, out)
	}
	c.WaitHealthy(t)
	t.Logf("redistest: cluster of %d nodes ready in %v", clusterNodes, time.Since(begin).Round(time.Millisecond))
	return c
}

// Nodes returns the cluster's six nodes, in the order they were started (not their roles: see
// [Cluster.Masters] and [Cluster.MasterOf]).
func (c *Cluster) Nodes() []*Server {
	return append([]*Server(nil), c.nodes...)
}

// Addrs returns the addresses of the cluster's nodes, "127.0.0.1:PORT", in the order of
// [Cluster.Nodes].
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// URL returns the cluster's URL in the form redisstore accepts, logging in as the least-privilege
// [User]: the first node as host, every other node as a seed,
// "redis://admit:s3cret@127.0.0.1:P1?addr=127.0.0.1:P2&addr=…".
func (c *Cluster) URL() string {
	return "redis://" + User + ":" + Password + "@" + c.seeds()
}

// AdminURL is [Cluster.URL] without credentials: it logs in as the unrestricted default user.
func (c *Cluster) AdminURL() string {
	return "redis://" + c.seeds()
}

// seeds returns the first node's address followed by the others as addr options.
func (c *Cluster) seeds() string {
	addrs := c.Addrs()
	return addrs[0] + "?addr=" + strings.Join(addrs[1:], "&addr=")
}

// Node returns the node at addr, "127.0.0.1:PORT", or nil if none of the cluster's is there.
func (c *Cluster) Node(addr string) *Server {
	for _, n := range c.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// A clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr string
	flags    []string
	master   string   // the master's id, "-" for a master
	slots    [][2]int // the ranges of slots it serves, bounds included
}

// has reports whether the node has flag.
func (n clusterNode) has(flag string) bool {
	for _, f := range n.flags {
		if f == flag {
			return true
		}
	}
	return false
}

// parseClusterNodes parses the reply of CLUSTER NODES. Slots being imported or migrated ("[…]") are
// left out: the node does not serve them yet, or still does and lists them as a range too.
func parseClusterNodes(reply string) ([]clusterNode, error) {
	var nodes []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(reply), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES line %q: want at least 8 fields", line)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		n := clusterNode{id: f[0], addr: addr, flags: strings.Split(f[2], ","), master: f[3]}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") {
				continue
			}
			lo, hi, isRange := strings.Cut(s, "-")
			if !isRange {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("CLUSTER NODES line %q: slot range %q", line, s)
			}
			n.slots = append(n.slots, [2]int{a, b})
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// view returns CLUSTER NODES as seen by node n.
func (c *Cluster) view(t testing.TB, n *Server) []clusterNode {
	t.Helper()
	nodes, err := viewOf(n)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return nodes
}

// viewOf returns CLUSTER NODES as seen by node n.
func viewOf(n *Server) ([]clusterNode, error) {
	reply, err := n.try("CLUSTER", "NODES").ToString()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER NODES on %s: %w", n.Addr(), err)
	}
	// Over RESP3 the reply is a verbatim string, which rueidis returns with its format prefix.
	nodes, err := parseClusterNodes(strings.TrimPrefix(reply, "txt:"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.Addr(), err)
	}
	return nodes, nil
}

// running returns a node of the cluster that is running and answers, to ask about the cluster. A
// loaded machine may keep every node from answering for a while: it asks until topologyTimeout.
func (c *Cluster) running(t testing.TB) *Server {
	t.Helper()
	for deadline := time.Now().Add(topologyTimeout); ; time.Sleep(pollPause) {
		alive := false
		for _, n := range c.nodes {
			if n.running() {
				alive = true
				if _, err := ping(n.Addr(), nil, time.Second); err == nil {
					return n
				}
			}
		}
		if !alive {
			t.Fatal("redistest: no node of the cluster is running")
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: no running node of the cluster answered PING in %v", topologyTimeout)
		}
	}
}

// Masters returns the nodes that serve slots now, as a running node sees the cluster: three, unless
// a test has changed the topology.
func (c *Cluster) Masters(t testing.TB) []*Server {
	t.Helper()
	var masters []*Server
	for _, n := range c.view(t, c.running(t)) {
		if n.has("master") && len(n.slots) > 0 && !n.has("fail") {
			if s := c.Node(n.addr); s != nil {
				masters = append(masters, s)
			}
		}
	}
	return masters
}

// MasterOf returns the node that serves slot, as a running node sees the cluster.
func (c *Cluster) MasterOf(t testing.TB, slot int) *Server {
	t.Helper()
	for _, n := range c.view(t, c.running(t)) {
		if !n.has("master") || n.has("fail") {
			continue
		}
		for _, r := range n.slots {
			if r[0] <= slot && slot <= r[1] {
				if s := c.Node(n.addr); s != nil {
					return s
				}
				t.Fatalf("redistest: slot %d is served by %s, not a node of this cluster", slot, n.addr)
			}
		}
	}
	t.Fatalf("redistest: no master serves slot %d", slot)
	return nil
}

// Slot returns the hash slot of key, by CLUSTER KEYSLOT.
func (c *Cluster) Slot(t testing.TB, key string) int {
	t.Helper()
	n, err := c.running(t).try("CLUSTER", "KEYSLOT", key).AsInt64()
	if err != nil {
		t.Fatalf("redistest: CLUSTER KEYSLOT %s: %v", key, err)
	}
	return int(n)
}

// MasterOfKey returns the node that serves key's slot.
func (c *Cluster) MasterOfKey(t testing.TB, key string) *Server {
	t.Helper()
	return c.MasterOf(t, c.Slot(t, key))
}

// ReplicasOf returns the running replicas of master, as master sees them.
func (c *Cluster) ReplicasOf(t testing.TB, master *Server) []*Server {
	t.Helper()
	nodes := c.view(t, master)
	var id string
	for _, n := range nodes {
		if n.has("myself") {
			id = n.id
		}
	}
	var replicas []*Server
	for _, n := range nodes {
		if n.master == id && !n.has("fail") {
			if s := c.Node(n.addr); s != nil {
				replicas = append(replicas, s)
			}
		}
	}
	return replicas
}

// WaitHealthy returns once every running node reports cluster_state:ok with all 16384 slots
// assigned and ok, knows every other node, and every running replica's link to its master is up. It
// fails t if that takes more than a minute.
func (c *Cluster) WaitHealthy(t testing.TB) {
	t.Helper()
	waitFor(t, "a healthy cluster", func() string { return c.unhealthy(t) })
}

// unhealthy says why the cluster is not healthy, or returns "".
func (c *Cluster) unhealthy(t testing.TB) string {
	t.Helper()
	replicas := 0 // running replicas in sync
	for _, n := range c.nodes {
		if !n.running() {
			continue
		}
		info, err := n.try("CLUSTER", "INFO").ToString()
		if err != nil {
			return fmt.Sprintf("CLUSTER INFO on %s: %v", n.Addr(), err)
		}
		for _, want := range []string{
			"cluster_state:ok",
			"cluster_slots_assigned:" + strconv.Itoa(clusterSlots),
			"cluster_slots_ok:" + strconv.Itoa(clusterSlots),
			"cluster_known_nodes:" + strconv.Itoa(len(c.nodes)),
		} {
			if !strings.Contains(info, want+"\r\n") {
				return fmt.Sprintf("%s: CLUSTER INFO lacks %s", n.Addr(), want)
			}
		}
		repl, err := n.try("INFO", "replication").ToString()
		if err != nil {
			return fmt.Sprintf("INFO replication on %s: %v", n.Addr(), err)
		}
		if strings.Contains(repl, "role:slave") {
			if !strings.Contains(repl, "master_link_status:up") {
				return fmt.Sprintf("replica %s: link to its master not up", n.Addr())
			}
			replicas++
		}
	}
	// Gossip spreads roles: every node must see every running replica as one.
	for _, n := range c.nodes {
		if !n.running() {
			continue
		}
		view, err := viewOf(n)
		if err != nil {
			return err.Error()
		}
		seen := 0
		for _, v := range view {
			if v.has("slave") && !v.has("fail") && !v.has("fail?") {
				seen++
			}
		}
		if seen != replicas {
			return fmt.Sprintf("%s sees %d replicas, want %d", n.Addr(), seen, replicas)
		}
	}
	return ""
}

// running reports whether the server's current process is running.
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && !s.proc.exited() && !s.closed
}
