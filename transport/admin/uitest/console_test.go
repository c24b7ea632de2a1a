// Package uitest drives the admin API's operator console (GET /ui of transport/admin) in a real
// browser: Debian's chromium, headless, through chromedp, against a built `admit serve` on the
// memory backend and on a real redis-server (internal/redistest). It is a module of its own so that
// chromedp never becomes admit's dependency.
package uitest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/redistest"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// requireEnv makes a missing chromium a failure rather than a skip, as for the other test programs.
const requireEnv = "ADMIT_REQUIRE_REDIS"

// adminToken is the admin token of the admit serve under test.
const adminToken = "console-test-admin-token-5e1f9c2b"

// config is the configuration admit serve runs with: a policy with a tier, one failing open, one in
// shadow mode, and the top list with its subjects revealed.
const config = `
server:
  top: {size: 10, reveal_subjects: true}
policies:
  - name: api
    algorithm: fixed_window
    limit: 2
    window: 1h
    tiers:
      pro: {limit: 100}
  - {name: login, algorithm: gcra, limit: 5, window: 1m, failure: open, local_limit: 2}
  - {name: search, algorithm: sliding_window, limit: 50, window: 1m, mode: shadow}
`

// chromium returns the path of chromium, skipping t loudly without it (failing it under requireEnv).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	if os.Getenv(requireEnv) == "1" {
		t.Fatalf("chromium not found on PATH and %s=1: install it with: apt-get install chromium", requireEnv)
	}
	t.Skip("chromium not found: the operator console was NOT TESTED in a browser; install it (apt-get install chromium, or brew install chromium) or run make test")
	return ""
}

// server is a running admit serve: its data plane's and admin API's base URLs.
type server struct {
	data, admin string
	log         *syncBuilder // its log so far
}

// serve builds admit and runs admit serve with the configuration conf, the admin API on and args
// (none: the memory backend), until t ends.
func serve(t *testing.T, conf string, args ...string) server {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "admit")
	build := exec.Command("go", "build", "-o", bin, "./cmd/admit")
	build.Dir = "../../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/admit: %v\n%s", err, out)
	}
	file := filepath.Join(dir, "admit.yaml")
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--config", file}, args...)...)
	cmd.Env = append(os.Environ(), "ADMIT_HMAC_SECRET=console-test-secret-0123456789abcdef", "ADMIT_ADMIN_TOKEN="+adminToken)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	log := new(syncBuilder)
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			t.Logf("admit serve's log:\n%s", log.String())
		}
	})
	type addr struct {
		admin bool
		addr  string
	}
	addrs := make(chan addr, 2)
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		listening := regexp.MustCompile(`msg=listening (server=admin )?addr=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addrs <- addr{m[1] != "", m[2]}
			}
		}
	}()
	s := server{log: log}
	deadline := time.After(60 * time.Second)
	for s.data == "" || s.admin == "" {
		select {
		case a := <-addrs:
			if a.admin {
				s.admin = "http://" + a.addr
			} else {
				s.data = "http://" + a.addr
			}
		case <-logDone:
			t.Fatalf("admit serve exited before listening:\n%s", log.String())
		case <-deadline:
			t.Fatalf("admit serve did not log both addresses within 60 s:\n%s", log.String())
		}
	}
	return s
}

// waitLog waits for a line of admit serve's log that holds each of parts.
func waitLog(t *testing.T, s server, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for {
		for line := range strings.Lines(s.log.String()) {
			if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("admit serve logged no line with %q within %v", parts, pollTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// syncBuilder is a strings.Builder safe for concurrent use.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) WriteString(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(v)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// check sends one check of policy api for key to the data plane and returns its status.
func (s server) check(t *testing.T, key string) int {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	res, err := client.Post(s.data+"/v1/check", "application/json", strings.NewReader(fmt.Sprintf(`{"policy":"api","key":%q}`, key)))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// metrics returns the data plane's /metrics page.
func (s server) metrics(t *testing.T) string {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	res, err := client.Get(s.data + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d, %v", res.StatusCode, err)
	}
	return string(b)
}

// messages collects what the page writes to the console, by phase.
type messages struct {
	mu   sync.Mutex
	list []chromedp.ConsoleMessage
}

func (m *messages) add(c chromedp.ConsoleMessage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.list = append(m.list, c)
}

// take returns the messages collected since the last take.
func (m *messages) take() []chromedp.ConsoleMessage {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.list
	m.list = nil
	return l
}

// pollTimeout is how long a step waits for the page: patient, on a busy machine.
const pollTimeout = 60 * time.Second

// A page is the console open in chromium, for one test.
type page struct {
	t    *testing.T
	ctx  context.Context
	msgs *messages
}

// openBrowser starts chromium at browser, headless, collecting what pages write to the console,
// until t ends.
func openBrowser(t *testing.T, browser string) *page {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.Flag("lang", "en-US"))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancel)
	p := &page{t: t, ctx: ctx, msgs: &messages{}}
	console := chromedp.Console(ctx)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			p.msgs.add(m)
		}
	}()
	return p
}

// run runs a, failing the test, at step, on an error.
func (p *page) run(step string, a chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	sctx, scancel := context.WithTimeout(p.ctx, 2*pollTimeout)
	defer scancel()
	if _, err := chromedp.Run(sctx, a); err != nil {
		p.t.Fatalf("%s: %v", step, err)
	}
}

// eval returns the string the page evaluates expr to.
func (p *page) eval(step, expr string) string {
	p.t.Helper()
	sctx, scancel := context.WithTimeout(p.ctx, 2*pollTimeout)
	defer scancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[string](expr))
	if err != nil {
		p.t.Fatalf("%s: %s: %v", step, expr, err)
	}
	return v
}

// waitFor waits, patiently, until expr is true in the page.
func (p *page) waitFor(step, expr string) {
	p.t.Helper()
	sctx, scancel := context.WithTimeout(p.ctx, 2*pollTimeout)
	defer scancel()
	if _, err := chromedp.Run(sctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(pollTimeout))); err != nil {
		p.t.Fatalf("%s: the page never had %s: %v; the message: %q", step, expr, err,
			p.eval(step, `document.getElementById("message").textContent`))
	}
}

// noConsoleErrors fails the test on any error, warning or exception the page wrote since the
// last take.
func (p *page) noConsoleErrors() {
	p.t.Helper()
	for _, m := range p.msgs.take() {
		if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.IsException() {
			p.t.Errorf("console: %s (%s:%d)", m, m.URL, m.Line)
		}
	}
}

// onlyRefusedCalls fails the test on any message the page wrote since the last take but the
// browser's own network errors of the admin API's refused calls.
func (p *page) onlyRefusedCalls() {
	p.t.Helper()
	for _, m := range p.msgs.take() {
		if m.Source != "network" || !strings.Contains(m.URL, "/v1/") {
			p.t.Errorf("console, before the right token: %s (%s)", m, m.URL)
		}
	}
}

// TestConsole runs the console in chromium against a live admit serve, on the memory backend and
// on a real Redis.
func TestConsole(t *testing.T) {
	browser := chromium(t)
	t.Run("memory", func(t *testing.T) { consoleOnMemory(t, browser) })
	t.Run("redis", func(t *testing.T) { consoleOnRedis(t, browser) })
}

// consoleOnMemory: without the token the page shows
// nothing and a wrong one is a 401 message; with the token it shows the configured policies and the
// instance's rates, a subject limited by the test appears in the top list, a reset cancelled in the
// page's confirm step changes nothing, and one confirmed (by keyboard) lets the subject in on its
// next request, audited; an override set and deleted in the page decides her next requests. It
// fails on any console error or warning and on any uncaught exception; the only messages allowed are
// the browser's own network errors of the refused calls, before the right token is entered. With
// ADMIT_PICTURES=1 it saves the page's screenshot to docs/console.png.
func consoleOnMemory(t *testing.T, browser string) {
	s := serve(t, config)
	p := openBrowser(t, browser)
	run, eval, waitFor := p.run, p.eval, p.waitFor
	ctx := p.ctx

	// Without a token: the page, and no data.
	run("open the console", chromedp.Steps(chromedp.Navigate(s.admin+"/ui"), chromedp.WaitVisible("#token-form")))
	waitFor("without a token", `document.getElementById("message").textContent.includes("Enter the admin token")`)
	if got := eval("without a token", `String(document.getElementById("data").hidden) + " " + document.querySelectorAll("#policies-table tbody tr").length`); got != "true 0" {
		t.Errorf("without a token, data hidden and policy rows: %s; want true 0", got)
	}

	// A wrong token: the 401 shown as a message, still no data, the token forgotten.
	run("enter a wrong token", chromedp.Steps(chromedp.SendKeys("#token", "not-the-admin-token-0000"), chromedp.Click("#use-token")))
	waitFor("a wrong token", `document.getElementById("message").textContent.includes("401")`)
	if got := eval("a wrong token", `String(document.getElementById("data").hidden) + " " + sessionStorage.length`); got != "true 0" {
		t.Errorf("after a wrong token, data hidden and sessionStorage entries: %s; want true 0", got)
	}
	p.onlyRefusedCalls() // the browser logs each refused call; nothing else may appear

	// The right token: the policies as configured.
	run("enter the token", chromedp.Steps(chromedp.SendKeys("#token", adminToken), chromedp.Click("#use-token")))
	waitFor("the token", `document.querySelectorAll("#policies-table tbody tr").length === 3`)
	rows := eval("the policies", `[...document.querySelectorAll("#policies-table tbody tr")].map(r => [...r.cells].map(c => c.textContent).join("|")).join("\n")`)
	for _, want := range []string{
		"api|fixed_window|2|1h|-|pro: 100 per 1h|closed|enforce",
		"login|gcra|5|1m|5|-|open (local limit 2 per instance)|enforce",
		"search|sliding_window|50|1m|-|-|closed|shadow",
	} {
		if !strings.Contains(rows, want) {
			t.Errorf("the policies' table lacks the row %q; it has:\n%s", want, rows)
		}
	}
	if got := eval("the token", `document.getElementById("token").value`); got != "" {
		t.Errorf("the token field still holds %q after use", got)
	}
	run("the algorithms' picture", chromedp.Click("details summary"))
	waitFor("the algorithms' picture", `document.getElementById("algorithms").complete && document.getElementById("algorithms").naturalWidth > 0`)
	run("the algorithms' picture, closed", chromedp.Click("details summary"))

	// Limit carol under api: she shows in the top list, with her limited decisions in the rates.
	for i, want := range []int{200, 200, 429, 429} {
		if got := s.check(t, "carol"); got != want {
			t.Fatalf("check %d of carol: %d; want %d", i+1, got, want)
		}
	}
	waitFor("the top list", `[...document.querySelectorAll('.top-table[data-policy="api"] .subject-key')].some(e => e.textContent === "carol")`)
	waitFor("the rates", `document.querySelectorAll("#charts figure").length === 3 && [...document.querySelectorAll("#rates-table tbody tr")].some(r => r.cells[0].textContent === "api" && r.cells[3].textContent !== "-" && Number(r.cells[3].textContent) > 0)`)
	if got := eval("the backend", `document.getElementById("backend").textContent`); !strings.Contains(got, "no Redis breaker") {
		t.Errorf("the backend line of the memory backend: %q; want it to say there is no Redis breaker", got)
	}

	// Select carol from the top list: her state is inspected, limited.
	run("select carol", chromedp.Click(`.top-table[data-policy="api"] button`))
	waitFor("inspect carol", `document.querySelector("#state-table tbody tr") !== null`)
	if got := eval("inspect carol", `[...document.querySelector("#state-table tbody tr").cells].map(c => c.textContent).join("|")`); !strings.HasPrefix(got, "api|policy|0|2|1h|yes|") {
		t.Errorf("carol's state row: %q; want api, from the policy, 0 of 2 left per 1h, limited", got)
	}
	if os.Getenv("ADMIT_PICTURES") == "1" {
		// A few more subjects over a few polls, for charts worth a look.
		for i := range 6 {
			polls := eval("the polls", `String(history.length)`)
			for _, key := range []string{fmt.Sprintf("user-%d", i), fmt.Sprintf("user-%d", i), fmt.Sprintf("user-%d", i), "carol"} {
				s.check(t, key)
			}
			waitFor("a poll", `history.length > `+polls)
		}
		screenshot(t, ctx)
	}

	// A reset cancelled in the confirm step changes nothing.
	run("reset, cancelled", chromedp.Steps(chromedp.SendKeys("#reason", "ticket 4711"), chromedp.Click("#reset"),
		chromedp.WaitVisible("#confirm-no"), chromedp.Click("#confirm-no")))
	waitFor("reset, cancelled", `document.getElementById("subject-result").textContent.includes("cancelled")`)
	if got := s.check(t, "carol"); got != http.StatusTooManyRequests {
		t.Fatalf("carol after a cancelled reset: %d; want 429", got)
	}

	// A reset confirmed lets her in on her next request. By keyboard: Enter on the button, the dialog
	// opens on Cancel, Tab to Confirm, Enter.
	run("reset, by keyboard", chromedp.Steps(chromedp.Focus("#reset"), chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible("#confirm-yes")))
	if got := eval("the confirm step", `document.activeElement.id + " " + document.getElementById("confirm").open`); got != "confirm-no true" {
		t.Fatalf("the confirm step's focus and state: %q; want the dialog open on its Cancel button", got)
	}
	run("reset, confirmed", chromedp.Steps(chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent(kb.Enter)))
	waitFor("reset, confirmed", `document.getElementById("subject-result").textContent.includes("keys deleted")`)
	if got := s.check(t, "carol"); got != http.StatusOK {
		t.Fatalf("carol after the reset confirmed in the page: %d; want 200", got)
	}
	waitLog(t, s, `msg="admin change" action=reset policy=api subject_digest=`, `reason="ticket 4711"`, "result=ok")

	// An override set in the page: carol, one request in, gets two more of her new 3, then none;
	// deleted in the page, she is back under the policy's 2, which she is over.
	run("set an override", chromedp.Steps(chromedp.SendKeys("#ov-limit", "3"), chromedp.SendKeys("#ov-expires", "1h"),
		chromedp.Click("#set-override"), chromedp.WaitVisible("#confirm-yes"), chromedp.Click("#confirm-yes")))
	waitFor("set an override", `document.getElementById("subject-result").textContent.includes("Override set: api limit 3")`)
	for i, want := range []int{200, 200, 429} {
		if got := s.check(t, "carol"); got != want {
			t.Fatalf("carol's check %d under the override of 3 set in the page: %d; want %d", i+2, got, want)
		}
	}
	run("delete the override", chromedp.Steps(chromedp.Click("#delete-override"), chromedp.WaitVisible("#confirm-yes"), chromedp.Click("#confirm-yes")))
	waitFor("delete the override", `document.getElementById("subject-result").textContent.includes("deleted")`)
	waitLog(t, s, "action=override_delete policy=api", "result=ok")
	run("inspect carol again", chromedp.Click("#inspect"))
	waitFor("inspect carol again", `document.querySelector("#state-table tbody tr") !== null && document.querySelector("#state-table tbody tr").cells[1].textContent === "policy"`)

	// At 200% zoom (half the CSS width) the page still fits its width: only a wide table scrolls, in
	// its own box.
	run("zoom 200%", chromedp.EmulateViewport(640, 900))
	waitFor("zoom 200%", `document.documentElement.scrollWidth <= document.documentElement.clientWidth`)
	run("zoom 100%", chromedp.EmulateReset())

	// Give the page a poll or two more, then no error may have been written.
	waitFor("a last poll", `document.querySelectorAll("#charts figure").length === 3`)
	p.noConsoleErrors()
}

// consoleOnRedis runs admit serve on a real redis-server, its breaker's cool-off long enough to stay
// open once open: the page shows the Redis breaker closed and a subject limited on Redis in the top
// list; then Redis stops, the test's checks fail until the breaker opens, and the page shows it open.
// No console error, warning or exception.
func consoleOnRedis(t *testing.T, browser string) {
	srv := redistest.Start(t)
	s := serve(t, strings.Replace(config, "server:\n", "server:\n  breaker: {failures: 5, cool_off: 10m}\n", 1), "--redis", srv.URL())
	p := openBrowser(t, browser)
	p.run("open the console", chromedp.Steps(chromedp.Navigate(s.admin+"/ui"), chromedp.WaitVisible("#token-form")))
	p.run("enter the token", chromedp.Steps(chromedp.SendKeys("#token", adminToken), chromedp.Click("#use-token")))
	p.waitFor("the token", `document.querySelectorAll("#policies-table tbody tr").length === 3`)
	p.onlyRefusedCalls()

	for i, want := range []int{200, 200, 429} {
		if got := s.check(t, "carol"); got != want {
			t.Fatalf("check %d of carol on Redis: %d; want %d", i+1, got, want)
		}
	}
	p.waitFor("the top list", `[...document.querySelectorAll('.top-table[data-policy="api"] .subject-key')].some(e => e.textContent === "carol")`)
	p.waitFor("the breaker closed", `document.querySelector("#backend .state-closed") !== null`)
	if got := p.eval("the breaker closed", `document.getElementById("backend").textContent`); !strings.Contains(got, "Redis breaker redis: closed.") {
		t.Errorf("the backend line on Redis: %q; want the Redis breaker, closed", got)
	}

	srv.Stop(t)
	open := regexp.MustCompile(`(?m)^admit_breaker_state\{breaker="redis",state="open"\} 1$`)
	for deadline := time.Now().Add(pollTimeout); !open.MatchString(s.metrics(t)); {
		if got := s.check(t, "dave"); got != http.StatusServiceUnavailable {
			t.Fatalf("a check with Redis stopped: %d; want 503", got)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the breaker did not open within %v of failing checks:\n%s", pollTimeout, s.metrics(t))
		}
	}
	p.waitFor("the breaker open", `document.querySelector("#backend .state-open") !== null`)
	if got := p.eval("the breaker open", `document.getElementById("backend").textContent`); !strings.Contains(got, "Redis breaker redis: open.") {
		t.Errorf("the backend line with Redis stopped: %q; want the Redis breaker, open", got)
	}
	p.noConsoleErrors()
}

// screenshot saves the page, whole, to docs/console.png.
func screenshot(t *testing.T, ctx context.Context) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 2*pollTimeout)
	defer cancel()
	height, err := chromedp.Run(sctx, chromedp.Evaluate[int64](`document.documentElement.scrollHeight`))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	// The viewport as tall as the page, so that the whole page is laid out and drawn.
	if err := chromedp.Do(sctx, chromedp.EmulateViewport(1100, height)); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	defer chromedp.Do(sctx, chromedp.EmulateReset())
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile("../../../docs/console.png", png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote docs/console.png (%d bytes)", len(png))
}
