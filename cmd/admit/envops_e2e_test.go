package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/certtest"
	"github.com/admit-dev/admit/internal/redistest"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

// envoyYAML is a domain of one limit: two a day for database=users.
const envoyYAML = "domain: mongo_cps\ndescriptors:\n  - key: database\n    value: users\n    rate_limit:\n      unit: day\n      requests_per_unit: 2\n"

// grpcConn connects to the gRPC address of p's log.
func grpcConn(t *testing.T, p *proc) *grpc.ClientConn {
	t.Helper()
	p.logs.waitLine(t, "listening for gRPC")
	m := grpcListeningRE.FindStringSubmatch(p.logs.String())
	if m == nil {
		t.Fatalf("no gRPC address in the log:\n%s", p.logs)
	}
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// askUsers asks for one hit of database=users and returns the response.
func askUsers(t *testing.T, c rlsv3.RateLimitServiceClient) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "mongo_cps", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "database", Value: "users"}},
	}}})
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

// watchNext returns the next status of w, within a patient deadline.
func watchNext(t *testing.T, w healthpb.Health_WatchClient) (healthpb.HealthCheckResponse_ServingStatus, error) {
	t.Helper()
	type got struct {
		st  healthpb.HealthCheckResponse_ServingStatus
		err error
	}
	ch := make(chan got, 1)
	go func() { r, err := w.Recv(); ch <- got{r.GetStatus(), err} }()
	select {
	case g := <-ch:
		return g.st, g.err
	case <-time.After(60 * time.Second):
		t.Fatal("Watch: nothing within 60 s")
		return 0, nil
	}
}

// TestE2EEnvoyEnv runs admit serve --envoy-env on Redis with envoyproxy/ratelimit's environment:
// the directory, the gRPC address, Redis, response headers and the near-limit ratio from its
// variables; the warning that names the variables set and not honoured; gRPC health (Check and
// Watch) for "ratelimit" through Redis's death, its return and SIGTERM; /healthcheck and /json.
func TestE2EEnvoyEnv(t *testing.T) {
	redis := redistest.Start(t)
	root := t.TempDir()
	dir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(envoyYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	env := admitEnv(secretEnv+"="+testSecret,
		"RUNTIME_ROOT="+root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=0",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_TYPE=single", "REDIS_URL="+redis.Addr(), "REDIS_AUTH="+redistest.User+":"+redistest.Password,
		"LIMIT_RESPONSE_HEADERS_ENABLED=true", "NEAR_LIMIT_RATIO=0.5", "LOCAL_CACHE_SIZE_IN_BYTES=0",
		"DEBUG_PORT=6070", "USE_STATSD=false", "LOG_LEVEL=debug", "USE_PROMETHEUS=true", "REDIS_POOL_ON_EMPTY_BEHAVIOR=WAIT", "REDIS_TIMEOUT=2s")
	p := startAdmitEnv(t, env, "--envoy-env")
	conn := grpcConn(t, p)
	logs := p.logs.String()
	if n := strings.Count(logs, "settings not honoured"); n != 1 || !strings.Contains(logs, "variables=DEBUG_PORT,LOG_LEVEL,REDIS_POOL_ON_EMPTY_BEHAVIOR,USE_STATSD") {
		t.Errorf("want one warning naming DEBUG_PORT,LOG_LEVEL,REDIS_POOL_ON_EMPTY_BEHAVIOR,USE_STATSD; %d warnings in:\n%s", n, logs)
	}
	if !strings.Contains(logs, "backend=redis") {
		t.Errorf("the log lacks backend=redis")
	}
	// LOCAL_CACHE_SIZE_IN_BYTES=0: no over-limit cache, whose metrics would be there.
	if page := get(t, p.base+"/metrics").body; strings.Contains(page, "admit_overlimit_cache_entries") {
		t.Errorf("LOCAL_CACHE_SIZE_IN_BYTES=0, and /metrics has the over-limit cache's series")
	}

	health := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, svc := range []string{"", "ratelimit", "envoy.service.ratelimit.v3.RateLimitService"} {
		if r, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: svc}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Check(%q) = %v, %v; want SERVING", svc, r, err)
		}
	}
	w, err := health.Watch(ctx, &healthpb.HealthCheckRequest{Service: "ratelimit"})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := watchNext(t, w); err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch: %v %v, want SERVING", st, err)
	}

	c := rlsv3.NewRateLimitServiceClient(conn)
	for i, want := range []string{"OK", "OK", "OVER_LIMIT"} {
		r := askUsers(t, c)
		if r.OverallCode.String() != want {
			t.Fatalf("request %d: %v, want %s", i+1, r.OverallCode, want)
		}
		left := max(1-i, 0)
		var hs []string
		for _, h := range r.ResponseHeadersToAdd {
			hs = append(hs, h.Key+"="+h.Value)
		}
		if len(hs) != 3 || hs[0] != "RateLimit-Limit=2" || hs[1] != "RateLimit-Remaining="+string(rune('0'+left)) || !strings.HasPrefix(hs[2], "RateLimit-Reset=") {
			t.Fatalf("request %d: headers %v; want RateLimit-Limit=2, RateLimit-Remaining=%d, RateLimit-Reset", i+1, hs, left)
		}
	}
	// The key is in Redis, under the limit's own name: the process decided there.
	if keys, err := redis.Do(t, "KEYS", "rl:*").AsStrSlice(); err != nil || len(keys) != 1 {
		t.Fatalf("KEYS rl:* = %q, %v; want one key", keys, err)
	}

	resp, err := http.Post(p.base+"/json", "application/json", strings.NewReader(`{"domain":"mongo_cps","descriptors":[{"entries":[{"key":"database","value":"users"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || !strings.Contains(string(body), `"overallCode":"OVER_LIMIT"`) {
		t.Fatalf("POST /json: %d %s; want 429 OVER_LIMIT", resp.StatusCode, body)
	}
	if r := get(t, p.base+"/healthcheck"); r.status != 200 || r.body != "OK" {
		t.Fatalf("/healthcheck: %d %q, want 200 OK", r.status, r.body)
	}
	// The second request used 2 of 2, past 0.5 × 2 = 1: one near-limit hit; the others were not.
	if m := regexp.MustCompile(`(?m)^admit_rls_near_limit_total (\S+)$`).FindStringSubmatch(get(t, p.base+"/metrics").body); m == nil || m[1] != "1" {
		t.Fatalf("admit_rls_near_limit_total: %v, want 1", m)
	}
	// USE_PROMETHEUS=true: envoyproxy/ratelimit's series of the rule, by its stats key; the
	// fourth hit, over, was the one of POST /json.
	page := get(t, p.base+"/metrics").body
	for name, want := range map[string]string{"total_hits": "4", "within_limit": "2", "near_limit": "1", "over_limit": "2", "shadow_mode": "0"} {
		re := regexp.MustCompile(`(?m)^ratelimit_service_rate_limit_` + name + `\{domain="mongo_cps",key="mongo_cps.database_users",key1="database_users",key2=""\} (\S+)$`)
		if m := re.FindStringSubmatch(page); m == nil || m[1] != want {
			t.Errorf("ratelimit_service_rate_limit_%s: %v, want %s in\n%s", name, m, want, page)
		}
	}

	redis.Kill(t)
	if st, err := watchNext(t, w); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Redis killed: Watch %v %v, want NOT_SERVING", st, err)
	}
	if r := get(t, p.base+"/healthcheck"); r.status != 500 {
		t.Fatalf("Redis killed: /healthcheck %d %q, want 500", r.status, r.body)
	}
	redis.Restart(t)
	if st, err := watchNext(t, w); err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Redis back: Watch %v %v, want SERVING", st, err)
	}

	p.cmd.Process.Signal(syscall.SIGTERM)
	if st, err := watchNext(t, w); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("SIGTERM: Watch %v %v, want NOT_SERVING before the drain", st, err)
	}
	if _, err := watchNext(t, w); status.Code(err) != codes.Unavailable {
		t.Fatalf("SIGTERM: Watch ends with %v, want Unavailable", err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0: an open Watch must not hold up the graceful stop", code)
	}
}

// TestE2EGRPCReflection lists the services through the reflection client with --grpc-reflection,
// and finds reflection off without it; --shadow-mode lets every request through.
func TestE2EGRPCReflection(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(envoyYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	list := func(conn *grpc.ClientConn) ([]string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
		if err != nil {
			return nil, err
		}
		// A server without reflection may end the stream before the request is sent: Send then
		// says io.EOF, and the stream's status is Recv's to tell.
		if err := s.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		r, err := s.Recv()
		if err != nil {
			return nil, err
		}
		var names []string
		for _, svc := range r.GetListServicesResponse().GetService() {
			names = append(names, svc.GetName())
		}
		slices.Sort(names)
		return names, nil
	}
	p := startAdmit(t, "--envoy-config", dir, "--grpc-listen", "127.0.0.1:0", "--grpc-reflection", "--shadow-mode")
	names, err := list(grpcConn(t, p))
	want := []string{"envoy.service.ratelimit.v3.RateLimitService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}
	if err != nil || !slices.Equal(names, want) {
		t.Fatalf("reflection lists %q, %v; want %q", names, err, want)
	}
	c := rlsv3.NewRateLimitServiceClient(grpcConn(t, p))
	for i := range 4 {
		if r := askUsers(t, c); r.OverallCode != rlsv3.RateLimitResponse_OK {
			t.Fatalf("--shadow-mode, request %d: %v, want OK", i+1, r.OverallCode)
		}
	}

	q := startAdmit(t, "--envoy-config", dir, "--grpc-listen", "127.0.0.1:0")
	if names, err := list(grpcConn(t, q)); status.Code(err) != codes.Unimplemented {
		t.Fatalf("without --grpc-reflection: %q, %v; want Unimplemented", names, err)
	}
	c = rlsv3.NewRateLimitServiceClient(grpcConn(t, q))
	for i, want := range []string{"OK", "OK", "OVER_LIMIT"} {
		if r := askUsers(t, c); r.OverallCode.String() != want {
			t.Fatalf("enforced, request %d: %v, want %s", i+1, r.OverallCode, want)
		}
	}
}

// TestE2EEnvoyEnvGRPCTLS serves gRPC over mutual TLS from GRPC_SERVER_USE_TLS and its files, with
// the HTTP listener left plain, as envoyproxy/ratelimit has them.
func TestE2EEnvoyEnvGRPCTLS(t *testing.T) {
	redis := redistest.Start(t)
	dir := t.TempDir()
	ca, other := certtest.NewCA(t, "admit CA"), certtest.NewCA(t, "another CA")
	server := ca.Server(t).Write(t, dir, "server")
	certtest.WriteFile(t, filepath.Join(dir, "ca.crt"), ca.PEM)
	conf := filepath.Join(dir, "config")
	if err := os.Mkdir(conf, 0o700); err != nil {
		t.Fatal(err)
	}
	certtest.WriteFile(t, filepath.Join(conf, "config.yaml"), []byte(envoyYAML))
	env := admitEnv(secretEnv+"="+testSecret, "RUNTIME_ROOT="+dir, "GRPC_HOST=127.0.0.1", "GRPC_PORT=0",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redis.Addr(), "REDIS_AUTH="+redistest.User+":"+redistest.Password,
		"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT="+server.CertFile, "GRPC_SERVER_TLS_KEY="+server.KeyFile,
		"GRPC_CLIENT_TLS_CACERT="+filepath.Join(dir, "ca.crt"))
	p := startAdmitEnv(t, env, "--envoy-env")
	p.logs.waitLine(t, "listening for gRPC")
	m := grpcListeningRE.FindStringSubmatch(p.logs.String())
	if m == nil {
		t.Fatalf("no gRPC address in the log:\n%s", p.logs)
	}
	check := func(creds credentials.TransportCredentials) error {
		conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "ratelimit"})
		if err == nil && r.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Check over mTLS: %v, want SERVING", r.Status)
		}
		return err
	}
	if err := check(credentials.NewTLS(tlsClient(ca.Pool(), ca.Client(t, "envoy")))); err != nil {
		t.Fatalf("a client certificate of the CA: %v", err)
	}
	for name, creds := range map[string]credentials.TransportCredentials{
		"plaintext":      insecure.NewCredentials(),
		"no certificate": credentials.NewTLS(tlsClient(ca.Pool(), nil)),
		"another CA":     credentials.NewTLS(tlsClient(ca.Pool(), other.Client(t, "envoy"))),
	} {
		if err := check(creds); err == nil {
			t.Errorf("%s: answered; want refused", name)
		}
	}
	if r := get(t, p.base+"/healthcheck"); r.status != 200 || r.body != "OK" {
		t.Errorf("plain HTTP /healthcheck: %d %q; want 200 OK: TLS is gRPC's only", r.status, r.body)
	}
}

// TestE2EEnvoyEnvRefusals runs admit serve --envoy-env with values it refuses (exit 2, naming the
// variable), and on Redis without an HMAC secret: the warning of the variables not honoured comes
// first, before the failure.
func TestE2EEnvoyEnvRefusals(t *testing.T) {
	run := func(env ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(admitBinary(t), "serve", "--envoy-env")
		cmd.Env = admitEnv(append([]string{"GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "HOST=127.0.0.1", "PORT=0"}, env...)...)
		timer := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() }) // a hang guard, not a timing
		defer timer.Stop()
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("admit serve --envoy-env %q: %v, want an exit code\n%s", env, err, out)
		}
		return exit.ExitCode(), string(out)
	}
	for _, c := range []struct{ env, want string }{
		{"CONFIG_TYPE=GRPC_XDS_SOTW", "CONFIG_TYPE"},
		{"BACKEND_TYPE=memcache", "BACKEND_TYPE"},
		{"NEAR_LIMIT_RATIO=two", "NEAR_LIMIT_RATIO"},
		{"REDIS_TYPE=ring", "REDIS_TYPE"},
		{"REDIS_TIMEOUT=soon", "REDIS_TIMEOUT"},
		{"QUOTA_MODE=sometimes", "QUOTA_MODE"},
	} {
		if code, out := run(c.env); code != exitUsage || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d, want %d naming %s:\n%s", c.env, code, exitUsage, c.want, out)
		}
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "config"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config", "config.yaml"), []byte(envoyYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := run("RUNTIME_ROOT="+dir, "REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redistest.ClosedPort(t), "DEBUG_PORT=6070", "TRACING_ENABLED=true")
	warn, fail := strings.Index(out, "variables=DEBUG_PORT,TRACING_ENABLED"), strings.Index(out, `msg="no usable HMAC secret"`)
	if code != exitUsage || warn < 0 || fail < warn || strings.Count(out, "settings not honoured") != 1 {
		t.Errorf("no HMAC secret: exit %d, want %d after one warning naming DEBUG_PORT,TRACING_ENABLED first:\n%s", code, exitUsage, out)
	}
}
