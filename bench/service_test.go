package bench

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/benchrun"
	"github.com/admit-dev/admit/internal/envoyrlproc"
	"github.com/admit-dev/admit/internal/freeport"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/internal/syncbuf"
)

// The service benchmarks run admit serve and its peers as processes, each on its own fresh
// redis-server, and load them with admit bench's engine (internal/benchrun over internal/loadgen)
// from this process, over real sockets. One run of a series is one load of the benchmark's time
// (-benchtime, 1s for an -benchtime of Nx), whatever b.N: its figures are per decision.
//
//	decisions/s      decisions answered per second of the run (closed loop: what the service sustains)
//	ns/op            10^9 / decisions/s
//	svc-cpu-us/op    the server process's CPU (/proc/PID/stat, user + system) per decision
//	redis-cpu-us/op  its redis-server's CPU (INFO cpu, user + sys) per decision
//	p50-us, p99-us   latency quantiles, from each request's scheduled start
//	errors, dropped  requests answered by an error, and (open loop) not started for want of room
//	B/op, allocs/op  the load client's, per decision (the same client for every series)
//
// The load client, the services and their redis-servers share the machine's cores.
//
//	cd bench && ADMIT_REQUIRE_REDIS=1 go test -run '^$' -bench '^BenchmarkService' -benchtime 2s .
//
// ADMIT_BENCH_ADMIT=PATH runs the admit binary at PATH instead of one built from this tree (an A/B
// of two versions); ADMIT_BENCH_RLS_RATES=R,R,… sets the open loop's rates.

// svcDomain, svcPolicy and svcLimit are the configuration every service decides: one rule, or
// one policy, a fixed window of a second whose limit nothing reaches.
const (
	svcDomain = "bench"
	svcPolicy = "bench"
	svcLimit  = 1_000_000_000
)

// svcManyKeys is how many keys the many-keys series go to in turn.
const svcManyKeys = 10_000

// svcHTTPCallers is the closed loop's callers of the HTTP series.
const svcHTTPCallers = 64

// svcCallers are the closed loop's callers of the RLS series.
var svcCallers = []int{1, 16, 256}

// svcRates are the open loop's arrival rates (requests/s), up to envoyproxy/ratelimit's saturation
// on a 2-core machine; ADMIT_BENCH_RLS_RATES (a comma-separated list) replaces them.
var svcRates = []int{1000, 4000, 8000, 12000}

// envoyConfig is the envoyproxy/ratelimit configuration of the RLS series, for both services.
var envoyConfig = fmt.Sprintf(`domain: %s
descriptors:
  - key: key
    rate_limit:
      unit: second
      requests_per_unit: %d
`, svcDomain, svcLimit)

// admitConfig is admit serve's configuration of the HTTP series.
var admitConfig = fmt.Sprintf(`policies:
  - name: %s
    algorithm: fixed_window
    limit: %d
    window: 1s
`, svcPolicy, svcLimit)

// svcSecret is the HMAC secret of admit serve and of the bare handler.
const svcSecret = "bench-service-secret"

// svcStartTimeout bounds a build and a start: patient, as a loaded machine may take long.
const svcStartTimeout = 2 * time.Minute

// BenchmarkServiceRLS_ReferenceEnvoyRL is envoyproxy/ratelimit's service (built from its module
// in compat/envoyrl/refsvc, Redis with no local cache, no statsd, log level warn) answering
// ShouldRateLimit, one descriptor a request, in a closed loop from 1, 16 and 256 callers over one
// gRPC connection: keys=many goes to 10,000 values in turn, keys=hot to one.
func BenchmarkServiceRLS_ReferenceEnvoyRL(b *testing.B) {
	svc := startEnvoyRL(b, redistest.Start(b))
	rlsClosed(b, svc)
}

// BenchmarkServiceRLS_Admit is admit serve --envoy-config with the same file, on its own
// redis-server, under the same load: the product as deployed (metrics, guards, the default
// command timeout).
func BenchmarkServiceRLS_Admit(b *testing.B) {
	svc := startAdmit(b, redistest.Start(b), true)
	rlsClosed(b, svc)
}

// BenchmarkServiceRLSOpen_ReferenceEnvoyRL is envoyproxy/ratelimit's service at fixed arrival
// rates (open loop: requests sent on a schedule, latency from the scheduled time, at most 1,000 in
// flight), 10,000 keys: p99-us is the figure to compare; decisions/s is the rate it kept up with.
func BenchmarkServiceRLSOpen_ReferenceEnvoyRL(b *testing.B) {
	svc := startEnvoyRL(b, redistest.Start(b))
	rlsOpen(b, svc)
}

// BenchmarkServiceRLSOpen_Admit is admit serve at the same arrival rates.
func BenchmarkServiceRLSOpen_Admit(b *testing.B) {
	svc := startAdmit(b, redistest.Start(b), true)
	rlsOpen(b, svc)
}

// BenchmarkServiceHTTP_ReferenceBare is a bare net/http handler (bench/barecheck: encoding/json,
// admit.Limiter's Take, no metrics or guards) answering POST /v1/check, 64 callers, 10,000 keys,
// on a memstore and on a redisstore.
func BenchmarkServiceHTTP_ReferenceBare(b *testing.B) {
	for _, store := range []string{"memory", "redis"} {
		b.Run("store="+store, func(b *testing.B) {
			svc := startBare(b, store)
			httpClosed(b, svc)
		})
	}
}

// BenchmarkServiceHTTP_Admit is admit serve's POST /v1/check, the same policy, load and stores.
func BenchmarkServiceHTTP_Admit(b *testing.B) {
	for _, store := range []string{"memory", "redis"} {
		b.Run("store="+store, func(b *testing.B) {
			var srv *redistest.Server
			if store == "redis" {
				srv = redistest.Start(b)
			}
			svc := startAdmit(b, srv, false)
			httpClosed(b, svc)
		})
	}
}

// rlsClosed runs svc's closed-loop series.
func rlsClosed(b *testing.B, svc *serviceProc) {
	svc.warm(b)
	for _, keys := range []string{"many", "hot"} {
		for _, n := range svcCallers {
			b.Run(fmt.Sprintf("keys=%s/callers=%d", keys, n), func(b *testing.B) {
				svc.measure(b, benchrun.Config{Concurrency: n, HotKey: keys == "hot"})
			})
		}
	}
}

// rlsOpen runs svc's open-loop series.
func rlsOpen(b *testing.B, svc *serviceProc) {
	rates := svcRates
	if s := os.Getenv("ADMIT_BENCH_RLS_RATES"); s != "" {
		rates = nil
		for _, f := range strings.Split(s, ",") {
			r, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || r <= 0 {
				b.Fatalf("ADMIT_BENCH_RLS_RATES=%q: %q is not a rate", s, f)
			}
			rates = append(rates, r)
		}
	}
	svc.warm(b)
	for _, r := range rates {
		b.Run("rate="+strconv.Itoa(r), func(b *testing.B) {
			svc.measure(b, benchrun.Config{Rate: float64(r)})
		})
	}
}

// httpClosed runs svc's HTTP series.
func httpClosed(b *testing.B, svc *serviceProc) {
	svc.warm(b)
	b.Run(fmt.Sprintf("callers=%d", svcHTTPCallers), func(b *testing.B) {
		svc.measure(b, benchrun.Config{Concurrency: svcHTTPCallers})
	})
}

// A serviceProc is a running service and the target of its load.
type serviceProc struct {
	name   string
	pid    int
	redis  *redistest.Server // nil on memory
	target benchrun.Target
	cfg    benchrun.Config // the target's part of every run's configuration
}

// warm runs a second of load on s from 16 callers, not measured, so that no series measures a
// process that has just started: its first connections, its script loaded into Redis, its
// goroutines' stacks grown (a first open-loop series measured that as a p99 of 14.6 ms at 1,000/s).
func (s *serviceProc) warm(b *testing.B) {
	b.Helper()
	cfg := s.cfg
	cfg.Concurrency, cfg.Duration, cfg.Timeout = 16, time.Second, 10*time.Second
	cfg.Keys, cfg.KeyPrefix = svcManyKeys, fmt.Sprintf("warm-%d-", time.Now().UnixNano())
	if _, err := benchrun.Run(context.Background(), cfg, s.target, &bytes.Buffer{}); err != nil {
		b.Fatalf("%s: the warm-up load: %v", s.name, err)
	}
}

// measure runs one load of cfg (its loop and keys) on s and reports its figures.
func (s *serviceProc) measure(b *testing.B, cfg benchrun.Config) {
	cfg.Kind, cfg.Target, cfg.GRPCAddr = s.cfg.Kind, s.cfg.Target, s.cfg.GRPCAddr
	cfg.Domain, cfg.Descriptor, cfg.Policies = s.cfg.Domain, s.cfg.Descriptor, s.cfg.Policies
	cfg.Duration, cfg.Timeout = loadDuration(), 10*time.Second
	cfg.Keys, cfg.KeyPrefix = svcManyKeys, fmt.Sprintf("%s-%d-", b.Name(), time.Now().UnixNano())
	ctx := context.Background()
	var mem0, mem1 runtime.MemStats
	runtime.ReadMemStats(&mem0)
	cpu0, redis0 := s.cpu(b), s.redisCPU(b)
	b.ResetTimer()
	start := time.Now()
	report, err := benchrun.Run(ctx, cfg, s.target, &bytes.Buffer{})
	// An open loop's last request may end a moment before cfg.Duration; the testing package would
	// then run the load again. The figures are the report's, not the timer's.
	time.Sleep(time.Until(start.Add(cfg.Duration)))
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	cpu1, redis1 := s.cpu(b), s.redisCPU(b)
	runtime.ReadMemStats(&mem1)
	decided := report.Allowed + report.Limited
	if report.Limited > 0 {
		b.Fatalf("%s limited %d requests: the benchmark's limit must admit everything", s.name, report.Limited)
	}
	if decided == 0 {
		b.Fatalf("%s decided nothing: %d errors %v", s.name, report.Errors, report.ErrorKinds)
	}
	if report.Errors > 0 {
		b.Logf("%s: %d errors %v", s.name, report.Errors, report.ErrorKinds)
	}
	per := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(decided) }
	b.ReportMetric(1e9/report.DecisionsPerSecond, "ns/op")
	b.ReportMetric(report.DecisionsPerSecond, "decisions/s")
	b.ReportMetric(per(cpu1-cpu0), "svc-cpu-us/op")
	if s.redis != nil {
		b.ReportMetric(per(redis1-redis0), "redis-cpu-us/op")
	}
	b.ReportMetric(report.LatencyUS.P50, "p50-us")
	b.ReportMetric(report.LatencyUS.P99, "p99-us")
	b.ReportMetric(float64(report.Errors), "errors")
	if cfg.Rate > 0 {
		b.ReportMetric(float64(report.Dropped), "dropped")
	}
	b.ReportMetric(float64(mem1.TotalAlloc-mem0.TotalAlloc)/float64(decided), "B/op")
	b.ReportMetric(float64(mem1.Mallocs-mem0.Mallocs)/float64(decided), "allocs/op")
}

// loadDuration is how long one load runs: -benchtime when it is a duration, else a second.
func loadDuration() time.Duration {
	if f := flag.Lookup("test.benchtime"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 0 {
			return d
		}
	}
	return time.Second
}

// clockTicks is the unit of /proc/PID/stat's CPU times: USER_HZ, 100 on every Linux.
const clockTicks = 100

// cpu returns the CPU time the server process has used, user and system.
func (s *serviceProc) cpu(b *testing.B) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.pid))
	if err != nil {
		b.Fatalf("%s's CPU time: %v (the service benchmarks need Linux's /proc)", s.name, err)
	}
	// The fields after the command's name, which is in parentheses and may hold spaces: state is
	// field 3 of the line, utime 14 and stime 15.
	i := bytes.LastIndexByte(stat, ')')
	fields := strings.Fields(string(stat[i+1:]))
	if i < 0 || len(fields) < 13 {
		b.Fatalf("%s's /proc/%d/stat: %q", s.name, s.pid, stat)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			b.Fatalf("%s's /proc/%d/stat: %q", s.name, s.pid, stat)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// redisCPU returns the CPU time s's redis-server has used, 0 on memory.
func (s *serviceProc) redisCPU(b *testing.B) time.Duration {
	if s.redis == nil {
		return 0
	}
	return redisCPU(b, s.redis)
}

// TestMain removes the programs the service benchmarks built.
func TestMain(m *testing.M) {
	code := m.Run()
	if svcBinDir != "" {
		os.RemoveAll(svcBinDir)
	}
	os.Exit(code)
}

var (
	svcBinDir  string
	svcBinErr  error
	svcBinOnce sync.Once
	svcBuilds  sync.Map // name to *svcBuild
)

type svcBuild struct {
	once sync.Once
	path string
	err  error
}

// svcBinary builds a program once per test binary, with build (given the output path), and
// returns its path.
func svcBinary(b *testing.B, name string, build func(out string) error) string {
	b.Helper()
	svcBinOnce.Do(func() { svcBinDir, svcBinErr = os.MkdirTemp("", "admit-bench-service-") })
	if svcBinErr != nil {
		b.Fatal(svcBinErr)
	}
	v, _ := svcBuilds.LoadOrStore(name, &svcBuild{})
	sb := v.(*svcBuild)
	sb.once.Do(func() {
		sb.path = filepath.Join(svcBinDir, name)
		sb.err = build(sb.path)
	})
	if sb.err != nil {
		b.Fatal(sb.err)
	}
	return sb.path
}

// goBuild builds pkg in dir into out.
func goBuild(dir, pkg, out string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// startProc runs cmd with its output in a log, killed at b's cleanup (its log shown if b failed),
// and returns the log and a channel closed when it exits.
func startProc(b *testing.B, name string, cmd *exec.Cmd) (*syncbuf.Buffer, <-chan struct{}) {
	b.Helper()
	logs := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	b.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
		if b.Failed() {
			b.Logf("%s (pid %d) log:\n%s", name, cmd.Process.Pid, logs)
		}
	})
	return logs, exited
}

// waitLog waits for a line of logs that re matches, and returns its first group.
func waitLog(b *testing.B, name string, logs *syncbuf.Buffer, exited <-chan struct{}, re *regexp.Regexp) string {
	b.Helper()
	deadline := time.Now().Add(svcStartTimeout)
	for {
		sc := bufio.NewScanner(strings.NewReader(logs.String()))
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				return m[1]
			}
		}
		select {
		case <-exited:
			b.Fatalf("%s exited at start:\n%s", name, logs)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s logged no %v within %v:\n%s", name, re, svcStartTimeout, logs)
		}
	}
}

// ready returns s once its target decides a request, within svcStartTimeout.
func ready(b *testing.B, s *serviceProc) *serviceProc {
	b.Helper()
	b.Cleanup(s.target.Close)
	deadline := time.Now().Add(svcStartTimeout)
	for {
		outcome := s.target.Do(context.Background(), "bench-probe")
		if outcome == "allowed" {
			return s
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s did not decide within %v: %s", s.name, svcStartTimeout, outcome)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// grpcConfig is the target's configuration of a gRPC service at addr.
func grpcConfig(addr string) benchrun.Config {
	return benchrun.Config{Kind: "grpc", Target: addr, GRPCAddr: addr, Domain: svcDomain,
		Descriptor: []benchrun.Entry{{Key: "key", Value: benchrun.KeyPlaceholder}}, Timeout: 10 * time.Second}
}

// newTarget returns the target of cfg.
func newTarget(b *testing.B, cfg benchrun.Config) benchrun.Target {
	if cfg.Kind == "http" {
		return benchrun.NewHTTP(cfg)
	}
	t, err := benchrun.NewGRPC(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return t
}

var (
	grpcListening = regexp.MustCompile(`msg="listening for gRPC" addr=(\S+)`)
	httpListening = regexp.MustCompile(`(?:^|msg=)listening addr=(\S+)`)
)

// startAdmit runs admit serve on srv (memory when nil): with envoyConfig on a gRPC listener if
// rls, else with admitConfig, loaded over HTTP.
func startAdmit(b *testing.B, srv *redistest.Server, rls bool) *serviceProc {
	b.Helper()
	bin := os.Getenv("ADMIT_BENCH_ADMIT") // another build, to compare two versions
	if bin == "" {
		bin = svcBinary(b, "admit", func(out string) error { return goBuild("..", "./cmd/admit", out) })
	}
	dir := b.TempDir()
	args := []string{"serve", "--listen", "127.0.0.1:0"}
	if rls {
		if err := os.WriteFile(filepath.Join(dir, "bench.yaml"), []byte(envoyConfig), 0o600); err != nil {
			b.Fatal(err)
		}
		args = append(args, "--envoy-config", dir, "--grpc-listen", "127.0.0.1:0")
	} else {
		file := filepath.Join(dir, "admit.yaml")
		if err := os.WriteFile(file, []byte(admitConfig), 0o600); err != nil {
			b.Fatal(err)
		}
		args = append(args, "--config", file)
	}
	if srv != nil {
		args = append(args, "--redis", srv.URL())
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(withoutEnv(os.Environ(), "REDIS_URL", "ADMIT_HMAC_SECRET", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), "ADMIT_HMAC_SECRET="+svcSecret)
	logs, exited := startProc(b, "admit serve", cmd)
	s := &serviceProc{name: "admit serve", pid: cmd.Process.Pid, redis: srv}
	if rls {
		s.cfg = grpcConfig(waitLog(b, s.name, logs, exited, grpcListening))
	} else {
		addr := waitLog(b, s.name, logs, exited, httpListening)
		s.cfg = benchrun.Config{Kind: "http", Target: "http://" + addr, Policies: []string{svcPolicy}, Concurrency: svcHTTPCallers, Timeout: 10 * time.Second}
	}
	s.target = newTarget(b, s.cfg)
	return ready(b, s)
}

// startBare runs bench/barecheck on a memstore, or on a fresh redis-server for store "redis".
func startBare(b *testing.B, store string) *serviceProc {
	b.Helper()
	bin := svcBinary(b, "barecheck", func(out string) error { return goBuild(".", "./barecheck", out) })
	args := []string{"-listen", "127.0.0.1:0", "-policy", svcPolicy, "-limit", strconv.Itoa(svcLimit), "-window", "1s"}
	var srv *redistest.Server
	if store == "redis" {
		srv = redistest.Start(b)
		args = append(args, "-redis", srv.URL())
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "ADMIT_HMAC_SECRET=" + svcSecret}
	logs, exited := startProc(b, "barecheck", cmd)
	s := &serviceProc{name: "barecheck", pid: cmd.Process.Pid, redis: srv}
	addr := waitLog(b, s.name, logs, exited, httpListening)
	s.cfg = benchrun.Config{Kind: "http", Target: "http://" + addr, Policies: []string{svcPolicy}, Concurrency: svcHTTPCallers, Timeout: 10 * time.Second}
	s.target = newTarget(b, s.cfg)
	return ready(b, s)
}

// startEnvoyRL runs envoyproxy/ratelimit's service on srv with envoyConfig. A port another process
// took in between is tried again.
func startEnvoyRL(b *testing.B, srv *redistest.Server) *serviceProc {
	b.Helper()
	bin := svcBinary(b, "ratelimit", func(out string) error {
		return envoyrlproc.Build(filepath.Join("..", envoyrlproc.ModuleDir), out)
	})
	root := b.TempDir()
	dir := envoyrlproc.RuntimeDir(root)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bench.yaml"), []byte(envoyConfig), 0o600); err != nil {
		b.Fatal(err)
	}
	for range 3 {
		ports := freeport.Ports(b, 3)
		cmd := envoyrlproc.Command(bin, envoyrlproc.Settings{HTTPPort: ports[0], GRPCPort: ports[1], DebugPort: ports[2],
			RedisAddr: srv.Addr(), RuntimeRoot: root})
		logs, exited := startProc(b, "envoyproxy/ratelimit", cmd)
		addr := "127.0.0.1:" + strconv.Itoa(ports[1])
		if !listening(addr, exited) {
			if strings.Contains(logs.String(), "address already in use") {
				continue
			}
			b.Fatalf("envoyproxy/ratelimit exited at start:\n%s", logs)
		}
		s := &serviceProc{name: "envoyproxy/ratelimit", pid: cmd.Process.Pid, redis: srv, cfg: grpcConfig(addr)}
		s.target = newTarget(b, s.cfg)
		return ready(b, s)
	}
	b.Fatal("envoyproxy/ratelimit found its ports taken three times")
	return nil
}

// listening reports whether addr accepts a connection before the process exits, within
// svcStartTimeout.
func listening(addr string, exited <-chan struct{}) bool {
	deadline := time.Now().Add(svcStartTimeout)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return true
		}
		select {
		case <-exited:
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
	return false
}

// withoutEnv returns env without the variables names.
func withoutEnv(env []string, names ...string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, n := range names {
			if name == n {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}
