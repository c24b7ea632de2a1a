package redisstore

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
)

// Least privilege (docs/redis.md): admit works as a user who may only EVALSHA, SCRIPT LOAD, MULTI and EXEC, PING and the scripts'
// own commands on rl:* keys. Every Redis test runs as that user, the conformance suite included (TestConformance): the
// harness creates it on every server, with redistest.ACLRules, and its URLs log in as it. This test
// checks that it is so, and what the suite does not: a SCRIPT FLUSH, a key outside rl:*, EVAL.
func TestLeastPrivilegeUser(t *testing.T) {
	srv := redistest.Start(t)
	url := srv.URL()
	if !strings.Contains(url, redistest.User+":"+redistest.Password+"@") {
		t.Fatalf("the harness's URL %s does not log in as its least-privilege user %s", url, redistest.User)
	}
	// The harness's user has exactly the rules of ACLRules and ResetACLRules: the same as a user made
	// with them here.
	setUser(t, srv, "want", ACLRules()+" "+ResetACLRules)
	for _, field := range []string{"commands", "keys", "channels"} {
		got, err := srv.Do(t, "ACL", "GETUSER", redistest.User).AsMap()
		if err != nil {
			t.Fatalf("ACL GETUSER %s: %v", redistest.User, err)
		}
		want, _ := srv.Do(t, "ACL", "GETUSER", "want").AsMap()
		gm, wm := got[field], want[field]
		g, gerr := gm.ToString()
		w, werr := wm.ToString()
		if gerr != nil || werr != nil || g != w {
			t.Errorf("the harness's user has %s %q (%v); ACLRules gives %q (%v)", field, g, gerr, w, werr)
		}
	}
	t.Run("NoScriptReload", func(t *testing.T) {
		s := openPatient(t, url)
		key := newKey(t)
		take(t, s, key, threePerMinute, 1)
		if err := srv.Do(t, "SCRIPT", "FLUSH").Error(); err != nil {
			t.Fatal(err)
		}
		if d := take(t, s, key, threePerMinute, 1); !d.Allowed || d.Remaining != 1 {
			t.Fatalf("after SCRIPT FLUSH, as the restricted user: %+v", d)
		}
	})
	t.Run("Demand", func(t *testing.T) {
		// The RLQS demand script as the restricted user, and as a user without each command it calls,
		// which is refused naming it: ACLRules holds demand.lua's commands as the other scripts'.
		ctx := context.Background()
		now := time.Now()
		if _, _, err := openPatient(t, url).ReportDemand(ctx, "acl", "x", 5, now, time.Minute); err != nil {
			t.Fatalf("ReportDemand as the restricted user: %v", err)
		}
		if err := openPatient(t, url).LeaveDemand(ctx, "acl", "x"); err != nil {
			t.Fatalf("LeaveDemand as the restricted user: %v", err)
		}
		var called []string
		for _, m := range scriptCalls.FindAllStringSubmatch(demandSrc, -1) {
			if c := strings.ToLower(m[2]); !slices.Contains(called, c) {
				called = append(called, c)
			}
		}
		for i, c := range called {
			rules := strings.Replace(ACLRules(), " +"+c, "", 1)
			if rules == ACLRules() {
				t.Errorf("demand.lua calls %s, which ACLRules does not grant", c)
				continue
			}
			_, _, err := openPatient(t, setUser(t, srv, "nodemand"+strconv.Itoa(i), rules)).ReportDemand(ctx, "acl", "y", 5, now, time.Minute)
			if err == nil || !strings.Contains(err.Error(), "can't run this command") {
				t.Errorf("ReportDemand as a user without +%s: %v, want a refusal", c, err)
				continue
			}
			// Redis 7.0 names the script's line, not the command: the line must call c.
			m := scriptLine.FindStringSubmatch(err.Error())
			n := 0
			if m != nil {
				n, _ = strconv.Atoi(m[1])
			}
			lines := strings.Split(demandSrc, "\n")
			if n < 1 || n > len(lines) || !strings.Contains(strings.ToLower(lines[n-1]), "'"+c+"'") {
				t.Errorf("ReportDemand as a user without +%s: %v, want a refusal at a line calling it", c, err)
			}
		}
		t.Logf("demand.lua calls %v", called)
	})
	t.Run("KeyOutsideItsPattern", func(t *testing.T) {
		s := openPatient(t, url)
		_, err := s.Take(context.Background(), admit.Request{Key: "other:key", Limit: threePerMinute, Cost: 1})
		if !errors.Is(err, admit.ErrUnavailable) || !strings.Contains(err.Error(), "NOPERM") {
			t.Fatalf("Take of a key outside ~rl:*: %v, want unavailable with NOPERM", err)
		}
		if n, _ := srv.Do(t, "EXISTS", "other:key").AsInt64(); n != 0 {
			t.Fatal("a refused decision created its key")
		}
	})
	t.Run("TransactionFallback", func(t *testing.T) {
		// The NOSCRIPT fallback's MULTI, SCRIPT LOAD, EVALSHA, EXEC, as the restricted user: it loads
		// the script and answers with the EVALSHA's reply out of EXEC's array, a script's error reply
		// classified as a lone EVALSHA's is.
		s := openPatient(t, url)
		c, err := s.conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		key := newKey(t)
		d := take(t, s, key, admit.Limit{Algorithm: admit.Concurrency, Rate: 2, Period: time.Minute}, 1)
		if err := srv.Do(t, "SCRIPT", "FLUSH").Error(); err != nil {
			t.Fatal(err)
		}
		n, err := evalshaInTransaction(ctx, c, releaseScript, []string{key}, []string{strconv.FormatUint(d.Token, 10)}).AsInt64()
		if err != nil || n != 1 {
			t.Fatalf("release of a held lease in the transaction: %d, %v; want 1", n, err)
		}
		if exists, _ := srv.Do(t, "SCRIPT", "EXISTS", releaseScript.sha).AsIntSlice(); len(exists) != 1 || exists[0] != 1 {
			t.Errorf("the transaction did not leave the release script loaded: SCRIPT EXISTS %v", exists)
		}
		if n, _ := srv.Do(t, "ZCARD", key).AsInt64(); n != 0 {
			t.Errorf("the key holds %d leases after the release, want 0", n)
		}
		_, err = evalshaInTransaction(ctx, c, releaseScript, []string{key}, []string{"not-a-token"}).ToMessage()
		if err = scriptError(err); !errors.Is(err, admit.ErrInvalidRequest) || !strings.Contains(err.Error(), "lease token") {
			t.Fatalf("an invalid release in the transaction: %v, want admit.ErrInvalidRequest from the script", err)
		}
	})
	t.Run("NoEval", func(t *testing.T) {
		// The rules really are restrictive: the user cannot EVAL.
		c := openPatient(t, url)
		client, err := c.conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		err = client.Do(context.Background(), client.B().Eval().Script("return 1").Numkeys(0).Build()).Error()
		if err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Fatalf("EVAL as the restricted user: %v, want NOPERM", err)
		}
	})
}

// The ACL rules come from the scripts: every call names its command literally, so none is missed,
// and docs/redis.md gives exactly the rules ACLRules derives.
func TestACLRulesMatchScriptsAndDocs(t *testing.T) {
	if !slices.Contains(scriptSources(), demandSrc) || len(scriptCalls.FindAllString(demandSrc, -1)) == 0 {
		t.Error("the ACL rules are not derived from the RLQS demand script (demand.lua), or it calls nothing")
	}
	for _, src := range scriptSources() {
		for _, m := range scriptCalls.FindAllStringSubmatch(src, -1) {
			if m[2] == "" {
				t.Errorf("a script calls Redis with a command that is not a literal string (%q): ACLRules cannot see it", m[0])
			}
		}
	}
	const want = "DECRBY DEL GET HGETALL HINCRBY HSET INCRBY PEXPIREAT PEXPIRETIME PTTL SET TIME ZADD ZCARD ZCOUNT ZRANGE ZREM ZREMRANGEBYSCORE"
	if got := scriptCommands(); strings.Join(got, " ") != want {
		t.Errorf("the scripts call %v; want %s (update this test and the docs together)", got, want)
	}
	if ACLRules() != redistest.ACLRules {
		t.Errorf("ACLRules() = %s\nbut the tests run as a user with redistest.ACLRules = %s\n(update redistest.ACLRules and the docs together)",
			ACLRules(), redistest.ACLRules)
	}
	if ResetACLRules != redistest.ResetACLRules {
		t.Errorf("ResetACLRules = %s\nbut the tests run as a user with redistest.ResetACLRules = %s", ResetACLRules, redistest.ResetACLRules)
	}
	if clusterACLRules != redistest.ClusterACLRules {
		t.Errorf("Preflight's hint names the cluster rules %s\nbut the tests run as a user with redistest.ClusterACLRules = %s",
			clusterACLRules, redistest.ClusterACLRules)
	}
	doc, err := os.ReadFile("../docs/redis.md")
	if err != nil {
		t.Fatal(err)
	}
	if line := "ACL SETUSER admit on >PASSWORD " + redistest.ACLRules; !strings.Contains(string(doc), line) {
		t.Errorf("docs/redis.md does not give the rules the scripts need; want the line\n%s", line)
	}
	ops, err := os.ReadFile("../docs/running-redis.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ACL SETUSER admit on >PASSWORD " + redistest.ACLRules, "`" + redistest.SentinelACLRules + "`", "`" + redistest.ClusterACLRules + "`"} {
		if !strings.Contains(string(ops), want) {
			t.Errorf("docs/running-redis.md does not give the rules the tests run with; want\n%s", want)
		}
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if rules := strings.TrimPrefix(redistest.ACLRules, "resetkeys ~rl:* resetchannels "); !strings.Contains(string(readme), "`"+rules+"` on\n`~rl:*`") {
		t.Errorf("README.md does not give the rules the scripts need; want\n`%s` on\n`~rl:*`", rules)
	}
}

// On Sentinel and Cluster the client needs commands besides the scripts', outside the data path:
// ROLE, to check that the server the sentinels name is the primary; CLUSTER SLOTS (Redis 7; CLUSTER
// SHARDS from Redis 8), to read the cluster's topology, and ASKING, to follow an ASK redirect while a
// slot migrates. Without the first every decision fails, without ASKING every decision on a
// migrating slot's moved keys; Preflight names the missing command, and with
// redistest.SentinelACLRules or ClusterACLRules added, which docs/running-redis.md gives, it passes
// (the rest of the suite runs as such a user; TestClusterTopologyChanges/ReshardSlotUnderLoad
// follows ASK redirects as it).
func TestTopologyACLRules(t *testing.T) {
	ctx := context.Background()
	// refused makes the user name on every node with ACLRules and extra, and checks that Preflight
	// as it names missing and the rules.
	refused := func(t *testing.T, nodes []*redistest.Server, url, name, extra, missing, rules string) {
		t.Helper()
		for _, n := range nodes {
			args := append([]string{"ACL", "SETUSER", name, "on", ">pw"}, strings.Fields(ACLRules()+" "+extra)...)
			if err := n.Do(t, args...).Error(); err != nil {
				t.Fatalf("ACL SETUSER on %s: %v", n.Addr(), err)
			}
		}
		_, err := openPatient(t, strings.Replace(url, redistest.User+":"+redistest.Password+"@", name+":pw@", 1)).Preflight(ctx)
		if !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), "'"+missing+"'") || !strings.Contains(err.Error(), rules) {
			t.Errorf("Preflight as a user with ACLRules %s: %v, want ErrPermission naming %q and the rules %s", extra, err, missing, rules)
		}
	}
	accepted := func(t *testing.T, url string) {
		t.Helper()
		if _, err := openPatient(t, url).Preflight(ctx); err != nil {
			t.Errorf("Preflight as the harness's user: %v", err)
		}
	}
	t.Run("Sentinel", func(t *testing.T) {
		st := redistest.StartSentinel(t)
		refused(t, st.Servers(), st.URL(), "scripts-only", "", "role", redistest.SentinelACLRules)
		accepted(t, st.URL())
	})
	t.Run("Cluster", func(t *testing.T) {
		c := redistest.StartCluster(t)
		refused(t, c.Nodes(), c.URL(), "scripts-only", "", "cluster|slots", redistest.ClusterACLRules)
		refused(t, c.Nodes(), c.URL(), "no-asking", "+cluster|slots +cluster|shards", "asking", redistest.ClusterACLRules)
		accepted(t, c.URL())
	})
}
