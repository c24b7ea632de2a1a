package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/internal/syncbuf"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/metrics"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/httpapi"
	"github.com/prometheus/client_golang/prometheus"
)

// testSecret is the HMAC secret the tests give admit serve. It is the README's, so the demo key the
// tests find in Redis is the one README.md and docs/keys.md show: readmeDemoKey.
const testSecret = "0123456789abcdef-test-secret"

// readmeDemoKey is the demo account's key under testSecret, as README.md and docs/keys.md show it.
const readmeDemoKey = "rl:demo:v1-fw10000:{8f30d4fd92e8cddd6479f96bd3a200d5}"

// demoKey returns the key of the demo account under secret: the policy demoLimit, version
// bound.DefaultVersion, subject httpapi.DemoSubject.
func demoKey(t *testing.T, secret string) string {
	t.Helper()
	keys, err := admit.NewKeyBuilder([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	key, err := keys.Key(demoLimit(), bound.DefaultVersion, admit.Subject{ID: httpapi.DemoSubject})
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// TestDemoKeyIsREADMEs checks that the demo policy makes the key that the README shows.
func TestDemoKeyIsREADMEs(t *testing.T) {
	if got := demoKey(t, testSecret); got != readmeDemoKey {
		t.Errorf("demo key %s, want the README's %s", got, readmeDemoKey)
	}
}

// useSecret sets ADMIT_HMAC_SECRET to testSecret for the test, and REDIS_URL, ADMIT_ADMIN_TOKEN and
// ADMIT_LISTEN to nothing.
func useSecret(t *testing.T) {
	t.Setenv(secretEnv, testSecret)
	t.Setenv("REDIS_URL", "")
	t.Setenv(adminTokenEnv, "")
	t.Setenv(listenEnv, "")
}

// noSecretIn fails t if the log holds testSecret or any of secrets.
func noSecretIn(t *testing.T, log string, secrets ...string) {
	t.Helper()
	for _, s := range append(secrets, testSecret) {
		if s != "" && strings.Contains(log, s) {
			t.Errorf("the log holds the HMAC secret %q", s)
		}
	}
}

// logWatch keeps what admit logs, safe for concurrent use, so a test can wait for a line.
type logWatch struct{ syncbuf.Buffer }

var listeningRE = regexp.MustCompile(`msg=listening addr=(\S+)|"msg":"listening","addr":"([^"]+)"`)

// waitAddr returns the address from the "listening" log line, failing t if it does not appear
// within 10s or exited is closed first.
func (w *logWatch) waitAddr(t *testing.T, exited <-chan struct{}) string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if m := listeningRE.FindStringSubmatch(w.String()); m != nil {
			return m[1] + m[2] // text's, or JSON's
		}
		select {
		case <-exited:
			t.Fatalf("admit exited before listening; its log:\n%s", w.String())
		case <-deadline:
			t.Fatalf("admit did not log its address within 10s; its log:\n%s", w.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitLine waits up to 10s for a log line containing s.
func (w *logWatch) waitLine(t *testing.T, s string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(w.String(), s); {
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q within 10s; log:\n%s", s, w.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitCount waits up to 10s for n log lines containing s.
func (w *logWatch) waitCount(t *testing.T, s string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); strings.Count(w.String(), s) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d log lines with %q within 10s; log:\n%s", n, s, w.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// response is what a test checks of an HTTP response.
type response struct {
	status int
	header http.Header
	body   string
}

// get sends GET url with a 5s timeout.
func get(t *testing.T, url string) response {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	res, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", url, err)
	}
	return response{status: res.StatusCode, header: res.Header, body: string(body)}
}

// checkDemo sends GET /demo to base once per wanted status and checks each answer.
func checkDemo(t *testing.T, base string, statuses ...int) {
	t.Helper()
	for i, want := range statuses {
		r := get(t, base+"/demo")
		if r.status != want {
			t.Errorf("request %d: GET /demo = %d %q, want %d", i+1, r.status, r.body, want)
			continue
		}
		switch want {
		case http.StatusOK:
			if r.body != "ok\n" {
				t.Errorf("request %d: body %q, want %q", i+1, r.body, "ok\n")
			}
		case http.StatusTooManyRequests:
			if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || ra > 10 {
				t.Errorf("request %d: Retry-After %q, want 1…10", i+1, r.header.Get("Retry-After"))
			}
			if r.body != "rate limit exceeded\n" {
				t.Errorf("request %d: body %q", i+1, r.body)
			}
		case http.StatusServiceUnavailable:
			if ra := r.header.Get("Retry-After"); ra != "1" {
				t.Errorf("request %d: Retry-After %q, want 1", i+1, ra)
			}
			if r.body != "limiter unavailable\n" {
				t.Errorf("request %d: body %q", i+1, r.body)
			}
		}
	}
}

// serveInProcess runs "admit serve args…" in this process, in the environment of the test, and
// returns the base URL, the log, and a function that cancels the run and returns its exit code. At
// the test's cleanup it checks that the log holds no HMAC secret.
func serveInProcess(t *testing.T, args ...string) (base string, logs *logWatch, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs = &logWatch{}
	code := make(chan int, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		code <- run(ctx, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...), io.Discard, logs)
	}()
	t.Cleanup(func() {
		cancel()
		<-exited
		noSecretIn(t, logs.String(), os.Getenv(secretEnv))
	})
	addr := logs.waitAddr(t, exited)
	stop = func() int {
		t.Helper()
		cancel()
		select {
		case c := <-code:
			return c
		case <-time.After(15 * time.Second):
			t.Fatalf("run did not return within 15s of cancel; log:\n%s", logs.String())
			return -1
		}
	}
	return "http://" + addr, logs, stop
}

func TestServeInProcess(t *testing.T) {
	useSecret(t)
	base, logs, stop := serveInProcess(t)
	checkDemo(t, base, 200, 200, 200, 429)
	if r, want := get(t, base+"/healthz"), "ok "+moduleVersion()+"\n"; r.status != 200 || r.body != want {
		t.Errorf("GET /healthz = %d %q, want 200 %q", r.status, r.body, want)
	}
	for _, s := range []string{"backend=memory", `msg="HMAC secret" source=ADMIT_HMAC_SECRET`} {
		if !strings.Contains(logs.String(), s) {
			t.Errorf("the log lacks %q:\n%s", s, logs)
		}
	}
	if code := stop(); code != 0 {
		t.Errorf("run returned %d after cancel, want 0; log:\n%s", code, logs)
	}
	if c, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), time.Second); err == nil {
		c.Close()
		t.Error("the listener is still open after run returned")
	}
}

// TestServeRedisPasswordNotLogged starts serve on a Redis that refuses connections: it must start,
// answer 503, and never log the password.
func TestServeRedisPasswordNotLogged(t *testing.T) {
	useSecret(t)
	const password = "hunter2-secret"
	url := "redis://rl-user:" + password + "@" + redistest.ClosedPort(t)
	base, logs, stop := serveInProcess(t, "--redis", url)
	start := time.Now()
	checkDemo(t, base, 503)
	t.Logf("503 after %v on a refused connection", time.Since(start))
	if code := stop(); code != 0 {
		t.Errorf("run returned %d, want 0", code)
	}
	out := logs.String()
	t.Logf("log:\n%s", out)
	if strings.Contains(out, password) || strings.Contains(out, "rl-user") {
		t.Error("the log holds the Redis user or password")
	}
	if !strings.Contains(out, "backend=redis") {
		t.Error("the log does not name the redis backend")
	}
}

func TestServeBadRedisURL(t *testing.T) {
	useSecret(t)
	for _, url := range []string{
		"redis://admin:hunter2-secret@[::1",                          // unparseable
		"redis://admin:hunter2-secret@h:port",                        // bad port
		"http://admin:hunter2-secret@h:6379",                         // wrong scheme
		"redis://admin:hunter2-secret@127.0.0.1:99999",               // port out of range
		"redis://admin:hunter2-secret@127.0.0.1:6379?dial_timout=5s", // a misspelt option
		"redis://admin:hunter2-secret@127.0.0.1:6379?max_retries=3",  // an option admit cannot honour
	} {
		var stderr syncbuf.Buffer
		code := run(context.Background(), []string{"serve", "--listen", "127.0.0.1:0", "--redis", url}, io.Discard, &stderr)
		t.Logf("%s: exit %d, stderr:\n%s", url, code, stderr.String())
		if code != exitUsage {
			t.Errorf("%s: exit %d, want %d", url, code, exitUsage)
		}
		if strings.Contains(stderr.String(), "hunter2") {
			t.Errorf("%s: stderr holds the password", url)
		}
		if lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "admit serve: --redis: ") ||
			lines[1] != "Run 'admit serve --help' for its usage." {
			t.Errorf("%s: stderr is not the one line on --redis and the hint", url)
		}
	}
}

func TestParseServeRedisPrecedence(t *testing.T) {
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{"", nil, ""},
		{"redis://env:1", nil, "redis://env:1"},
		{"redis://env:1", []string{"--redis", "redis://flag:1"}, "redis://flag:1"},
		{"", []string{"--redis=redis://flag:1"}, "redis://flag:1"},
		{"redis://env:1", []string{"--redis", ""}, ""}, // an explicit empty flag means memory
	} {
		t.Setenv("REDIS_URL", tc.env)
		t.Setenv(listenEnv, "")
		cfg, _, done := parseServe(tc.args, io.Discard, io.Discard)
		if done || cfg.redisURL != tc.want || cfg.listen != defaultListen || cfg.secretFileSet {
			t.Errorf("REDIS_URL=%q %q: %+v done=%v, want redisURL %q", tc.env, tc.args, cfg, done, tc.want)
		}
	}
}

// TestParseServeListenPrecedence checks where admit serve's HTTP address comes from: --listen,
// else ADMIT_LISTEN, else the file's server.listen, else the default.
func TestParseServeListenPrecedence(t *testing.T) {
	for _, tc := range []struct {
		env, file string
		args      []string
		want      string
	}{
		{"", "", nil, defaultListen},
		{"", "10.0.0.1:1", nil, "10.0.0.1:1"},
		{":8080", "10.0.0.1:1", nil, ":8080"},
		{":8080", "", nil, ":8080"},
		{":8080", "10.0.0.1:1", []string{"--listen", "127.0.0.1:2"}, "127.0.0.1:2"},
		{"", "10.0.0.1:1", []string{"--listen=127.0.0.1:2"}, "127.0.0.1:2"},
	} {
		t.Setenv("REDIS_URL", "")
		t.Setenv(listenEnv, tc.env)
		cfg, _, done := parseServe(tc.args, io.Discard, io.Discard)
		if tc.file != "" {
			cfg.applyFile(policy.Server{Listen: tc.file})
		}
		if done || cfg.listen != tc.want {
			t.Errorf("ADMIT_LISTEN=%q server.listen=%q %q: listen %q (done=%v), want %q", tc.env, tc.file, tc.args, cfg.listen, done, tc.want)
		}
	}
}

func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args             []string
		code             int
		stdout, stderr   []string // substrings wanted
		noStdout, noErrs bool
	}{
		{args: nil, code: 2, stderr: []string{"Usage:", "serve", "version"}, noStdout: true},
		{args: []string{"help"}, code: 0, stdout: []string{"Usage:", "serve", "version"}, noErrs: true},
		{args: []string{"--help"}, code: 0, stdout: []string{"Usage:", "serve", "version"}, noErrs: true},
		{args: []string{"-h"}, code: 0, stdout: []string{"Usage:", "serve", "version"}, noErrs: true},
		{args: []string{"help", "serve"}, code: 0, stdout: []string{"admit serve", "--listen", "--redis", "REDIS_URL", "--hmac-secret-file", "ADMIT_HMAC_SECRET"}, noErrs: true},
		{args: []string{"serve", "--help"}, code: 0, stdout: []string{"admit serve", "--listen", "--redis", "REDIS_URL", "/demo", "--hmac-secret-file PATH", "$ADMIT_HMAC_SECRET", "at least 16"}, noErrs: true},
		{args: []string{"serve", "-h"}, code: 0, stdout: []string{"admit serve"}, noErrs: true},
		{args: []string{"version"}, code: 0, stdout: []string{"admit ", "go1."}, noErrs: true},
		{args: []string{"bogus"}, code: 2, stderr: []string{`unknown command "bogus"`, "admit help"}, noStdout: true},
		{args: []string{"serve", "--bogus"}, code: 2, stderr: []string{"bogus", "admit serve"}, noStdout: true},
		{args: []string{"serve", "extra"}, code: 2, stderr: []string{`unexpected argument "extra"`}, noStdout: true},
		{args: []string{"serve", "--listen", "256.0.0.1:bad"}, code: 1, stderr: []string{"cannot listen"}, noStdout: true},
		{args: []string{"serve", "--log-format", "xml"}, code: 2, stderr: []string{`--log-format "xml": want text or json`}, noStdout: true},
		{args: []string{"config", "validate", "../../policy/testdata/valid/everything.yaml"}, code: 0, stdout: []string{"everything.yaml: valid: 6 policies, 5 tiers, 2 routes"}, noErrs: true},
		{args: []string{"config", "validate", "../../policy/testdata/valid/minimal.yaml"}, code: 0, stdout: []string{"minimal.yaml: valid: 1 policy, 0 routes"}, noErrs: true},
		{args: []string{"config", "validate", "../../policy/testdata/errors/limit-zero.yaml"}, code: 1,
			stderr: []string{"limit-zero.yaml:4:12: policies[0] (api).limit: 0 is outside", "limit-zero.yaml: 1 error\n"}, noStdout: true},
		{args: []string{"config", "validate", "no-such-file.yaml"}, code: 1, stderr: []string{"no-such-file.yaml"}, noStdout: true},
		{args: []string{"config", "validate"}, code: 2, stderr: []string{"admit config validate FILE"}, noStdout: true},
		{args: []string{"config", "--help"}, code: 0, stdout: []string{"admit config validate FILE", "Exit status"}, noErrs: true},
		{args: []string{"help", "config"}, code: 0, stdout: []string{"admit config validate FILE"}, noErrs: true},
	} {
		useSecret(t)
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		if code != tc.code {
			t.Errorf("admit %q: exit %d, want %d; stderr:\n%s", tc.args, code, tc.code, stderr.String())
		}
		for _, s := range tc.stdout {
			if !strings.Contains(stdout.String(), s) {
				t.Errorf("admit %q: stdout lacks %q:\n%s", tc.args, s, stdout.String())
			}
		}
		for _, s := range tc.stderr {
			if !strings.Contains(stderr.String(), s) {
				t.Errorf("admit %q: stderr lacks %q:\n%s", tc.args, s, stderr.String())
			}
		}
		if tc.noStdout && stdout.Len() > 0 {
			t.Errorf("admit %q: unexpected stdout:\n%s", tc.args, stdout.String())
		}
		if tc.noErrs && stderr.Len() > 0 {
			t.Errorf("admit %q: unexpected stderr:\n%s", tc.args, stderr.String())
		}
	}
}

// TestServeHTTPFinishesInFlight checks the graceful stop: once ctx is done, serveHTTP stops
// accepting, lets a request in flight finish, and returns nil.
func TestServeHTTPFinishesInFlight(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		io.WriteString(w, "done\n")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &logWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serveHTTP(ctx, ln, h, 10*time.Second, slog.New(slog.NewTextHandler(logs, nil))) }()

	got := make(chan string, 1)
	go func() {
		res, err := http.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			got <- err.Error()
			return
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		got <- fmt.Sprintf("%d %q %v", res.StatusCode, body, err)
	}()
	<-entered
	cancel()
	logs.waitLine(t, "shutting down")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		if err != nil {
			break // the listener is closed
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting 5s after ctx was canceled")
		}
	}
	select {
	case err := <-served:
		t.Fatalf("serveHTTP returned %v with a request in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if r, want := <-got, `200 "done\n" <nil>`; r != want {
		t.Errorf("in-flight request: %s, want %s", r, want)
	}
	if err := <-served; err != nil {
		t.Errorf("serveHTTP = %v, want nil", err)
	}
}

// TestServeHTTPGraceExceeded checks that a request outliving the grace period makes serveHTTP
// return an error, after closing the connection.
func TestServeHTTPGraceExceeded(t *testing.T) {
	entered := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done() // until the server closes the connection
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serveHTTP(ctx, ln, h, 100*time.Millisecond, slog.New(slog.DiscardHandler)) }()
	clientDone := make(chan error, 1)
	go func() {
		res, err := http.Get("http://" + ln.Addr().String() + "/")
		if err == nil {
			res.Body.Close()
		}
		clientDone <- err
	}()
	<-entered
	cancel()
	select {
	case err := <-served:
		if err == nil {
			t.Error("serveHTTP = nil with a request outliving the grace period, want an error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("serveHTTP did not return within 5s of a 100ms grace period")
	}
	if err := <-clientDone; err == nil {
		t.Error("the stuck request got a response, want its connection closed")
	}
}

// TestUsageErrorsAreOneLine: a wrong command line is told in one line, naming what is wrong, and
// a hint at the command's help — not the whole usage — with exit status 2 and nothing on stdout.
func TestUsageErrorsAreOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the first line
	}{
		{[]string{"serve", "--bogus"}, "admit serve: flag provided but not defined: --bogus"},
		{[]string{"serve", "--listen"}, "admit serve: flag needs an argument: --listen"},
		{[]string{"serve", "extra"}, `admit serve: unexpected argument "extra"`},
		{[]string{"serve", "--log-format", "xml"}, `admit serve: --log-format "xml": want text or json`},
		{[]string{"serve", "--grpc-listen", "127.0.0.1:0"}, "admit serve: --grpc-listen needs --envoy-config DIR"},
		{[]string{"serve", "--redis", "127.0.0.1:6379"}, "admit serve: --redis 127.0.0.1:6379: want redis://host:port (or rediss://host:port for TLS, or unix:///path/to/redis.sock)"},
		{[]string{"serve", "--redis", "redis://127.0.0.1:99999"}, "admit serve: --redis: redisstore: Redis URL redis://127.0.0.1:99999: port \"99999\" outside 1...65535"},
		{[]string{"proxy", "--config", "x.yaml"}, "admit proxy: --upstream URL is required"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1"}, "admit proxy: --config FILE is required"},
		{[]string{"proxy", "--redis", "localhost:6379"}, "admit proxy: --redis localhost:6379: want redis://host:port"},
		{[]string{"check", "--bogus"}, "admit check: flag provided but not defined: --bogus"},
		{[]string{"check", "--config", "x.yaml"}, "admit check: --config, --policy and --key are required"},
		{[]string{"check", "--cost", "x"}, `admit check: invalid value "x" for flag --cost: parse error`},
		{[]string{"config"}, "admit config: want: admit config validate FILE"},
		{[]string{"config", "check", "x.yaml"}, `admit config: unknown subcommand "check"`},
		{[]string{"config", "validate"}, "admit config validate: want one FILE: admit config validate FILE"},
		{[]string{"config", "validate", "a.yaml", "b.yaml"}, `admit config validate: unexpected argument "b.yaml"`},
		{[]string{"bench", "--bogus"}, "admit bench: flag provided but not defined: --bogus"},
		{[]string{"bench", "--rate", "fast"}, "admit bench: --rate"},
		{[]string{"state", "--bogus"}, "admit state: flag provided but not defined: --bogus"},
		{[]string{"reset", "--bogus"}, "admit reset: flag provided but not defined: --bogus"},
		{[]string{"reset", "--key", "k", "extra"}, `admit reset: unexpected argument "extra"`},
		{[]string{"bogus"}, `admit: unknown command "bogus"`},
		{[]string{"help", "bogus"}, `admit help: unknown command "bogus"`},
	} {
		useSecret(t)
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
		cmd := tc.args[0]
		hint := "Run 'admit " + cmd + " --help' for its usage."
		if cmd == "bogus" || cmd == "help" {
			hint = "Run 'admit help' for the commands."
		}
		if code != exitUsage || stdout.Len() > 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], tc.want) || lines[1] != hint {
			t.Errorf("admit %q: exit %d, stdout %q, stderr:\n%s\nwant exit 2, nothing on stdout, and two lines on stderr:\n%s…\n%s",
				tc.args, code, stdout.String(), stderr.String(), tc.want, hint)
		}
	}
}

// TestServeRedisURLFromEnvironment: a REDIS_URL without a scheme is refused as --redis is, naming
// REDIS_URL, and without what may be a password.
func TestServeRedisURLFromEnvironment(t *testing.T) {
	useSecret(t)
	t.Setenv("REDIS_URL", "admin:hunter2@127.0.0.1:6379")
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"serve"}, io.Discard, &stderr)
	want := "admit serve: REDIS_URL …@127.0.0.1:6379: want redis://host:port"
	if code != exitUsage || !strings.HasPrefix(stderr.String(), want) || strings.Contains(stderr.String(), "hunter2") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and %s…, no password", code, stderr.String(), want)
	}
}

// TestHelpFlagsHaveTwoDashes: each command's --help lists its flags spelt --flag, as its usage
// text and errors spell them, never Go's -flag.
func TestHelpFlagsHaveTwoDashes(t *testing.T) {
	for cmd, flags := range map[string][]string{
		"serve": {"--config FILE", "--envoy-config DIR", "--grpc-listen address", "--hmac-secret-file PATH", "--listen address", "--log-format FORMAT", "--redis URL"},
		"proxy": {"--upstream URL", "--config FILE", "--listen address"},
		"check": {"--config FILE", "--policy NAME", "--key SUBJECT", "--cost int", "--request-id ID"},
		"bench": {"--target URL", "--rate N", "--duration duration", "--hot-key", "--json"},
		"state": {"--admin URL", "--admin-token-file PATH", "--policy NAME", "--key SUBJECT", "--tier TIER"},
		"reset": {"--admin URL", "--admin-token-file PATH", "--policy NAME", "--key SUBJECT", "--reason TEXT"},
	} {
		var stdout bytes.Buffer
		if code := run(context.Background(), []string{cmd, "--help"}, &stdout, io.Discard); code != exitOK {
			t.Errorf("admit %s --help: exit %d", cmd, code)
		}
		_, list, ok := strings.Cut(stdout.String(), "\nFlags:\n")
		if !ok {
			t.Errorf("admit %s --help has no Flags: section:\n%s", cmd, stdout.String())
			continue
		}
		for _, line := range strings.Split(list, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "-") && !strings.HasPrefix(line, "  --") {
				t.Errorf("admit %s --help: flag line %q; want it spelt --flag", cmd, line)
			}
		}
		for _, f := range flags {
			if !strings.Contains(list, "\n  "+f+"\n") && !strings.HasPrefix(list, "  "+f+"\n") {
				t.Errorf("admit %s --help lacks the line %q:\n%s", cmd, "  "+f, list)
			}
		}
	}
	var stdout bytes.Buffer
	run(context.Background(), []string{"serve", "--help"}, &stdout, io.Discard)
	if want := "  --listen address\n    \taddress to serve HTTP on (host:port; port 0 picks a free one) (default \"127.0.0.1:8080\")\n"; !strings.Contains(stdout.String(), want) {
		t.Errorf("admit serve --help lacks %q (its usage and default)", want)
	}
}

// TestHelpDescribesServe: admit help, the first thing a user reads, names all that serve serves.
func TestHelpDescribesServe(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}} {
		var stdout bytes.Buffer
		if code := run(context.Background(), args, &stdout, io.Discard); code != exitOK {
			t.Errorf("admit %q: exit %d", args, code)
		}
		for _, s := range []string{"POST /v1/check", "GET /v1/policies", "GET /demo", "GET /healthz", "GET /readyz", "GET /metrics",
			"--envoy-config DIR", "gRPC", "rate limit service (RLS v3)", "--grpc-listen (default " + defaultGRPCListen + ")", "--listen (default " + defaultListen + ")"} {
			if !strings.Contains(stdout.String(), s) {
				t.Errorf("admit %q lacks %q:\n%s", args, s, stdout.String())
			}
		}
	}
}

// TestJSONLogDurations: the JSON log writes a duration as the text log does, "10s", not as an
// integer of nanoseconds, in a group too.
func TestJSONLogDurations(t *testing.T) {
	var b bytes.Buffer
	slog.New(newJSONHandler(&b)).Info("m", "grace", 10*time.Second, slog.Group("g", "timeout", 250*time.Millisecond), "n", 3)
	want := `"msg":"m","grace":"10s","g":{"timeout":"250ms"},"n":3}`
	if !strings.Contains(b.String(), want) {
		t.Errorf("JSON log line %s; want it to end %s", b.String(), want)
	}
}

// TestServeJSONLogDurations: admit serve --log-format json logs its shutdown grace as "10s".
func TestServeJSONLogDurations(t *testing.T) {
	useSecret(t)
	_, logs, stop := serveInProcess(t, "--log-format", "json")
	if code := stop(); code != 0 {
		t.Errorf("exit %d; log:\n%s", code, logs)
	}
	if want := `"msg":"shutting down","grace":"` + shutdownGrace.String() + `"`; !strings.Contains(logs.String(), want) {
		t.Errorf("the log lacks %s:\n%s", want, logs)
	}
}

// startReloader runs a reloader of file, loaded with the configuration text, polling every 10ms
// until the test ends, and returns its log and the registry of its metrics.
func startReloader(t *testing.T, file, text string) (*logWatch, *prometheus.Registry) {
	t.Helper()
	writeFile(t, file, text)
	cfg, err := policy.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := admit.NewKeyBuilder([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New(memstore.Options{})
	t.Cleanup(func() { store.Close() })
	svc, err := service.New(store, keys, cfg)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := metrics.NewConfig(reg)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logWatch{}
	r := &reloader{file: file, svc: svc, metrics: m, logger: slog.New(slog.NewTextHandler(logs, nil)), server: cfg.Server}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.run(ctx, 10*time.Millisecond) }()
	t.Cleanup(func() { cancel(); <-done })
	return logs, reg
}

func writeFile(t *testing.T, file, text string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// reloadFailures returns admit_config_reloads_total{result="failure"} of reg.
func reloadFailures(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if mf.GetName() == "admit_config_reloads_total" && l.GetName() == "result" && l.GetValue() == "failure" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

const reloadConfig = "policies:\n  - name: api\n    algorithm: fixed_window\n    limit: %d\n    window: 1s\n"

// TestReloadDeletedFile: a configuration file deleted under a running server is reported at the
// next look at it, once however many looks follow, and counted as a failed reload; once it is
// back, a changed file is reloaded.
func TestReloadDeletedFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "admit.yaml")
	logs, reg := startReloader(t, file, fmt.Sprintf(reloadConfig, 5))
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	const deleted = `level=ERROR msg="cannot read the configuration file; the loaded one keeps serving" file=`
	logs.waitLine(t, deleted)
	time.Sleep(300 * time.Millisecond) // some 30 more looks, fewer on a loaded machine
	if n := strings.Count(logs.String(), deleted); n != 1 {
		t.Errorf("the deleted file is reported %d times; want once:\n%s", n, logs)
	}
	if n := reloadFailures(t, reg); n != 1 {
		t.Errorf("admit_config_reloads_total{result=\"failure\"} = %v; want 1", n)
	}
	writeFile(t, file, fmt.Sprintf(reloadConfig, 6))
	logs.waitLine(t, `msg="configuration reloaded"`)
	if !strings.Contains(logs.String(), `msg="the configuration file can be read again"`) {
		t.Errorf("the log does not say the file is back:\n%s", logs)
	}
}

// TestReloadServerSettingsChanged: a reload that changes server settings names each that changed,
// and says they need a restart.
func TestReloadServerSettingsChanged(t *testing.T) {
	file := filepath.Join(t.TempDir(), "admit.yaml")
	logs, _ := startReloader(t, file, "server:\n  listen: 127.0.0.1:8080\n"+fmt.Sprintf(reloadConfig, 5))
	writeFile(t, file, "server:\n  listen: 127.0.0.1:9090\n  ipv6_prefix: 48\n  redis_tls:\n    server_name: redis.internal\n"+fmt.Sprintf(reloadConfig, 5))
	logs.waitLine(t, `msg="configuration reloaded"`)
	want := `level=WARN msg="server settings changed; they take effect at the next start, the running ones stay" file=` + file +
		" changed=server.listen,server.redis_tls,server.ipv6_prefix\n"
	if !strings.Contains(logs.String(), want) {
		t.Errorf("the log lacks %q:\n%s", want, logs)
	}
	writeFile(t, file, "server:\n  listen: 127.0.0.1:8080\n"+fmt.Sprintf(reloadConfig, 7)) // the running settings again
	logs.waitCount(t, `msg="configuration reloaded"`, 2)
	if n := strings.Count(logs.String(), "server settings changed"); n != 1 {
		t.Errorf("after a reload back to the running settings, %d warnings; want the first only:\n%s", n, logs)
	}
}

// TestDroppedLineFormat: the line that reports log lines dropped is in the log's own format, so
// a JSON log stays one JSON record per line.
func TestDroppedLineFormat(t *testing.T) {
	var record map[string]any
	if err := json.Unmarshal(droppedLine("json", 7), &record); err != nil || record["msg"] != "log lines dropped" || record["dropped"] != 7.0 {
		t.Errorf("JSON dropped line %q: %v, %v; want a JSON record of 7 dropped", droppedLine("json", 7), record, err)
	}
	if text := string(droppedLine("text", 7)); !strings.Contains(text, `level=WARN msg="log lines dropped" dropped=7`) {
		t.Errorf("text dropped line %q", text)
	}
}
