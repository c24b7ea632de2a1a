// Package proxytest_test runs the proxy configurations admit ships (deploy/nginx, deploy/caddy,
// deploy/haproxy) with the real proxy in front of a small Go app and a real admit serve, and checks what a client
// of the proxy sees: allowed, limited with Retry-After and the RateLimit fields, and 503 when admit
// is down; and the edits their READMEs give behind a load balancer. Each test renders the shipped
// file, changing only its ports and paths and making those edits.
package proxytest_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/freeport"
	"github.com/admit-dev/admit/internal/syncbuf"
)

// requireEnv names the environment variable that turns the skip of a missing proxy into a failure,
// as it does for redis-server: make test sets it.
const requireEnv = "ADMIT_REQUIRE_REDIS"

// setupTimeout bounds each wait for a process to be ready: patient, for a busy machine.
const setupTimeout = time.Minute

// admitConfig is the configuration of the admit the proxies ask: the policy per-ip the shipped
// files name, 3 requests an hour, so that no request of a test is let through by a refill.
const admitConfig = `policies:
  - name: per-ip
    algorithm: fixed_window
    limit: 3
    window: 1h
`

var (
	binDir    string // made by TestMain, removed after the run
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildOut  []byte
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "admit-proxytest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// program returns the path of the program name, on PATH or in sbinDirs, skipping t loudly when it
// is missing (failing it when requireEnv is 1), with the line that installs the Debian package pkg.
func program(t *testing.T, name, pkg string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range sbinDirs {
		if p, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
			return p
		}
	}
	if os.Getenv(requireEnv) == "1" {
		t.Fatalf("%s not found on PATH and %s=1: install it with: apt-get install %s", name, requireEnv, pkg)
	}
	t.Skipf("%s not found: the shipped %s configuration was NOT TESTED; install it (apt-get install %s) or run make test", name, name, pkg)
	return ""
}

// sbinDirs are where Debian installs nginx and haproxy, which a user's PATH may lack.
var sbinDirs = []string{"/usr/sbin", "/usr/local/sbin"}

// admitBinary builds admit the first time it is called, and returns its path.
func admitBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binPath = filepath.Join(binDir, "admit")
		buildOut, buildErr = exec.Command("go", "build", "-o", binPath, "../../cmd/admit").CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build: %v\n%s", buildErr, buildOut)
	}
	return binPath
}

// process is a running program of a test: killed, if still running, at the test's cleanup, and
// its output then written to the test log.
type process struct {
	name   string
	cmd    *exec.Cmd
	out    *syncbuf.Buffer
	exited chan struct{} // closed when it has exited
}

// start runs bin with args in dir and the environment env (nil: this process's).
func start(t *testing.T, name, dir string, env []string, bin string, args ...string) *process {
	t.Helper()
	p := &process{name: name, cmd: exec.Command(bin, args...), out: &syncbuf.Buffer{}, exited: make(chan struct{})}
	p.cmd.Dir, p.cmd.Env = dir, env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop(t)
		t.Logf("%s %q log:\n%s", name, args, p.out)
	})
	return p
}

// stop kills p and waits for it to exit.
func (p *process) stop(t *testing.T) {
	t.Helper()
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Kill()
	select {
	case <-p.exited:
	case <-time.After(setupTimeout):
		t.Fatalf("%s did not exit within %v of SIGKILL", p.name, setupTimeout)
	}
}

// listeningRE matches admit serve's log line that gives its address.
var listeningRE = regexp.MustCompile(`msg=listening addr=(\S+)`)

// startAdmit runs admit serve with admitConfig and args on a free loopback port, on the in-memory
// backend unless args name another, and returns the process and its address once it listens.
func startAdmit(t *testing.T, args ...string) (*process, string) {
	t.Helper()
	return runAdmit(t, "serve", admitConfig, args...)
}

// runAdmit runs admit's command cmd (serve or proxy) with the configuration config and args on a
// free loopback port, on the in-memory backend unless args name another, and returns the process
// and its address once it listens.
func runAdmit(t *testing.T, cmd, config string, args ...string) (*process, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "admit.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REDIS_URL=") && !strings.HasPrefix(kv, "ADMIT_HMAC_SECRET=") {
			env = append(env, kv)
		}
	}
	env = append(env, "ADMIT_HMAC_SECRET=proxytest-secret-0123456789")
	p := start(t, "admit "+cmd, dir, env, admitBinary(t), append([]string{cmd, "--listen", "127.0.0.1:0", "--config", cfg}, args...)...)
	deadline := time.Now().Add(setupTimeout)
	for {
		if m := listeningRE.FindStringSubmatch(p.out.String()); m != nil {
			return p, m[1]
		}
		select {
		case <-p.exited:
			t.Fatalf("admit exited before listening; its log:\n%s", p.out)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("admit did not log its address within %v; its log:\n%s", setupTimeout, p.out)
		}
	}
}

// app is the upstream the proxies pass allowed requests to: / answers 200 "hello", /fail 500 and
// /forbidden 403, each with a body of its own; it counts the requests it receives.
type app struct {
	srv  *httptest.Server
	hits atomic.Int64
}

// The bodies of the app's answers, which tell them from the proxy's own, and what the body of a
// 503 for admit says: the shipped configurations' own when admit is down, and admit's.
const (
	unavailableBody = "limiter unavailable"
	appHello        = "hello from the app\n"
	appFailed       = "the app failed\n"
	appForbidden    = "the app forbids this\n"
)

func startApp(t *testing.T) *app {
	t.Helper()
	a := &app{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.hits.Add(1)
		switch r.URL.Path {
		case "/fail":
			http.Error(w, strings.TrimSuffix(appFailed, "\n"), http.StatusInternalServerError)
		case "/forbidden":
			http.Error(w, strings.TrimSuffix(appForbidden, "\n"), http.StatusForbidden)
		default:
			io.WriteString(w, appHello)
		}
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// addr returns the app's host:port.
func (a *app) addr() string { return strings.TrimPrefix(a.srv.URL, "http://") }

// render returns the text of the shipped file at path with each old string of replace, which must
// occur in it exactly once, replaced by the new one: only ports and paths change, and the edits
// its README asks for, so the file users copy is the one tested.
func render(t *testing.T, path string, replace ...string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for i := 0; i+1 < len(replace); i += 2 {
		if n := strings.Count(text, replace[i]); n != 1 {
			t.Fatalf("%s: %q occurs %d times, want once", path, replace[i], n)
		}
		text = strings.Replace(text, replace[i], replace[i+1], 1)
	}
	return text
}

// answer is what a client of the proxy received.
type answer struct {
	status int
	header http.Header
	body   string
}

// client returns an HTTP client whose connections come from the loopback address from (such as
// 127.0.0.2: on Linux all of 127/8 is the loopback), so that the proxy sees clients of different
// addresses. It skips t when from cannot be bound.
func client(t *testing.T, from string) *http.Client {
	t.Helper()
	l, err := net.Listen("tcp", from+":0")
	if err != nil {
		t.Skipf("cannot use the loopback address %s as a client's (%v): this test needs Linux's 127.0.0.0/8 loopback", from, err)
	}
	l.Close()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	return &http.Client{
		Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true},
		Timeout:   setupTimeout,
	}
}

// get sends GET url with the header fields of hdr ("Name", "value", ...) and returns the answer.
func get(t *testing.T, c *http.Client, url string, hdr ...string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	return answer{status: res.StatusCode, header: res.Header, body: string(body)}
}

// waitListening waits until addr (host:port) accepts connections, and reports true; or p exits
// first, and it reports false. It fails t after setupTimeout.
func waitListening(t *testing.T, p *process, addr string) bool {
	t.Helper()
	deadline := time.Now().Add(setupTimeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err == nil {
			c.Close()
			return true
		}
		select {
		case <-p.exited:
			return false
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %s within %v (last: %v); its log:\n%s", p.name, addr, setupTimeout, err, p.out)
		}
	}
}

// startProxy starts a proxy on a free loopback port and returns it with its base URL once it
// listens. run starts the proxy on port. Another process may take the port between freeport.Port and
// the proxy's bind: a proxy that exits saying its address is in use is started again on another
// port, three times at most.
func startProxy(t *testing.T, run func(port int) *process) (*process, string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		port := freeport.Port(t)
		p := run(port)
		addr := "127.0.0.1:" + strconv.Itoa(port)
		if waitListening(t, p, addr) {
			return p, "http://" + addr
		}
		if attempt == 3 || !strings.Contains(strings.ToLower(p.out.String()), "address already in use") {
			t.Fatalf("%s exited before it listened on %s; its log:\n%s", p.name, addr, p.out)
		}
		t.Logf("port %d was taken before %s bound it; trying another", port, p.name)
	}
}

// checkProxy runs the checks every proxy passes, through the proxy at base (http://127.0.0.1:P)
// in front of a and the admit process adm:
//   - a client at 127.0.0.1 is allowed 3 times (the app's answer, with the RateLimit fields),
//     then limited: 429 with Retry-After and the RateLimit fields, the app not reached;
//   - header fields of its own (X-Forwarded-For, X-Admit-Key) do not choose another subject;
//   - a client at 127.0.0.2 is its own subject: allowed;
//   - the app's own 500 and 403 pass unchanged (not turned into 503 or 429);
//   - with admit stopped, 503 with Retry-After and unavailableBody, the app not reached.
func checkProxy(t *testing.T, base string, a *app, adm *process) {
	t.Helper()
	first, second := client(t, "127.0.0.1"), client(t, "127.0.0.2")
	for i := 1; i <= 3; i++ {
		got := get(t, first, base+"/")
		if got.status != http.StatusOK || got.body != appHello {
			t.Fatalf("request %d from 127.0.0.1: %d %q, want 200 %q", i, got.status, got.body, appHello)
		}
		wantRateLimitFields(t, fmt.Sprintf("request %d (200)", i), got)
	}
	if n := a.hits.Load(); n != 3 {
		t.Errorf("the app received %d requests, want 3", n)
	}
	limited := get(t, first, base+"/")
	if limited.status != http.StatusTooManyRequests {
		t.Fatalf("request 4 from 127.0.0.1: %d %q, want 429", limited.status, limited.body)
	}
	wantRetryAfter(t, "request 4 (429)", limited, 3600)
	wantRateLimitFields(t, "request 4 (429)", limited)
	if !strings.Contains(limited.header.Get("RateLimit"), "r=0") {
		t.Errorf("request 4 (429): RateLimit %q, want r=0", limited.header.Get("RateLimit"))
	}
	forged := get(t, first, base+"/", "X-Forwarded-For", "192.0.2.7", "X-Admit-Key", "someone-else", "X-Admit-Subject", "key")
	if forged.status != http.StatusTooManyRequests {
		t.Errorf("request 5 from 127.0.0.1 with X-Forwarded-For, X-Admit-Key and X-Admit-Subject of its own: %d %q, want 429: the client's header fields must not steer the check", forged.status, forged.body)
	}
	if n := a.hits.Load(); n != 3 {
		t.Errorf("after the limited requests the app received %d requests, want still 3", n)
	}

	if got := get(t, second, base+"/"); got.status != http.StatusOK || got.body != appHello {
		t.Errorf("request 1 from 127.0.0.2: %d %q, want 200 %q: another address, another subject", got.status, got.body, appHello)
	}
	if got := get(t, second, base+"/fail"); got.status != http.StatusInternalServerError || got.body != appFailed {
		t.Errorf("GET /fail from 127.0.0.2: %d %q, want the app's own 500 %q", got.status, got.body, appFailed)
	}
	if got := get(t, second, base+"/forbidden"); got.status != http.StatusForbidden || got.body != appForbidden {
		t.Errorf("GET /forbidden from 127.0.0.2: %d %q, want the app's own 403 %q", got.status, got.body, appForbidden)
	}

	adm.stop(t)
	before := a.hits.Load()
	down := get(t, client(t, "127.0.0.3"), base+"/")
	if down.status != http.StatusServiceUnavailable || !strings.Contains(down.body, unavailableBody) {
		t.Fatalf("with admit stopped: %d %q, want 503 %q", down.status, down.body, unavailableBody)
	}
	wantRetryAfter(t, "with admit stopped (503)", down, 60)
	if n := a.hits.Load(); n != before {
		t.Errorf("with admit stopped the app received %d more requests, want none (fail closed)", n-before)
	}
}

// wantRetryAfter checks that got has a Retry-After of 1 to most seconds.
func wantRetryAfter(t *testing.T, what string, got answer, most int) {
	t.Helper()
	v := got.header.Get("Retry-After")
	if n, err := strconv.Atoi(v); err != nil || n < 1 || n > most {
		t.Errorf("%s: Retry-After %q, want 1 to %d seconds; header: %v", what, v, most, got.header)
	}
}

// rateLimitPolicyRE matches the RateLimit-Policy member admit gives per-ip: its quota of 3 in a
// window of 3600 s.
var rateLimitPolicyRE = regexp.MustCompile(`^"per-ip";q=3;w=3600`)

// wantRateLimitFields checks that got has admit's RateLimit-Policy and RateLimit fields for per-ip.
func wantRateLimitFields(t *testing.T, what string, got answer) {
	t.Helper()
	if p := got.header.Values("RateLimit-Policy"); len(p) != 1 || !rateLimitPolicyRE.MatchString(p[0]) {
		t.Errorf("%s: RateLimit-Policy %q, want one field matching %s; header: %v", what, p, rateLimitPolicyRE, got.header)
	}
	if r := got.header.Values("RateLimit"); len(r) != 1 || !strings.HasPrefix(r[0], `"per-ip";r=`) {
		t.Errorf("%s: RateLimit %q, want one field starting \"per-ip\";r=; header: %v", what, r, got.header)
	}
}

// replaceDir returns text with each DIR replaced by dir.
func replaceDir(text, dir string) string { return strings.ReplaceAll(text, "DIR", dir) }

// startFunc starts a proxy with the shipped configuration, asking admit at admitAddr and passing
// allowed requests to the app at appAddr, and returns it with its base URL once it listens.
type startFunc func(t *testing.T, admitAddr, appAddr string) (*process, string)

// testProxy runs the checks of checkProxy on the proxy that run starts; then, in front of an
// admit that accepts connections and never answers, it checks that the proxy's timeouts turn the
// check into the 503 of admit down; in front of an app that is down, that the proxy answers its
// own appDown (502; HAProxy's is 503), not the 503 of admit down; and in front of an admit whose
// Redis refuses connections (admit's own 503), that the proxy answers 503 too.
func testProxy(t *testing.T, appDown int, run startFunc) {
	t.Run("decisions", func(t *testing.T) {
		a := startApp(t)
		adm, admitAddr := startAdmit(t)
		p, base := run(t, admitAddr, a.addr())
		checkProxy(t, base, a, adm)
		select {
		case <-p.exited:
			t.Errorf("%s exited during the test; its log:\n%s", p.name, p.out)
		default:
		}
	})
	t.Run("admit_unresponsive", func(t *testing.T) {
		a := startApp(t)
		hole := startBlackHole(t)
		_, base := run(t, hole.l.Addr().String(), a.addr())
		start := time.Now()
		got := get(t, client(t, "127.0.0.1"), base+"/")
		t.Logf("with admit unresponsive: %d in %v", got.status, time.Since(start))
		if got.status != http.StatusServiceUnavailable || !strings.Contains(got.body, unavailableBody) {
			t.Errorf("with admit unresponsive: %d %q, want 503 %q", got.status, got.body, unavailableBody)
		}
		wantRetryAfter(t, "with admit unresponsive (503)", got, 60)
		if n := a.hits.Load(); n != 0 {
			t.Errorf("with admit unresponsive the app received %d requests, want none (fail closed)", n)
		}
		sent := hole.requests()
		t.Logf("the unresponsive admit received %d checks: %q", len(sent), sent)
		sameRequestID(t, sent)
	})
	t.Run("app_down", func(t *testing.T) {
		_, admitAddr := startAdmit(t)
		_, base := run(t, admitAddr, closedPort(t))
		if got := get(t, client(t, "127.0.0.1"), base+"/"); got.status != appDown || strings.Contains(got.body, unavailableBody) {
			t.Errorf("with the app down: %d %q, want the proxy's own %d, not saying %q: the app is down, not admit", got.status, got.body, appDown, unavailableBody)
		}
	})
	t.Run("admit_undecided", func(t *testing.T) {
		a := startApp(t)
		_, admitAddr := startAdmit(t, "--redis", "redis://"+closedPort(t))
		_, base := run(t, admitAddr, a.addr())
		got := get(t, client(t, "127.0.0.1"), base+"/")
		if got.status != http.StatusServiceUnavailable || !strings.Contains(got.body, unavailableBody) {
			t.Errorf("with admit's Redis down: %d %q, want 503 saying %q", got.status, got.body, unavailableBody)
		}
		wantRetryAfter(t, "with admit's Redis down (503)", got, 60)
		if n := a.hits.Load(); n != 0 {
			t.Errorf("with admit's Redis down the app received %d requests, want none (fail closed)", n)
		}
	})
}

// closedPort returns a loopback address that refuses connections: a port that was free a moment
// ago, its listener closed.
func closedPort(t *testing.T) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(freeport.Port(t))
}

// blackHole is a listener that accepts connections and never answers, until the test's cleanup;
// it records the request line of each request it received.
type blackHole struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
	lines []string
}

func startBlackHole(t *testing.T) *blackHole {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackHole{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns = append(b.conns, c)
			b.mu.Unlock()
			go func() {
				line, _ := bufio.NewReader(c).ReadString('\n')
				b.mu.Lock()
				b.lines = append(b.lines, strings.TrimSpace(line))
				b.mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, c := range b.conns {
			c.Close()
		}
	})
	return b
}

// requests returns the request lines received so far.
func (b *blackHole) requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.lines)
}

// requestIDRE finds the request_id of a check's request line.
var requestIDRE = regexp.MustCompile(`[?&]request_id=([^& ]+)`)

// sameRequestID checks that the checks of lines, sent for one client request, are one (a proxy
// that sends none again) or carry one and the same request_id: a check sent again after a timeout
// must not be counted again.
func sameRequestID(t *testing.T, lines []string) {
	t.Helper()
	if len(lines) < 2 {
		return
	}
	first := requestIDRE.FindStringSubmatch(lines[0])
	for _, l := range lines {
		if m := requestIDRE.FindStringSubmatch(l); first == nil || m == nil || m[1] != first[1] {
			t.Errorf("the proxy sent the check of one request %d times, not all with one request_id, so admit counts it more than once:\n%s", len(lines), strings.Join(lines, "\n"))
			return
		}
	}
}

// checkBalancer checks a proxy that run starts configured for a load balancer at 127.0.0.1 (the
// test's client plays it), in front of an app and admit serve: the subject is the client address
// the balancer appended to X-Forwarded-For, and only the balancer's X-Forwarded-For counts.
func checkBalancer(t *testing.T, run startFunc) {
	a := startApp(t)
	_, admitAddr := startAdmit(t)
	_, base := run(t, admitAddr, a.addr())
	balancer, direct := client(t, "127.0.0.1"), client(t, "127.0.0.2")
	for i := 1; i <= 3; i++ {
		if got := get(t, balancer, base+"/", "X-Forwarded-For", "192.0.2.1"); got.status != http.StatusOK {
			t.Fatalf("request %d for 192.0.2.1 through the balancer: %d %q, want 200", i, got.status, got.body)
		}
	}
	if got := get(t, balancer, base+"/", "X-Forwarded-For", "192.0.2.1"); got.status != http.StatusTooManyRequests {
		t.Errorf("request 4 for 192.0.2.1 through the balancer: %d %q, want 429", got.status, got.body)
	}
	if got := get(t, balancer, base+"/", "X-Forwarded-For", "198.51.100.9, 192.0.2.1"); got.status != http.StatusTooManyRequests {
		t.Errorf("request 5 for 192.0.2.1, which put an address of its own first: %d %q, want 429: the subject is the address the balancer appended", got.status, got.body)
	}
	if got := get(t, balancer, base+"/", "X-Forwarded-For", "192.0.2.2"); got.status != http.StatusOK {
		t.Errorf("request 1 for 192.0.2.2 through the balancer: %d %q, want 200: another client, another subject", got.status, got.body)
	}
	for i := 1; i <= 3; i++ {
		if got := get(t, direct, base+"/", "X-Forwarded-For", "192.0.2.2"); got.status != http.StatusOK {
			t.Fatalf("request %d from 127.0.0.2 (not the balancer) naming 192.0.2.2: %d %q, want 200: its own address is its subject", i, got.status, got.body)
		}
	}
	if got := get(t, direct, base+"/", "X-Forwarded-For", "192.0.2.3"); got.status != http.StatusTooManyRequests {
		t.Errorf("request 4 from 127.0.0.2 naming yet another address: %d %q, want 429: only the balancer's X-Forwarded-For counts", got.status, got.body)
	}
}
