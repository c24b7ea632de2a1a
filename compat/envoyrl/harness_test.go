package envoyrl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/freeport"
	"github.com/admit-dev/admit/internal/syncbuf"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/admit-dev/admit/internal/envoyrlproc"
	"github.com/admit-dev/admit/internal/redistest"
)

// referenceModule is the directory of the module envoyproxy/ratelimit's service is built in
// (envoyrlproc.ModuleDir): one of its own, so that admit's dependencies (OpenTelemetry's, newer
// than its) do not change its build.
const referenceModule = "refsvc"

// startTimeout bounds how long a service may take to start and answer: patient, as a loaded
// machine may take seconds.
const startTimeout = time.Minute

// testSecret is admit's HMAC secret in these tests.
const testSecret = "envoyrl-oracle-test-secret"

var (
	binDir string // made by TestMain, removed after the run
	builds sync.Map
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "admit-envoyrl-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type build struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// binary builds pkg in the module of directory dir (once per test run, into the
// Go build cache), and returns the program's path.
func binary(t *testing.T, name, dir, pkg string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(name, &build{})
	b := v.(*build)
	b.once.Do(func() {
		b.path = filepath.Join(binDir, name)
		cmd := exec.Command("go", "build", "-o", b.path, pkg)
		cmd.Dir = dir
		b.out, b.err = cmd.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, b.err, b.out)
	}
	return b.path
}

// service is a running rate limit service and a client of its gRPC API.
type service struct {
	name   string
	client rlsv3.RateLimitServiceClient
}

// start runs cmd, with its output in logs, killed at t's cleanup, and returns a channel closed when
// it exits.
func start(t *testing.T, name string, cmd *exec.Cmd, logs *syncbuf.Buffer) <-chan struct{} {
	t.Helper()
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() || testing.Verbose() {
			t.Logf("%s (pid %d) log:\n%s", name, cmd.Process.Pid, logs)
		}
	})
	return exited
}

// errExited is dial's error when the process exited before answering.
var errExited = errors.New("exited before answering")

// dial connects to the gRPC server at addr and waits until it answers a ShouldRateLimit of
// domain (any answer, even an error of the service, but not one of the transport). It returns
// errExited when the process exits first.
func dial(t *testing.T, name, addr, domain string, exited <-chan struct{}, logs *syncbuf.Buffer) (*service, error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s := &service{name: name, client: rlsv3.NewRateLimitServiceClient(conn)}
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := s.client.ShouldRateLimit(ctx, probe(domain))
		cancel()
		if err == nil || status.Code(err) != codes.Unavailable && status.Code(err) != codes.DeadlineExceeded {
			return s, nil
		}
		select {
		case <-exited:
			return nil, errExited
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer within %v: %v\n%s", name, startTimeout, err, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeConfig writes files (name to content) into dir.
func writeConfig(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// startReference runs envoyproxy/ratelimit's service on the redis-server srv with the
// configuration files, loaded from its runtime directory, and returns a client once it answers
// ShouldRateLimit for domain. A port another process took in between is tried again. Its
// environment is only its settings (and PATH): none of the caller's variables reaches it.
func startReference(t *testing.T, srv *redistest.Server, files map[string]string, domain string) *service {
	t.Helper()
	bin := binary(t, "ratelimit", referenceModule, envoyrlproc.Package)
	root := t.TempDir()
	writeConfig(t, envoyrlproc.RuntimeDir(root), files)
	var lastLogs string
	for range 3 {
		ports := freeport.Ports(t, 3)
		cmd := envoyrlproc.Command(bin, envoyrlproc.Settings{HTTPPort: ports[0], GRPCPort: ports[1], DebugPort: ports[2],
			RedisAddr: srv.Addr(), RuntimeRoot: root})
		logs := &syncbuf.Buffer{}
		exited := start(t, "envoyproxy/ratelimit", cmd, logs)
		s, err := dial(t, "envoyproxy/ratelimit", "127.0.0.1:"+strconv.Itoa(ports[1]), domain, exited, logs)
		if err == nil {
			return s
		}
		lastLogs = logs.String()
		if !strings.Contains(lastLogs, "address already in use") {
			t.Fatalf("envoyproxy/ratelimit exited at start:\n%s", lastLogs)
		}
	}
	t.Fatalf("envoyproxy/ratelimit found its ports taken three times:\n%s", lastLogs)
	return nil
}

var grpcListening = regexp.MustCompile(`msg="listening for gRPC" addr=(\S+)`)

// startAdmit runs admit serve --envoy-config on the redis-server srv (as its least-privilege
// user) with the configuration files and the flags args, and returns a client once it answers
// ShouldRateLimit for domain.
func startAdmit(t *testing.T, srv *redistest.Server, files map[string]string, domain string, args ...string) *service {
	t.Helper()
	bin := binary(t, "admit", "../..", "github.com/admit-dev/admit/cmd/admit") // in admit's own module
	dir := t.TempDir()
	writeConfig(t, dir, files)
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--envoy-config", dir,
		"--grpc-listen", "127.0.0.1:0", "--redis", srv.URL()}, args...)...)
	cmd.Env = append(withoutEnv(os.Environ(), "REDIS_URL", "ADMIT_HMAC_SECRET"), "ADMIT_HMAC_SECRET="+testSecret)
	logs := &syncbuf.Buffer{}
	exited := start(t, "admit", cmd, logs)
	deadline := time.Now().Add(startTimeout)
	for {
		if m := grpcListening.FindStringSubmatch(logs.String()); m != nil {
			s, err := dial(t, "admit", m[1], domain, exited, logs)
			if err != nil {
				t.Fatalf("admit %v:\n%s", err, logs)
			}
			return s
		}
		select {
		case <-exited:
			t.Fatalf("admit exited at start:\n%s", logs)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("admit did not listen for gRPC within %v:\n%s", startTimeout, logs)
		}
	}
}

// withoutEnv returns env without the variables names.
func withoutEnv(env []string, names ...string) []string {
	var out []string
	for _, kv := range env {
		keep := true
		for _, name := range names {
			if strings.HasPrefix(kv, name+"=") {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

// probe returns a request of domain whose one descriptor no rule matches.
func probe(domain string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "oracle_probe", Value: "none"}},
	}}}
}
