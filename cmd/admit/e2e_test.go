package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/redistest"
)

// The end-to-end tests run the real admit binary, built once per test run, against real
// redis-server processes.

var (
	binDir      string // made by TestMain, removed after the run
	buildOnce   sync.Once
	binPath     string
	buildErr    error
	buildOutput []byte
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "admit-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// binaryVersion returns the version the binary of admitBinary reports (admit version's second
// word): its /healthz says it, and it differs from the test binary's where git stamps the build.
func binaryVersion(t *testing.T) string {
	out, err := exec.Command(admitBinary(t), "version").Output()
	words := strings.Fields(string(out))
	if err != nil || len(words) < 2 {
		t.Fatalf("admit version: %q, %v", out, err)
	}
	return words[1]
}

// admitBinary builds the admit binary the first time it is called, and returns its path.
func admitBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binPath = filepath.Join(binDir, "admit")
		cmd := exec.Command("go", "build", "-buildvcs=auto", "-o", binPath, ".") // stamps the commit where git can tell it
		buildOutput, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build: %v\n%s", buildErr, buildOutput)
	}
	return binPath
}

// proc is a running admit process.
type proc struct {
	cmd    *exec.Cmd
	base   string // http://ADDR
	logs   *logWatch
	exited chan struct{} // closed when the process has exited and its output is read
	err    error         // cmd.Wait's result, set before exited is closed
}

// startAdmit runs "admit serve --listen 127.0.0.1:0 args…", with REDIS_URL unset and
// ADMIT_HMAC_SECRET testSecret, and returns once it listens. The process is killed, if still
// running, at t's cleanup, and its log is written to the test log.
func startAdmit(t *testing.T, args ...string) *proc {
	t.Helper()
	return startAdmitEnv(t, admitEnv(secretEnv+"="+testSecret), args...)
}

// admitEnv returns this process's environment without REDIS_URL, ADMIT_HMAC_SECRET and
// ADMIT_ADMIN_TOKEN, plus extra (each "NAME=value").
func admitEnv(extra ...string) []string {
	return append(withoutEnv(os.Environ(), "REDIS_URL", secretEnv, adminTokenEnv), extra...)
}

// startAdmitEnv is startAdmit with the environment env. At t's cleanup it also checks that the log
// holds no HMAC secret.
func startAdmitEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startCommand(t, env, "serve", args...)
}

// startCommand is startAdmitEnv for the command cmd: "admit CMD --listen 127.0.0.1:0 args…".
func startCommand(t *testing.T, env []string, cmd string, args ...string) *proc {
	t.Helper()
	p := &proc{logs: &logWatch{}, exited: make(chan struct{})}
	p.cmd = exec.Command(admitBinary(t), append([]string{cmd, "--listen", "127.0.0.1:0"}, args...)...)
	p.cmd.Env = env
	p.cmd.Stdout = p.logs
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Kill()
			<-p.exited
		}
		t.Logf("admit %q (pid %d) log:\n%s", args, p.cmd.Process.Pid, p.logs)
		var secret string
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, secretEnv+"="); ok {
				secret = v
			}
		}
		noSecretIn(t, p.logs.String(), secret)
	})
	p.base = "http://" + p.logs.waitAddr(t, p.exited)
	return p
}

// wait waits up to 15s for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("admit did not exit within 15s; log:\n%s", p.logs)
	}
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		return exit.ExitCode()
	}
	if p.err != nil {
		t.Fatalf("admit: %v", p.err)
	}
	return 0
}

// withoutEnv returns env without the variables names.
func withoutEnv(env []string, names ...string) []string {
	var out []string
	for _, kv := range env {
		if !slices.ContainsFunc(names, func(name string) bool { return strings.HasPrefix(kv, name+"=") }) {
			out = append(out, kv)
		}
	}
	return out
}

// wantCount checks that key holds the counter want on s.
func wantCount(t *testing.T, s *redistest.Server, key, want string) {
	t.Helper()
	if got, err := s.Do(t, "GET", key).ToString(); err != nil || got != want {
		t.Errorf("GET %s = %q, %v; want %q", key, got, err, want)
	}
}

// timedDemo503 sends GET /demo, checks that it is answered 503 within a hang guard of 2s, and logs
// how long it took.
func timedDemo503(t *testing.T, p *proc, what string) {
	t.Helper()
	start := time.Now()
	checkDemo(t, p.base, http.StatusServiceUnavailable)
	took := time.Since(start)
	t.Logf("%s: GET /demo answered 503 in %v", what, took)
	if took > 2*time.Second {
		t.Errorf("%s: 503 took %v, want well under 2s", what, took)
	}
}

// TestE2ERedisDemo checks the demo on Redis, and its one key: the demo account's under the secret
// from ADMIT_HMAC_SECRET, as a KeyBuilder on that secret makes it.
func TestE2ERedisDemo(t *testing.T) {
	s := redistest.Start(t)
	p := startAdmit(t, "--redis", s.URL())
	checkDemo(t, p.base, 200, 200, 200, 429, 429)
	key := demoKey(t, testSecret)
	wantCount(t, s, key, "3")
	if pttl, err := s.Do(t, "PTTL", key).AsInt64(); err != nil || pttl <= 0 || pttl > 10_000 {
		t.Errorf("PTTL %s = %d, %v; want 1…10000", key, pttl, err)
	}
	if keys, err := s.Do(t, "KEYS", "*").AsStrSlice(); err != nil || !slices.Equal(keys, []string{key}) {
		t.Errorf("KEYS * = %q, %v; want only %s", keys, err, key)
	}
	for _, s := range []string{"backend=redis", `msg="HMAC secret" source=ADMIT_HMAC_SECRET`} {
		if !strings.Contains(p.logs.String(), s) {
			t.Errorf("the log lacks %q", s)
		}
	}
}

func TestE2ERedisFromEnv(t *testing.T) {
	s := redistest.Start(t)
	p := startAdmitEnv(t, admitEnv("REDIS_URL="+s.URL(), secretEnv+"="+testSecret))
	checkDemo(t, p.base, 200)
	wantCount(t, s, demoKey(t, testSecret), "1")
}

// TestE2ETwoProcessesShareLimit sends 40 concurrent requests, split across two admit processes on
// one Redis, in a fresh window: exactly 3 are admitted.
func TestE2ETwoProcessesShareLimit(t *testing.T) {
	s := redistest.Start(t)
	procs := []*proc{startAdmit(t, "--redis", s.URL()), startAdmit(t, "--redis", s.URL())}
	for _, p := range procs {
		// Connect both to Redis before the window opens, without consuming.
		if r := get(t, p.base+"/healthz"); r.status != 200 {
			t.Fatalf("healthz = %d", r.status)
		}
	}
	const n = 40
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()
	statuses := make([]int, n)
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-release
			res, err := client.Get(procs[i%2].base + "/demo")
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			res.Body.Close()
			statuses[i] = res.StatusCode
		})
	}
	close(release)
	wg.Wait()
	count := map[int]int{}
	perProc := [2]int{}
	for i, st := range statuses {
		count[st]++
		if st == 200 {
			perProc[i%2]++
		}
	}
	t.Logf("statuses %v; admitted per process %v", count, perProc)
	if count[200] != 3 || count[429] != n-3 {
		t.Errorf("statuses %v, want exactly 3×200 and %d×429", count, n-3)
	}
	wantCount(t, s, demoKey(t, testSecret), "3")
}

// TestE2EDifferentSecretsDoNotShare shows why every instance needs the same secret: two processes
// on one Redis with different secrets make different keys, and each admits the demo's 3.
func TestE2EDifferentSecretsDoNotShare(t *testing.T) {
	s := redistest.Start(t)
	const other = "another secret of 32 bytes, too!"
	a := startAdmit(t, "--redis", s.URL())
	b := startAdmitEnv(t, admitEnv(secretEnv+"="+other), "--redis", s.URL())
	checkDemo(t, a.base, 200, 200, 200, 429)
	checkDemo(t, b.base, 200, 200, 200, 429)
	wantCount(t, s, demoKey(t, testSecret), "3")
	wantCount(t, s, demoKey(t, other), "3")
}

func TestE2ERedisKilled(t *testing.T) {
	s := redistest.Start(t)
	p := startAdmit(t, "--redis", s.URL())
	checkDemo(t, p.base, 200)
	s.Kill(t)
	timedDemo503(t, p, "Redis killed, first request")
	timedDemo503(t, p, "Redis killed, second request")
	if r := get(t, p.base+"/healthz"); r.status != 200 {
		t.Errorf("healthz = %d while Redis is down, want 200", r.status)
	}

	// Redis comes back empty (no persistence): the service resumes by itself in a fresh window,
	// admitting exactly 3. A stale connection may still answer 503 once it is first used after the
	// restart (an EOF: the request never reached the new server), so 503s are counted, not refused.
	s.Restart(t)
	start := time.Now()
	var admitted, late503 int
	for {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%d admitted 10s after Redis restarted, want 3 then 429", admitted)
		}
		r := get(t, p.base+"/demo")
		if r.status == 503 {
			if admitted > 0 {
				late503++
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if r.status == 200 && admitted == 0 {
			t.Logf("first 200 %v after Redis restarted", time.Since(start))
		}
		if r.status != 200 {
			if r.status != 429 || admitted != 3 {
				t.Errorf("GET /demo = %d after %d admissions since the restart, want 3×200 then 429", r.status, admitted)
			}
			break
		}
		admitted++
	}
	if late503 > 0 {
		t.Logf("%d× 503 after the first 200 following the restart", late503)
	}
	wantCount(t, s, demoKey(t, testSecret), "3")
}

func TestE2ERedisUnreachable(t *testing.T) {
	for name, addr := range map[string]string{
		"black hole":  redistest.BlackHole(t),
		"closed port": redistest.ClosedPort(t),
	} {
		t.Run(name, func(t *testing.T) {
			p := startAdmit(t, "--redis", "redis://"+addr)
			timedDemo503(t, p, name+", first request")
			timedDemo503(t, p, name+", second request")
			if r := get(t, p.base+"/healthz"); r.status != 200 {
				t.Errorf("healthz = %d, want 200", r.status)
			}
		})
	}
}

// TestE2ECorruptState checks that a demo key holding state no algorithm writes is answered 503 and
// left unchanged.
func TestE2ECorruptState(t *testing.T) {
	s := redistest.Start(t)
	p := startAdmit(t, "--redis", s.URL())
	key := demoKey(t, testSecret)
	for _, tc := range []struct {
		name      string
		corrupt   func()
		wantValue string
	}{{
		name:      "text",
		corrupt:   func() { s.Do(t, "SET", key, "abc") },
		wantValue: "abc",
	}, {
		name: "valid count without expiry",
		corrupt: func() {
			checkDemo(t, p.base, 200) // a real counter: 1 with a TTL
			if n, err := s.Do(t, "PERSIST", key).AsInt64(); err != nil || n != 1 {
				t.Fatalf("PERSIST = %d, %v", n, err)
			}
		},
		wantValue: "1",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s.Do(t, "DEL", key)
			tc.corrupt()
			dump, err := s.Do(t, "DUMP", key).ToString()
			if err != nil {
				t.Fatalf("DUMP: %v", err)
			}
			checkDemo(t, p.base, 503, 503)
			if got, err := s.Do(t, "GET", key).ToString(); err != nil || got != tc.wantValue {
				t.Errorf("GET after = %q, %v; want %q", got, err, tc.wantValue)
			}
			if pttl, err := s.Do(t, "PTTL", key).AsInt64(); err != nil || pttl != -1 {
				t.Errorf("PTTL after = %d, %v; want -1 (no expiry)", pttl, err)
			}
			if after, _ := s.Do(t, "DUMP", key).ToString(); after != dump {
				t.Error("DUMP changed: the key was rewritten")
			}
		})
	}
}

// TestE2ESIGTERM checks that on SIGTERM admit closes its listener and idle connections and exits 0.
// (TestServeHTTPFinishesInFlight checks that requests in flight are finished.)
func TestE2ESIGTERM(t *testing.T) {
	p := startAdmit(t)
	addr := strings.TrimPrefix(p.base, "http://")

	// An idle keep-alive connection must not hold the shutdown up.
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprint(conn, "GET /healthz HTTP/1.1\r\nHost: admit\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	for _, line := range []string{`msg="shutting down"`, "msg=stopped"} {
		if !strings.Contains(p.logs.String(), line) {
			t.Errorf("no %s log line", line)
		}
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("still accepting connections after exit")
	}
}

func TestE2EExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"--help"}, 0},
		{[]string{"version"}, 0},
		{[]string{"bogus"}, 2},
		{nil, 2},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--redis", "redis://" + redistest.ClosedPort(t)}, 2}, // no HMAC secret
	} {
		cmd := exec.Command(admitBinary(t), tc.args...)
		cmd.Env = admitEnv()
		err := cmd.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.code {
			t.Errorf("admit %q: exit %d, want %d", tc.args, code, tc.code)
		}
	}
}
