package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/guard"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/metrics"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/service"
)

const replicatedConfig = `policies:
  - {name: api, algorithm: fixed_window, limit: 10, window: 1s}
  - {name: pay, algorithm: fixed_window, limit: 5, window: 1m, durability: replicated, tiers: {big: {limit: 50}}}
routes:
  - {path_prefix: /, policies: [api, pay]}
`

// A replicated policy on the in-memory store refuses to start, saying why.
func TestReplicatedOnMemoryRefused(t *testing.T) {
	file := filepath.Join(t.TempDir(), "admit.yaml")
	writeConfig(t, file, replicatedConfig)
	var stderr bytes.Buffer
	code := run(t.Context(), []string{"serve", "--listen", "127.0.0.1:0", "--config", file, "--redis", ""}, &bytes.Buffer{}, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "policy pay has durability: replicated, and the in-memory store has no replicas") {
		t.Errorf("serve with a replicated policy in memory: exit %d, stderr %q; want 2 saying why", code, stderr.String())
	}
}

// admit check refuses a configuration with a replicated policy as admit serve does (exit 2, the
// reason on stderr, nothing decided): in memory, and on a Redis with too few replicas; on a
// primary with its replica it decides.
func TestCheckReplicated(t *testing.T) {
	useSecret(t)
	file := filepath.Join(t.TempDir(), "admit.yaml")
	writeConfig(t, file, replicatedConfig)
	checkCmd := func(redis string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), []string{"check", "--config", file, "--policy", "api", "--key", "alice", "--redis", redis}, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	lone := redistest.Start(t)
	for _, c := range []struct {
		what, redis, why string
	}{
		{"in memory", "", "policy pay has durability: replicated, and the in-memory store has no replicas to confirm a write (its state goes with the process)"},
		{"on a lone Redis", lone.AdminURL(), "policy pay waits for 1 replicas"},
		{"as a user that may not read INFO", lone.URL(), "+info"},
	} {
		if code, out, errs := checkCmd(c.redis); code != checkInvalid || out != "" || !strings.Contains(errs, c.why) {
			t.Errorf("admit check %s: exit %d, stdout %q, stderr %q; want 2 saying %q", c.what, code, out, errs, c.why)
		}
	}
	if n, err := lone.Do(t, "DBSIZE").AsInt64(); err != nil || n != 0 {
		t.Errorf("the lone Redis holds %d keys (%v) after the refused checks; want none", n, err)
	}
	redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(lone.Port()))
	waitConnected(t, lone)
	if code, out, errs := checkCmd(lone.AdminURL()); code != checkAllowed || !strings.Contains(out, `"allowed": true`) {
		t.Errorf("admit check on a primary with its replica: exit %d, stdout %q, stderr %q; want 0, allowed", code, out, errs)
	}
}

func TestPolicyReplicas(t *testing.T) {
	cfg, err := policy.Parse("r.yaml", []byte(replicatedConfig))
	if err != nil {
		t.Fatal(err)
	}
	if n, which := policyReplicas(cfg); n != 1 || which != "policy pay" {
		t.Errorf("policyReplicas = %d, %q; want 1, policy pay", n, which)
	}
	cfg, err = policy.Parse("r.yaml", []byte("policies:\n  - {name: api, algorithm: fixed_window, limit: 10, window: 1s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := policyReplicas(cfg); n != 0 {
		t.Errorf("policyReplicas of async policies = %d; want 0", n)
	}
}

// checkDurability against real Redis: a lone server has no replica, a primary with one does.
func TestCheckDurability(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	if err := checkDurability(ctx, memstore.New(memstore.Options{}), 0, "nothing", logger); err != nil {
		t.Errorf("no replicated policy on memory: %v", err)
	}
	lone := redistest.Start(t)
	s, err := redisstore.New(redisstore.Config{URL: lone.AdminURL(), CommandTimeout: preflightTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := checkDurability(ctx, s, 1, "policy pay", logger); !errors.Is(err, errDurability) || !errors.Is(err, redisstore.ErrTooFewReplicas) {
		t.Errorf("a replicated policy on a lone server: %v; want ErrTooFewReplicas", err)
	}
	var logs bytes.Buffer
	redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(lone.Port()))
	waitConnected(t, lone)
	if err := checkDurability(ctx, s, 1, "policy pay", slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Errorf("a replicated policy on a primary with a replica: %v", err)
	}
	if !strings.Contains(logs.String(), "min-replicas-to-write is unset") {
		t.Errorf("no warning about min-replicas-to-write: %s", logs.String())
	}
}

// waitConnected waits until srv lists a connected replica.
func waitConnected(t *testing.T, srv *redistest.Server) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if info, _ := srv.Do(t, "INFO", "replication").ToString(); strings.Contains(info, "connected_slaves:1\r\n") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no replica connected within a minute")
}

// admit serve on a primary with one replica: a replicated policy answers 200 while the replica
// confirms, 503 once it is stopped, while the async policy goes on answering 200; as the
// least-privilege user (no +info) it refuses to start, saying what the user lacks.
func TestServeReplicatedStalledReplica(t *testing.T) {
	useSecret(t)
	// hz 1: Redis would end a timed-out WAIT up to a second late, so that only admit's own timer
	// answers the 503s below in time.
	primary := redistest.Start(t, "--repl-diskless-sync-delay", "0", "--hz", "1")
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port()), "--repl-diskless-sync-delay", "0")
	waitConnected(t, primary)
	file := filepath.Join(t.TempDir(), "admit.yaml")
	writeConfig(t, file, `policies:
  - {name: api, algorithm: fixed_window, limit: 1000, window: 1m}
  - {name: pay, algorithm: fixed_window, limit: 1000, window: 1m, durability: replicated, durability_timeout: 100ms}
`)
	var stderr bytes.Buffer
	if code := run(t.Context(), []string{"serve", "--listen", "127.0.0.1:0", "--config", file, "--redis", primary.URL()}, &bytes.Buffer{}, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "+info") {
		t.Errorf("serve as the least-privilege user: exit %d, stderr %q; want 2 naming +info", code, stderr.String())
	}

	base, logs, _ := serveInProcess(t, "--config", file, "--redis", primary.AdminURL())
	if !strings.Contains(logs.String(), "min-replicas-to-write is unset") {
		t.Errorf("no warning about min-replicas-to-write in the log:\n%s", logs)
	}
	check := func(policy string) int {
		t.Helper()
		resp, err := http.Post(base+"/v1/check", "application/json", strings.NewReader(`{"policy":"`+policy+`","key":"alice"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if a := check("api"); a != http.StatusOK {
		t.Fatalf("with the replica up: api %d; want 200", a)
	}
	// With the replica up, pay is admitted once the replica acknowledges within 100 ms: on a
	// loaded machine an acknowledgement may take longer, and that decision is undecided (503),
	// so the test asks again, patiently, until one is admitted.
	for deadline, p := time.Now().Add(30*time.Second), 0; p != http.StatusOK; {
		if p = check("pay"); p != http.StatusOK && p != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("with the replica up: pay %d; want 200 within 30 s", p)
		}
	}
	replica.Freeze(t)
	defer replica.Thaw(t)
	// Each 503 comes within durability_timeout and 50 ms of the request's start, on the Store's own
	// timer. Asserted
	// on the median, as TestReplicatedStalledReplica: one request descheduled on a loaded machine
	// says nothing of the timer.
	var times []time.Duration
	for range 2 * guard.DefaultFailures { // more than the breaker's failures: an undecided decision does not open it
		begin := time.Now()
		p := check("pay")
		times = append(times, time.Since(begin))
		if p != http.StatusServiceUnavailable {
			t.Errorf("replicated policy with the replica stopped: %d; want 503", p)
		}
	}
	slices.Sort(times)
	if median := times[len(times)/2]; median > 150*time.Millisecond {
		t.Errorf("503s of the replicated policy with the replica stopped: median %v, want at most durability_timeout 100ms and 50 ms (all: %v)", median, times)
	}
	t.Logf("503s of the replicated policy with the replica stopped (durability_timeout 100ms): %v", times)
	if a := check("api"); a != http.StatusOK {
		t.Errorf("async policy with the replica stopped: %d; want 200", a)
	}
}

// A replicated Envoy rule on the in-memory store refuses to start too, naming the rule.
func TestReplicatedEnvoyRuleOnMemoryRefused(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, filepath.Join(dir, "pay.yaml"), "domain: pay\ndescriptors:\n  - key: account\n    rate_limit: {unit: minute, requests_per_unit: 5, durability: replicated}\n")
	var stderr bytes.Buffer
	code := run(t.Context(), []string{"serve", "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0", "--envoy-config", dir, "--redis", ""}, &bytes.Buffer{}, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "the Envoy rule pay account has durability: replicated, and the in-memory store has no replicas") {
		t.Errorf("serve with a replicated Envoy rule in memory: exit %d, stderr %q; want 2 saying why", code, stderr.String())
	}
}

// A reload that makes a policy replicated is refused where the backend cannot serve it, in memory
// and on a lone Redis (no replica): the loaded configuration keeps serving, and the log says why.
func TestReloadReplicatedRefused(t *testing.T) {
	lone := redistest.Start(t)
	for _, c := range []struct {
		name string
		open func(t *testing.T) admit.Store
		why  string
	}{
		{"memory", func(t *testing.T) admit.Store { return memstore.New(memstore.Options{}) }, "in-memory store has no replicas"},
		{"lone Redis", func(t *testing.T) admit.Store {
			s, err := redisstore.New(redisstore.Config{URL: lone.AdminURL(), CommandTimeout: preflightTimeout})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, "policy pay waits for 1 replicas: redisstore: too few replicas"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "admit.yaml")
			writeFile(t, file, "policies:\n  - {name: pay, algorithm: fixed_window, limit: 5, window: 1m}\n")
			cfg, err := policy.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			keys, err := admit.NewKeyBuilder([]byte(testSecret))
			if err != nil {
				t.Fatal(err)
			}
			store := c.open(t)
			defer store.(interface{ Close() error }).Close()
			svc, err := service.New(store, keys, cfg)
			if err != nil {
				t.Fatal(err)
			}
			m, err := metrics.NewConfig(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			logs := &logWatch{}
			r := &reloader{file: file, svc: svc, metrics: m, logger: slog.New(slog.NewTextHandler(logs, nil)), server: cfg.Server, backend: store}
			writeFile(t, file, "policies:\n  - {name: pay, algorithm: fixed_window, limit: 5, window: 1m, durability: replicated}\n")
			r.reload(cfg.Hash, true)
			if got := svc.Config().Hash; got != cfg.Hash {
				t.Errorf("the replicated configuration was swapped in (hash %s, want the loaded %s)", got, cfg.Hash)
			}
			if !strings.Contains(logs.String(), "configuration not reloaded") || !strings.Contains(logs.String(), c.why) {
				t.Errorf("the log does not say why (%q):\n%s", c.why, logs)
			}
			// The loaded, async policy decides as before.
			res, err := svc.Check(t.Context(), service.Check{Policies: []string{"pay"}, Subject: admit.Subject{ID: "alice"}, Cost: 1})
			if err != nil || !res.Allowed {
				t.Errorf("a decision of the loaded policy after the refused reload: %+v, %v; want admitted", res, err)
			}
		})
	}
}

// A replicated Envoy rule, its primary's one replica stopped (SIGSTOP): ShouldRateLimit answers
// gRPC UNAVAILABLE (undecided), while an async rule beside it answers OK.
func TestE2EEnvoyReplicatedStalledReplica(t *testing.T) {
	primary := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port()), "--repl-diskless-sync-delay", "0")
	waitConnected(t, primary)
	dir := t.TempDir()
	writeConfig(t, filepath.Join(dir, "pay.yaml"), `domain: pay
descriptors:
  - key: account
    rate_limit: {unit: minute, requests_per_unit: 1000, durability: replicated, durability_timeout: 100ms}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000}
`)
	p := startAdmit(t, "--envoy-config", dir, "--grpc-listen", "127.0.0.1:0", "--redis", primary.AdminURL())
	p.logs.waitLine(t, "listening for gRPC")
	m := grpcListeningRE.FindStringSubmatch(p.logs.String())
	if m == nil {
		t.Fatalf("no gRPC address in the log:\n%s", p.logs)
	}
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := rlsv3.NewRateLimitServiceClient(conn)
	ask := func(key string) (rlsv3.RateLimitResponse_Code, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "pay", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: "alice"}},
		}}})
		return resp.GetOverallCode(), err
	}
	// With the replica up, the replicated rule answers OK once the replica acknowledges within
	// 100 ms: on a loaded machine it may not, and that hit is UNAVAILABLE, so the test asks again.
	for deadline := time.Now().Add(30 * time.Second); ; {
		code, err := ask("account")
		if err == nil && code == rlsv3.RateLimitResponse_OK {
			break
		}
		if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			t.Fatalf("the replicated rule with the replica up: %v, %v; want OK within 30 s", code, err)
		}
	}
	replica.Freeze(t)
	defer replica.Thaw(t)
	for i := range 3 {
		if code, err := ask("account"); status.Code(err) != codes.Unavailable {
			t.Errorf("the replicated rule with the replica stopped, hit %d: %v, %v; want gRPC UNAVAILABLE", i, code, err)
		}
	}
	if code, err := ask("user"); err != nil || code != rlsv3.RateLimitResponse_OK {
		t.Errorf("the async rule with the replica stopped: %v, %v; want OK", code, err)
	}
}
