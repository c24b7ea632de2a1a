package redisstore

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
)

// replicatedLimit is a fixed window of rate units an hour, waiting for n replicas up to wait.
func replicatedLimit(rate int64, n int, wait time.Duration) admit.Limit {
	return admit.Limit{Algorithm: admit.FixedWindow, Rate: rate, Period: time.Hour, Replicas: n, ReplicaTimeout: wait}
}

// Issue 28: a replica stopped (SIGSTOP) with replicated N = 1 of 1. Admitting decisions of the
// replicated policy are undecided (ErrUnavailable, the unit consumed on the primary, nothing
// admitted); its rejections and peeks wait for nothing; the async policy on the same Store carries
// on, and a replicated call blocked in WAIT does not hold up async calls sharing the client.
func TestReplicatedStalledReplica(t *testing.T) {
	primary, replicas := redistest.StartReplicated(t, 1)
	s, err := New(Config{URL: primary.URL(), CommandTimeout: patientCommandTimeout, DialTimeout: patientCommandTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	const wait = 300 * time.Millisecond
	repl := replicatedLimit(100, 1, wait)
	async := admit.Limit{Algorithm: admit.FixedWindow, Rate: 1_000_000, Period: time.Hour}
	ctx := context.Background()

	key, full := newKey(t), newKey(t)
	// With the replica up, a patient wait: on a loaded machine the replica may take more than
	// 300 ms to acknowledge. The timeout is not in the key, so the calls below share these keys.
	patient := replicatedLimit(100, 1, patientCommandTimeout)
	if d, err := s.Take(ctx, admit.Request{Key: key, Limit: patient, Cost: 1}); err != nil || !d.Allowed {
		t.Fatalf("replicated take with its replica up: %+v, %v; want admitted", d, err)
	}
	if d, err := s.Take(ctx, admit.Request{Key: full, Limit: replicatedLimit(1, 1, patientCommandTimeout), Cost: 1}); err != nil || !d.Allowed {
		t.Fatalf("replicated take with its replica up: %+v, %v; want admitted", d, err)
	}

	replicas[0].Freeze(t)
	t.Cleanup(func() { replicas[0].Thaw(t) })

	// Each call answers undecided within its timeout and 50 ms, on the client's own timer, whatever
	// Redis's hz: Redis ends a WAIT only when its event loop wakes after the timeout, up to a server
	// cron tick late (1 s at hz 1, which most calls run at so that a bound left to Redis fails the
	// test; 100 ms at the default hz 10). Each abandoned WAIT closes its connection: the next call
	// dials another (the clients the primary counts are logged). The bound is asserted on the median of the calls,
	// each measured from its start: on a loaded machine one call may be descheduled past it, which
	// says nothing of the client's timer; every call must still end within a hang guard.
	const bound = wait + 50*time.Millisecond
	clientsBefore := infoField(t, primary, "clients", "connected_clients")
	var times []time.Duration
	for i, hz := range []string{"1", "1", "1", "1", "1", "10", "100"} {
		primary.Do(t, "CONFIG", "SET", "hz", hz)
		begin := time.Now()
		d, err := s.Take(ctx, admit.Request{Key: key, Limit: repl, Cost: 1})
		elapsed := time.Since(begin)
		if !errors.Is(err, admit.ErrUnavailable) || !errors.Is(err, errUndecided) || d.Allowed {
			t.Fatalf("replicated take %d with its replica stopped: %+v, %v; want undecided (ErrUnavailable), not admitted", i, d, err)
		}
		if elapsed > wait+patientCommandTimeout {
			t.Errorf("replicated take %d with its replica stopped: undecided after %v, past the hang guard %v", i, elapsed, wait+patientCommandTimeout)
		}
		times = append(times, elapsed)
		t.Logf("replicated take %d with its replica stopped, hz %s: undecided after %v (timeout %v): %v", i, hz, elapsed.Round(time.Millisecond), wait, err)
	}
	slices.Sort(times)
	if median := times[len(times)/2]; median > bound {
		t.Errorf("replicated takes with their replica stopped: median %v, want at most the timeout and 50 ms, %v (all: %v)", median, bound, times)
	}
	t.Logf("clients connected to the primary: %s before the stopped replica's calls, %s after", clientsBefore, infoField(t, primary, "clients", "connected_clients"))
	primary.Do(t, "CONFIG", "SET", "hz", "10")
	if n := counter(t, primary, key); n != 8 {
		t.Errorf("counter on the primary %d, want 8: one admitted, seven undecided, each consumed", n)
	}

	// A rejection and a peek write nothing and wait for nothing: they answer, with no error.
	if d, err := s.Take(ctx, admit.Request{Key: full, Limit: replicatedLimit(1, 1, wait), Cost: 1}); err != nil || d.Allowed {
		t.Errorf("replicated rejection with its replica stopped: %+v, %v; want rejected, no error", d, err)
	}
	if _, err := s.Take(ctx, admit.Request{Key: key, Limit: repl, Cost: 0}); err != nil {
		t.Errorf("replicated peek with its replica stopped: %v; want no error", err)
	}
	// Several policies in one call, one of them replicated: the call is undecided as a whole.
	ds := make([]admit.Decision, 2)
	slot := newKey(t)
	if ok, err := s.TakeAll(ctx, []admit.Request{{Key: slot, Limit: async, Cost: 1}, {Key: slot + ":b", Limit: repl, Cost: 1}}, ds); ok || !errors.Is(err, errUndecided) || ds[0].Allowed || ds[1].Allowed {
		t.Errorf("TakeAll of an async and a replicated policy with the replica stopped: %v, %v; want undecided", ok, err)
	}

	// Async decisions carry on, also while a replicated call waits in WAIT on the stopped replica.
	long := replicatedLimit(100, 1, 20*time.Second)
	var wg sync.WaitGroup
	var replErr error
	var replDone time.Time
	wg.Go(func() {
		_, replErr = s.Take(ctx, admit.Request{Key: newKey(t), Limit: long, Cost: 1})
		replDone = time.Now()
	})
	waitBlocked(t, primary)
	begin := time.Now()
	var slowest time.Duration
	for i := range 200 {
		b := time.Now()
		d, err := s.Take(ctx, admit.Request{Key: newKey(t), Limit: async, Cost: 1})
		slowest = max(slowest, time.Since(b))
		if err != nil || !d.Allowed {
			t.Fatalf("async take %d while a replicated call waits: %+v, %v; want admitted", i, d, err)
		}
	}
	asyncDone := time.Now()
	if blocked := blockedClients(t, primary); blocked != 1 {
		t.Errorf("after the async calls the primary has %d blocked clients, want 1 (the replicated call's WAIT): the async calls did not overlap the wait", blocked)
	}
	t.Logf("200 async takes while a replicated call waited in WAIT: %v in all, slowest %v", asyncDone.Sub(begin).Round(time.Microsecond), slowest.Round(time.Microsecond))
	replicas[0].Thaw(t)
	wg.Wait()
	if replDone.Before(asyncDone) {
		t.Errorf("the replicated call returned before the async calls were done (%v): they did not overlap its wait", replErr)
	}
	t.Logf("the waiting replicated call, its replica thawed: %v", replErr)

	// No late WAIT reply is read as a later command's: with the replica back, a replicated take on
	// key is admitted, its Decision the script's.
	d, err := s.Take(ctx, admit.Request{Key: key, Limit: patient, Cost: 1})
	if err != nil || !d.Allowed || d.Remaining != 100-9 {
		t.Errorf("replicated take with the replica thawed: %+v, %v; want admitted, %d remaining", d, err, 100-9)
	}
}

// A replicated decision that needs a new dedicated connection dials it within the call's deadline,
// not the dial timeout: with the server stopped (SIGSTOP, the kernel still accepting), the call
// fails at its deadline, and the connection, dialed on once the server resumes, serves the next.
func TestReplicatedDialWithinDeadline(t *testing.T) {
	srv := redistest.Start(t)
	s, err := New(Config{URL: srv.URL(), CommandTimeout: patientCommandTimeout, DialTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	bg := context.Background()
	if _, err := s.Take(bg, admit.Request{Key: newKey(t), Limit: threePerMinute, Cost: 1}); err != nil {
		t.Fatalf("async take to connect: %v", err)
	}
	srv.Freeze(t)
	t.Cleanup(func() { srv.Thaw(t) })
	ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err = s.Take(ctx, admit.Request{Key: newKey(t), Limit: replicatedLimit(10, 1, 10*time.Millisecond), Cost: 1})
	elapsed := time.Since(begin)
	srv.Thaw(t)
	if !errors.Is(err, admit.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no dedicated connection") {
		t.Fatalf("replicated take with the server stopped, a 300ms deadline and a 1m dial timeout: %v; want unavailable at its deadline, dialing its dedicated connection", err)
	}
	t.Logf("replicated take with the server stopped: %v after %v (deadline 300ms, dial timeout 1m)", err, elapsed.Round(time.Millisecond))
	deadline := time.Now().Add(time.Minute)
	for len(s.dedicated) != 0 { // the abandoned dial gives its place back once it is done
		if time.Now().After(deadline) {
			t.Fatal("the abandoned dedicated connection still holds its place a minute after the server resumed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, err = s.Take(bg, admit.Request{Key: newKey(t), Limit: replicatedLimit(10, 1, 10*time.Millisecond), Cost: 1})
	if !errors.Is(err, errUndecided) || !strings.Contains(err.Error(), "1 replicas") {
		t.Errorf("replicated take after the server resumed, no replica: %v; want undecided, naming 1 replicas", err)
	}
}

// waitBlocked waits until a client of srv is blocked (in WAIT).
func waitBlocked(t *testing.T, srv *redistest.Server) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for blockedClients(t, srv) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no client blocked in WAIT within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// blockedClients reads INFO clients' blocked_clients of srv.
func blockedClients(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	v := infoField(t, srv, "clients", "blocked_clients")
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("blocked_clients %q", v)
	}
	return n
}

// infoField reads field of srv's INFO section.
func infoField(t *testing.T, srv *redistest.Server, section, field string) string {
	t.Helper()
	info, err := srv.Do(t, "INFO", section).ToString()
	if err != nil {
		t.Fatalf("INFO %s: %v", section, err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	t.Fatalf("no %s in INFO %s:\n%s", field, section, info)
	return ""
}

func TestPreflightReplicas(t *testing.T) {
	primary, _ := redistest.StartReplicated(t, 1)
	s := openPatient(t, primary.AdminURL())
	ctx := context.Background()
	warnings, err := s.PreflightReplicas(ctx, 1)
	if err != nil {
		t.Fatalf("PreflightReplicas(1) with one replica: %v", err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "min-replicas-to-write is unset") {
		t.Errorf("warnings %q, want one about min-replicas-to-write", warnings)
	}
	if _, err := s.PreflightReplicas(ctx, 2); !errors.Is(err, ErrTooFewReplicas) || !strings.Contains(err.Error(), "1 connected replicas") {
		t.Errorf("PreflightReplicas(2) with one replica: %v, want ErrTooFewReplicas naming 1", err)
	}
	primary.Do(t, "CONFIG", "SET", "min-replicas-to-write", "1")
	if warnings, err := s.PreflightReplicas(ctx, 1); err != nil || len(warnings) != 0 {
		t.Errorf("PreflightReplicas(1) with min-replicas-to-write 1: %q, %v; want nothing", warnings, err)
	}
	for _, n := range []int{0, 17} {
		if _, err := s.PreflightReplicas(ctx, n); err == nil || !strings.Contains(err.Error(), "outside 1-16") {
			t.Errorf("PreflightReplicas(%d): %v, want outside 1-16", n, err)
		}
	}
	// The least-privilege user of ACLRules may not read INFO.
	if _, err := openPatient(t, primary.URL()).PreflightReplicas(ctx, 1); !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), "+info") {
		t.Errorf("PreflightReplicas as the least-privilege user: %v, want ErrPermission naming +info", err)
	}
	// A lone server has no replica.
	if _, err := openPatient(t, redistest.Start(t).AdminURL()).PreflightReplicas(ctx, 1); !errors.Is(err, ErrTooFewReplicas) {
		t.Errorf("PreflightReplicas(1) on a lone server: %v, want ErrTooFewReplicas", err)
	}
}

func TestParseReplication(t *testing.T) {
	for _, tc := range []struct {
		info, role string
		n          int
		bad        bool
	}{
		{"# Replication\r\nrole:master\r\nconnected_slaves:2\r\nslave0:ip=x\r\n", "master", 2, false},
		{"role:slave\r\nmaster_host:127.0.0.1\r\n", "slave", 0, false},
		{"role:master\r\n", "", 0, true},
		{"role:master\r\nconnected_slaves:x\r\n", "", 0, true},
		{"", "", 0, true},
	} {
		role, n, err := parseReplication(tc.info)
		if (err != nil) != tc.bad || role != tc.role || n != tc.n {
			t.Errorf("parseReplication(%q) = %q, %d, %v", tc.info, role, n, err)
		}
	}
}

// A frozen primary: a replicated decision fails closed, as any decision (G4), though its script and
// wait run on a dedicated connection; the time it takes is logged.
func TestReplicatedFrozenPrimary(t *testing.T) {
	primary, _ := redistest.StartReplicated(t, 1)
	s := open(t, primary.URL()) // the default 200ms command timeout
	repl := replicatedLimit(100, 1, 0)
	// Before the freeze, one replicated take that succeeds: under the 200ms command timeout a
	// loaded machine may take longer, so the test asks again, patiently.
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, err := s.Take(context.Background(), admit.Request{Key: newKey(t), Limit: repl, Cost: 1})
		if err == nil {
			break
		}
		if !errors.Is(err, admit.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("replicated take before the freeze: %v", err)
		}
	}
	primary.Freeze(t)
	defer primary.Thaw(t)
	for i := range 3 {
		begin := time.Now()
		_, err := s.Take(context.Background(), admit.Request{Key: newKey(t), Limit: repl, Cost: 1})
		elapsed := time.Since(begin)
		if !errors.Is(err, admit.ErrUnavailable) {
			t.Fatalf("replicated take %d on a frozen primary: %v; want ErrUnavailable", i, err)
		}
		t.Logf("replicated take %d on a frozen primary: %v after %v (command timeout %v)", i, err, elapsed.Round(time.Millisecond), DefaultCommandTimeout)
	}
}

// replication: the most replicas any Request of the call asks, and the longest timeout (0 is the
// command timeout), one wait for the call; peeks write nothing and async Requests ask nothing, so
// neither counts. (A rejection is known only once the script ran: takeReplicated waits for nothing
// then, TestReplicatedStalledReplica.)
func TestReplication(t *testing.T) {
	const cmd = 200 * time.Millisecond
	req := func(n int, wait time.Duration, cost int64) admit.Request {
		return admit.Request{Key: "k", Limit: admit.Limit{Algorithm: admit.FixedWindow, Rate: 10, Period: time.Minute, Replicas: n, ReplicaTimeout: wait}, Cost: cost}
	}
	for _, tc := range []struct {
		name string
		rs   []admit.Request
		n    int64
		wait time.Duration
	}{
		{"async", []admit.Request{req(0, 0, 1)}, 0, 0},
		{"one, its timeout", []admit.Request{req(1, 300*time.Millisecond, 1)}, 1, 300 * time.Millisecond},
		{"one, the command timeout", []admit.Request{req(2, 0, 1)}, 2, cmd},
		{"a peek", []admit.Request{req(3, time.Second, 0)}, 0, 0},
		{"largest N wins", []admit.Request{req(1, 0, 1), req(3, 0, 1), req(2, 0, 1)}, 3, cmd},
		{"longest timeout wins", []admit.Request{req(2, 50*time.Millisecond, 1), req(1, 700*time.Millisecond, 1), req(1, 0, 1)}, 2, 700 * time.Millisecond},
		{"the command timeout is the longest", []admit.Request{req(1, 50*time.Millisecond, 1), req(1, 0, 1)}, 1, cmd},
		{"peeks left out", []admit.Request{req(1, 100*time.Millisecond, 1), req(5, time.Minute, 0)}, 1, 100 * time.Millisecond},
		{"async and replicated", []admit.Request{req(0, 0, 1), req(1, 100*time.Millisecond, 2)}, 1, 100 * time.Millisecond},
		{"async and a replicated peek", []admit.Request{req(0, 0, 1), req(4, time.Second, 0)}, 0, 0},
	} {
		if n, wait := replication(tc.rs, cmd); n != tc.n || wait != tc.wait {
			t.Errorf("%s: replication = %d, %v; want %d, %v", tc.name, n, wait, tc.n, tc.wait)
		}
	}
}
