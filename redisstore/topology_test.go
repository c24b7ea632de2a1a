package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/redistest"
)

// Topology changes on one Redis Cluster, in turn: a failover and a slot resharded under load, both
// seen by the harness's least-privilege user (redistest.ACLRules and ClusterACLRules: no EVAL).
func TestClusterTopologyChanges(t *testing.T) {
	c := redistest.StartCluster(t)
	url := c.URL()
	if !strings.Contains(url, redistest.User+":"+redistest.Password+"@") {
		t.Fatalf("the harness's URL %s does not log in as its least-privilege user %s", url, redistest.User)
	}
	s := openPatient(t, url)
	t.Run("FailoverLoadsScriptsOnNewMaster", func(t *testing.T) { testFailoverLoadsScripts(t, c, s) })
	t.Run("ReshardSlotUnderLoad", func(t *testing.T) { testReshardUnderLoad(t, c, s) })
	// The user's rules covered everything the client sent through both: no node refused it anything
	// (READONLY, for one, is never sent: the store reads no replica).
	for _, n := range c.Nodes() {
		if refused := aclRefusals(t, n); len(refused) > 0 {
			t.Errorf("%s refused the least-privilege user: %s", n.Addr(), strings.Join(refused, "; "))
		}
	}
}

// aclRefusals returns the entries of srv's ACL LOG: each command, key or login refused, with its
// user and count.
func aclRefusals(t *testing.T, srv *redistest.Server) []string {
	t.Helper()
	entries, err := srv.Do(t, "ACL", "LOG").ToArray()
	if err != nil {
		t.Fatalf("ACL LOG on %s: %v", srv.Addr(), err)
	}
	var refused []string
	for _, e := range entries {
		m, err := e.AsMap()
		if err != nil {
			t.Fatalf("ACL LOG on %s: an entry %v: %v", srv.Addr(), e, err)
		}
		field := func(name string) string {
			v := m[name]
			if s, err := v.ToString(); err == nil {
				return s
			}
			n, _ := v.AsInt64()
			return strconv.FormatInt(n, 10)
		}
		refused = append(refused, fmt.Sprintf("%s %s %q ×%s", field("username"), field("reason"), field("object"), field("count")))
	}
	return refused
}

// After a failover the promoted replica has no scripts (Redis 7 does not pass SCRIPT LOAD to
// replicas), and the store's view of the cluster still names the old master. Once the topology has
// settled, the first decision on a key of the failed-over slot must succeed, as the least-privilege
// user, who may not EVAL: the store follows the old master's MOVED, meets NOSCRIPT on the new
// master, and must load the script there (SCRIPT LOAD and EVALSHA in one MULTI … EXEC, which the
// client moves to the new master whole), not only on the nodes its stale view lists. Decisions then
// go on by themselves, with EVALSHA only.
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
	t.Logf("the new master %s ran EXEC %d times, EVALSHA %d times, EVAL %d times", r.Addr(),
		commandCalls(t, r, "exec"), commandCalls(t, r, "evalsha"), commandCalls(t, r, "eval"))
	requireSteady(t, s, []string{key, key + ":other"}, lim, 20)
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

// A reshardWork is one kind of call the resharding test keeps making: TakeAll of rs, keys of the
// slot being moved, with its tally.
type reshardWork struct {
	name string
	rs   []admit.Request

	mu       sync.Mutex
	admitted int64 // calls that admitted every Request
	rejected int64
	proven   int64 // failed calls that provably did not run: a redirect or TRYAGAIN reply
	unproven int64 // failed calls that may have run: a timeout
}

// A reshardTally is what the resharding test's calls met, over all workloads.
type reshardTally struct {
	mu          sync.Mutex
	ok          int            // calls that decided
	failed      map[string]int // failed calls by the reply that failed them
	first, last time.Time      // the first and last failure
	firstErr    error
	crossslot   []error
	others      []error // errors not matching admit.ErrUnavailable
}

// failureKinds are the replies a call may fail with while a slot migrates; each proves that the
// script did not run, unlike a timeout or a lost connection.
var failureKinds = []string{"TRYAGAIN", "ASK", "MOVED", "NOSCRIPT", "CLUSTERDOWN", "CROSSSLOT"}

// failureKind returns the failureKinds reply in err, or "" for any other error.
func failureKind(err error) string {
	msg := err.Error()
	for _, k := range failureKinds {
		if strings.Contains(msg, ": "+k+" ") {
			return k
		}
	}
	return ""
}

// decide makes one call of w and tallies it in w and in tally.
func (w *reshardWork) decide(s *Store, tally *reshardTally) {
	ds := make([]admit.Decision, len(w.rs))
	all, err := s.TakeAll(context.Background(), w.rs, ds)
	now := time.Now()
	w.mu.Lock()
	switch {
	case err == nil && all:
		w.admitted++
	case err == nil:
		w.rejected++
	case failureKind(err) != "":
		w.proven++
	default:
		w.unproven++
	}
	w.mu.Unlock()
	tally.mu.Lock()
	defer tally.mu.Unlock()
	if err == nil {
		tally.ok++
		return
	}
	k := failureKind(err)
	if k == "" {
		k = "other"
	}
	tally.failed[k]++
	if tally.first.IsZero() {
		tally.first, tally.firstErr = now, err
	}
	tally.last = now
	switch {
	case k == "CROSSSLOT":
		tally.crossslot = append(tally.crossslot, err)
	case !errors.Is(err, admit.ErrUnavailable):
		tally.others = append(tally.others, err)
	}
}

// migrateKeyPause is the pause after each key the resharding test migrates: it stretches the
// migration so that calls meet the slot with their keys split between the two masters.
const migrateKeyPause = 100 * time.Millisecond

// One slot holding admit keys moves from its master to another (CLUSTER SETSLOT IMPORTING and
// MIGRATING, MIGRATE … KEYS one key at a time, SETSLOT NODE), while goroutines keep deciding on
// keys of that slot: TakeAll of three algorithms at once, of two with small limits that run out, and
// one sliding window alone. Calls may fail, with admit.ErrUnavailable (TRYAGAIN while a call's keys
// are split between the masters), but never with CROSSSLOT or anything else; ASK redirects are
// followed (ASKING reaches the importing master) and so are the MOVED after the move; afterwards
// every key is on the new master and its count is exactly the calls admitted: none counted twice,
// none admitted beyond its limit.
func testReshardUnderLoad(t *testing.T, c *redistest.Cluster, s *Store) {
	base := newKey(t)
	slot := c.Slot(t, base)
	src := c.MasterOf(t, slot)
	var dst *redistest.Server
	for _, m := range c.Masters(t) {
		if m != src {
			dst = m
			break
		}
	}
	if dst == nil {
		t.Fatal("no master to move the slot to")
	}
	long := 7 * 24 * time.Hour // no sliding window or GCRA interval ends during the test
	works := []*reshardWork{
		{name: "three algorithms", rs: []admit.Request{
			{Key: base + ":fw", Limit: admit.Limit{Algorithm: admit.FixedWindow, Rate: 1_000_000, Period: time.Hour}, Cost: 1},
			{Key: base + ":log", Limit: admit.Limit{Algorithm: admit.SlidingLog, Rate: bound.MaxSlidingLogRate, Period: long}, Cost: 1},
			{Key: base + ":lease", Limit: admit.Limit{Algorithm: admit.Concurrency, Rate: bound.MaxConcurrency, Period: time.Hour}, Cost: 1},
		}},
		{name: "small limits", rs: []admit.Request{
			{Key: base + ":fw-small", Limit: admit.Limit{Algorithm: admit.FixedWindow, Rate: 500, Period: time.Hour}, Cost: 1},
			{Key: base + ":gcra", Limit: admit.Limit{Algorithm: admit.GCRA, Rate: 2000, Period: long}, Cost: 1},
		}},
		{name: "sliding window", rs: []admit.Request{
			{Key: base + ":sw", Limit: admit.Limit{Algorithm: admit.SlidingWindow, Rate: 700, Period: long}, Cost: 1},
		}},
	}
	tally := &reshardTally{failed: map[string]int{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range works {
		for range 2 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					w.decide(s, tally)
					time.Sleep(time.Millisecond)
				}
			})
		}
	}
	halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(halt)

	time.Sleep(300 * time.Millisecond) // every key exists on the source
	tally.mu.Lock()
	before := len(tally.failed)
	tally.mu.Unlock()
	if before != 0 {
		t.Fatalf("calls failed before the migration: %v", tally.failed)
	}
	srcID, dstID := nodeID(t, src), nodeID(t, dst)
	begin := time.Now()
	okBefore := tallyOK(tally)
	mustDo(t, dst, "CLUSTER", "SETSLOT", strconv.Itoa(slot), "IMPORTING", srcID)
	mustDo(t, src, "CLUSTER", "SETSLOT", strconv.Itoa(slot), "MIGRATING", dstID)
	host, port, _ := strings.Cut(dst.Addr(), ":")
	migrated := 0
	for {
		keys, err := src.Do(t, "CLUSTER", "GETKEYSINSLOT", strconv.Itoa(slot), "1").AsStrSlice()
		if err != nil {
			t.Fatalf("CLUSTER GETKEYSINSLOT on %s: %v", src.Addr(), err)
		}
		if len(keys) == 0 {
			break
		}
		mustDo(t, src, "MIGRATE", host, port, "", "0", "5000", "KEYS", keys[0])
		migrated++
		time.Sleep(migrateKeyPause)
	}
	for _, m := range append([]*redistest.Server{dst, src}, c.Masters(t)...) {
		mustDo(t, m, "CLUSTER", "SETSLOT", strconv.Itoa(slot), "NODE", dstID)
	}
	moved := time.Now()
	okDuring := tallyOK(tally) - okBefore
	// The MOVED of the source sends calls to the new master.
	back := awaitRecovery(t, s, base+":probe", works[0].rs[0].Limit, moved)
	time.Sleep(300 * time.Millisecond) // load on the new master
	halt()
	for range 20 {
		for _, w := range works {
			ds := make([]admit.Decision, len(w.rs))
			if _, err := s.TakeAll(context.Background(), peeks(w.rs), ds); err != nil {
				t.Fatalf("%s: a peek after the move: %v", w.name, err)
			}
		}
	}

	tally.mu.Lock()
	window := "no failed call"
	if !tally.first.IsZero() {
		window = fmt.Sprintf("failed calls %v: from %v to %v after the migration began (window %v; first: %v)",
			tally.failed, tally.first.Sub(begin).Round(time.Millisecond), tally.last.Sub(begin).Round(time.Millisecond),
			tally.last.Sub(tally.first).Round(time.Millisecond), tally.firstErr)
	}
	t.Logf("slot %d moved from %s to %s: %d keys migrated one by one over %v (SETSLOT NODE at %v), decisions back %v after; "+
		"%d calls decided while the slot migrated, %d in all; %s",
		slot, src.Addr(), dst.Addr(), migrated, moved.Sub(begin).Round(time.Millisecond), moved.Sub(begin).Round(time.Millisecond),
		back.Sub(moved).Round(time.Millisecond), okDuring, tally.ok, window)
	if len(tally.crossslot) > 0 {
		t.Errorf("%d CROSSSLOT errors, first: %v", len(tally.crossslot), tally.crossslot[0])
	}
	if len(tally.others) > 0 {
		t.Errorf("%d errors not matching admit.ErrUnavailable, first: %v", len(tally.others), tally.others[0])
	}
	tally.mu.Unlock()
	asking := commandCalls(t, dst, "asking")
	t.Logf("the new master %s ran ASKING %d times (ASK redirects followed); the old master %s's errorstats: %s",
		dst.Addr(), asking, src.Addr(), errorStats(t, src))
	if asking == 0 {
		t.Errorf("the new master %s never got ASKING: no ASK redirect was followed while the slot migrated", dst.Addr())
	}
	if okDuring == 0 {
		t.Error("no call was decided while the slot migrated")
	}

	for _, w := range works {
		ds := make([]admit.Decision, len(w.rs))
		if _, err := s.TakeAll(context.Background(), peeks(w.rs), ds); err != nil {
			t.Fatalf("%s: peek: %v", w.name, err)
		}
		t.Logf("%s: %d admitted, %d rejected, %d failed without running, %d failed otherwise",
			w.name, w.admitted, w.rejected, w.proven, w.unproven)
		for i, r := range w.rs {
			used := r.Limit.Capacity() - ds[i].Remaining
			t.Logf("  %s %s: limit %d, %d used", r.Limit.Algorithm, r.Key, r.Limit.Capacity(), used)
			if w.admitted > r.Limit.Capacity() {
				t.Errorf("%s: %d admitted beyond the limit %d", r.Key, w.admitted, r.Limit.Capacity())
			}
			if used < w.admitted || used > w.admitted+w.unproven {
				t.Errorf("%s: %d used in Redis after %d admitted calls and %d that may have run", r.Key, used, w.admitted, w.unproven)
			}
			if n, _ := dst.Do(t, "EXISTS", r.Key).AsInt64(); n != 1 {
				t.Errorf("%s is not on the new master %s", r.Key, dst.Addr())
			}
			if n, _ := src.Do(t, "EXISTS", r.Key).AsInt64(); n != 0 {
				t.Errorf("%s is still on the old master %s", r.Key, src.Addr())
			}
		}
	}
}

// peeks returns rs at cost 0: a TakeAll of them reads every key's state and writes nothing.
func peeks(rs []admit.Request) []admit.Request {
	p := append([]admit.Request(nil), rs...)
	for i := range p {
		p[i].Cost = 0
	}
	return p
}

// tallyOK returns how many calls have decided so far.
func tallyOK(tally *reshardTally) int {
	tally.mu.Lock()
	defer tally.mu.Unlock()
	return tally.ok
}

// nodeID returns srv's cluster node ID.
func nodeID(t *testing.T, srv *redistest.Server) string {
	t.Helper()
	id, err := srv.Do(t, "CLUSTER", "MYID").ToString()
	if err != nil {
		t.Fatalf("CLUSTER MYID on %s: %v", srv.Addr(), err)
	}
	return id
}

// mustDo runs a command on srv, failing t on an error reply.
func mustDo(t *testing.T, srv *redistest.Server, args ...string) {
	t.Helper()
	if err := srv.Do(t, args...).Error(); err != nil {
		t.Fatalf("%s on %s: %v", strings.Join(args, " "), srv.Addr(), err)
	}
}

// commandCalls returns how many times srv ran cmd, from INFO commandstats.
func commandCalls(t *testing.T, srv *redistest.Server, cmd string) int64 {
	t.Helper()
	info, err := srv.Do(t, "INFO", "commandstats").ToString()
	if err != nil {
		t.Fatalf("INFO commandstats on %s: %v", srv.Addr(), err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls=")
		if ok {
			n, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
			return n
		}
	}
	return 0
}

// errorStats returns the errorstat lines of srv's INFO errorstats, joined.
func errorStats(t *testing.T, srv *redistest.Server) string {
	t.Helper()
	info, err := srv.Do(t, "INFO", "errorstats").ToString()
	if err != nil {
		t.Fatalf("INFO errorstats on %s: %v", srv.Addr(), err)
	}
	var stats []string
	for _, line := range strings.Split(info, "\r\n") {
		if strings.HasPrefix(line, "errorstat_") {
			stats = append(stats, line)
		}
	}
	return strings.Join(stats, " ")
}
