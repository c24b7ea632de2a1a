package redistest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// MasterName is the name the sentinels of a [Sentinel] monitor their primary by.
	MasterName = "admit"
	// sentinelReplicas and sentinelCount shape a Sentinel: one primary, two replicas, three sentinels.
	sentinelReplicas = 2
	sentinelCount    = 3
	// sentinelQuorum is how many sentinels must agree that the primary is down.
	sentinelQuorum = 2
	// sentinelDownAfter and sentinelFailoverTimeout are the sentinels' down-after-milliseconds and
	// failover-timeout: short, so that failover tests are quick.
	sentinelDownAfter       = 1000
	sentinelFailoverTimeout = 5000
)

// A Sentinel is a primary, two replicas and three sentinels (quorum 2) started by [StartSentinel], on
// free 127.0.0.1 ports, the sentinels monitoring the primary as [MasterName]. All are [Server]s: a
// test may Kill, Freeze or Restart any of them. The zero value is not usable.
type Sentinel struct {
	data      []*Server // the primary at start, then its replicas
	sentinels []*Server
}

// StartSentinel starts a primary, two replicas of it and three sentinels monitoring it (quorum 2,
// down-after-milliseconds 1000, failover-timeout 5000), each in its own t.TempDir() without
// persistence, and returns once the replicas are in sync and every sentinel knows both replicas and
// the two other sentinels, so that a failover can start at once. Extra args are passed to the three
// data servers, not the sentinels. Everything is killed at t's cleanup. Like [Start], it skips t when
// redis-server is missing (or fails it when ADMIT_REQUIRE_REDIS is 1).
func StartSentinel(t testing.TB, args ...string) *Sentinel {
	t.Helper()
	requireRedis(t)
	begin := time.Now()
	// Replicas sync without persistence, diskless: at once, not after the default 5s.
	dataArgs := append([]string{"--repl-diskless-sync-delay", "0"}, args...)
	primary, err := start(t, nil, dataArgs, ACLRules+" "+ResetACLRules+" "+SentinelACLRules)
	if err != nil {
		t.Fatalf("redistest: Sentinel primary: %v", err)
	}
	st := &Sentinel{
		data:      make([]*Server, 1+sentinelReplicas),
		sentinels: make([]*Server, sentinelCount),
	}
	st.data[0] = primary
	errs := make([]error, sentinelReplicas+sentinelCount)
	var wg sync.WaitGroup
	for i := range sentinelReplicas {
		wg.Go(func() {
			replicaArgs := append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(primary.Port())}, dataArgs...)
			st.data[1+i], errs[i] = start(t, nil, replicaArgs, ACLRules+" "+ResetACLRules+" "+SentinelACLRules)
		})
	}
	wg.Wait()
	// Sentinels learn of replicas from the primary's INFO, which they read every 10s: start them
	// once the primary lists both replicas, so that the first INFO does.
	waitFor(t, "the replicas to connect", func() string {
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("redistest: Sentinel replica: %v", err)
		}
		repl, err := primary.try("INFO", "replication").ToString()
		if err != nil {
			return err.Error()
		}
		if !strings.Contains(repl, "connected_slaves:"+strconv.Itoa(sentinelReplicas)+"\r\n") {
			return "the primary does not list both replicas yet"
		}
		return ""
	})
	for i := range sentinelCount {
		wg.Go(func() {
			// Sentinel needs a configuration file it can rewrite: its own, in a directory of its own.
			conf := filepath.Join(t.TempDir(), "sentinel.conf")
			text := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d %[3]d\n"+
				"sentinel down-after-milliseconds %[1]s %[4]d\n"+
				"sentinel failover-timeout %[1]s %[5]d\n"+
				"sentinel parallel-syncs %[1]s %[6]d\n",
				MasterName, primary.Port(), sentinelQuorum, sentinelDownAfter, sentinelFailoverTimeout, sentinelReplicas)
			if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
				errs[sentinelReplicas+i] = err
				return
			}
			st.sentinels[i], errs[sentinelReplicas+i] = start(t, []string{conf, "--sentinel"}, nil, "")
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("redistest: Sentinel setup: %v", err)
	}
	st.WaitHealthy(t)
	t.Logf("redistest: Sentinel setup (1 primary, %d replicas, %d sentinels) ready in %v",
		sentinelReplicas, sentinelCount, time.Since(begin).Round(time.Millisecond))
	return st
}

// Servers returns the three data servers: the primary at start, then its two replicas. After a
// failover their roles differ: see [Sentinel.Primary].
func (st *Sentinel) Servers() []*Server {
	return append([]*Server(nil), st.data...)
}

// Sentinels returns the three sentinels.
func (st *Sentinel) Sentinels() []*Server {
	return append([]*Server(nil), st.sentinels...)
}

// URL returns the setup's URL in the form redisstore accepts for Sentinel: the sentinels' addresses
// and the master name, with the credentials of the least-privilege [User] for the data servers (the
// client asks the sentinels, who have no User, without credentials),
// "redis://admit:s3cret@127.0.0.1:S1?addr=127.0.0.1:S2&addr=127.0.0.1:S3&master_set=admit".
func (st *Sentinel) URL() string {
	return st.url(User + ":" + Password + "@")
}

// AdminURL is [Sentinel.URL] without credentials: it logs in to the data servers as the unrestricted
// default user.
func (st *Sentinel) AdminURL() string {
	return st.url("")
}

// url returns the setup's URL with userinfo ("user:password@" or "").
func (st *Sentinel) url(userinfo string) string {
	var b strings.Builder
	b.WriteString("redis://" + userinfo + st.sentinels[0].Addr() + "?")
	for _, s := range st.sentinels[1:] {
		b.WriteString("addr=" + s.Addr() + "&")
	}
	b.WriteString("master_set=" + MasterName)
	return b.String()
}

// Primary returns the data server that the sentinels name as primary and that says it is one (ROLE
// master), waiting up to a minute for a running sentinel to name one that is.
func (st *Sentinel) Primary(t testing.TB) *Server {
	t.Helper()
	var p *Server
	waitFor(t, "a primary", func() (why string) {
		p, why = st.primary(t)
		return why
	})
	return p
}

// primary returns the data server every running sentinel names as primary, if it says it is one, or
// says why not.
func (st *Sentinel) primary(t testing.TB) (*Server, string) {
	t.Helper()
	addr := ""
	for _, s := range st.sentinels {
		if !s.running() {
			continue
		}
		a, err := s.try("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MasterName).AsStrSlice()
		if err != nil || len(a) != 2 {
			return nil, fmt.Sprintf("sentinel %s: GET-MASTER-ADDR-BY-NAME = %v, %v", s.Addr(), a, err)
		}
		got := a[0] + ":" + a[1]
		if addr != "" && got != addr {
			return nil, fmt.Sprintf("sentinels disagree: %s and %s", addr, got)
		}
		addr = got
	}
	if addr == "" {
		return nil, "no sentinel running"
	}
	var p *Server
	for _, d := range st.data {
		if d.Addr() == addr {
			p = d
		}
	}
	if p == nil {
		return nil, fmt.Sprintf("sentinels name %s, not a server of this setup", addr)
	}
	if !p.running() {
		return nil, fmt.Sprintf("sentinels name %s, which is not running", addr)
	}
	role, err := p.try("ROLE").ToArray()
	if err != nil || len(role) == 0 {
		return nil, fmt.Sprintf("ROLE on %s: %v", addr, err)
	}
	if r, _ := role[0].ToString(); r != "master" {
		return nil, fmt.Sprintf("sentinels name %s, whose role is %q", addr, r)
	}
	return p, ""
}

// Failover makes the sentinels fail the primary over to a replica with SENTINEL FAILOVER, and returns
// the new primary once every running sentinel names it and it says it is one (ROLE master). It fails
// t if that takes more than a minute. The old primary is made a replica of the new one by the
// sentinels, shortly after.
func (st *Sentinel) Failover(t testing.TB) *Server {
	t.Helper()
	old := st.Primary(t)
	var asked *Server
	for _, s := range st.sentinels {
		if s.running() {
			asked = s
			break
		}
	}
	if asked == nil {
		t.Fatal("redistest: failover: no sentinel running")
	}
	if err := asked.try("SENTINEL", "FAILOVER", MasterName).Error(); err != nil {
		t.Fatalf("redistest: SENTINEL FAILOVER %s on %s: %v", MasterName, asked.Addr(), err)
	}
	var p *Server
	waitFor(t, "the failover", func() (why string) {
		p, why = st.primary(t)
		if p == old {
			p, why = nil, "the sentinels still name the old primary "+old.Addr()
		}
		return why
	})
	return p
}

// WaitHealthy returns once a primary is named by every running sentinel, every running replica's
// link to it is up, and every running sentinel knows the running replicas and the other running
// sentinels and has its quorum (SENTINEL CKQUORUM). It fails t if that takes more than a minute.
func (st *Sentinel) WaitHealthy(t testing.TB) {
	t.Helper()
	waitFor(t, "a healthy Sentinel setup", func() string { return st.unhealthy(t) })
}

// unhealthy says why the setup is not healthy, or returns "".
func (st *Sentinel) unhealthy(t testing.TB) string {
	t.Helper()
	p, why := st.primary(t)
	if p == nil {
		return why
	}
	replicas, sentinels := 0, 0
	for _, d := range st.data {
		if d == p || !d.running() {
			continue
		}
		replicas++
		repl, err := d.try("INFO", "replication").ToString()
		if err != nil {
			return fmt.Sprintf("INFO replication on %s: %v", d.Addr(), err)
		}
		if !strings.Contains(repl, "master_port:"+strconv.Itoa(p.Port())+"\r\n") || !strings.Contains(repl, "master_link_status:up") {
			return fmt.Sprintf("replica %s: not in sync with %s", d.Addr(), p.Addr())
		}
	}
	for _, s := range st.sentinels {
		if s.running() {
			sentinels++
		}
	}
	for _, s := range st.sentinels {
		if !s.running() {
			continue
		}
		known, err := s.try("SENTINEL", "REPLICAS", MasterName).ToArray()
		if err != nil {
			return fmt.Sprintf("SENTINEL REPLICAS on %s: %v", s.Addr(), err)
		}
		ok := 0
		for _, r := range known {
			m, err := r.AsStrMap()
			if err == nil && !strings.Contains(m["flags"], "down") && !strings.Contains(m["flags"], "disconnected") {
				ok++
			}
		}
		if ok < replicas {
			return fmt.Sprintf("sentinel %s knows %d healthy replicas of %d", s.Addr(), ok, replicas)
		}
		others, err := s.try("SENTINEL", "SENTINELS", MasterName).ToArray()
		if err != nil {
			return fmt.Sprintf("SENTINEL SENTINELS on %s: %v", s.Addr(), err)
		}
		if len(others) < sentinels-1 {
			return fmt.Sprintf("sentinel %s knows %d other sentinels of %d", s.Addr(), len(others), sentinels-1)
		}
		if err := s.try("SENTINEL", "CKQUORUM", MasterName).Error(); err != nil {
			return fmt.Sprintf("SENTINEL CKQUORUM on %s: %v", s.Addr(), err)
		}
	}
	return ""
}

// waitFor polls cond, which says what is not yet so or returns "", until it returns "", failing t if
// that takes more than a minute.
func waitFor(t testing.TB, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(topologyTimeout)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: waiting for %s: not done within %v: %s", what, topologyTimeout, why)
		}
		time.Sleep(pollPause)
	}
}
