package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/loadgen"
	"github.com/admit-dev/admit/internal/redistest"
)

// soakEnv names the environment variable that sets the soak's length, a Go duration such as 10m;
// the fault period is then a minute. Without it the soak is the short one, for CI.
const soakEnv = "ADMIT_SOAK"

// soakConfig is the soak's policy: 10 keys at the soak's rate are about half over their limit, so
// the service answers 200 and 429 while Redis is healthy, and must answer 503 while it is not.
const soakConfig = `
policies:
  - name: soak
    algorithm: fixed_window
    limit: 10
    window: 1s
`

// soakKeys is how many keys the load spreads over.
const soakKeys = 10

// An outage marks the spans during which Redis surely cannot answer: a request that starts and ends
// within one span must not be admitted (fail-closed).
type outage struct {
	mu   sync.Mutex
	on   bool
	span int // counts the changes of on
}

// set marks the start (true, once the fault is in place) or end (false, before the fault is
// removed) of a span.
func (o *outage) set(on bool) {
	o.mu.Lock()
	o.on = on
	o.span++
	o.mu.Unlock()
}

// mark returns the span now, and whether it is an outage.
func (o *outage) mark() (int, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.span, o.on
}

// A soakFault is a fault the soak injects and removes.
type soakFault struct {
	name          string
	inject, clear func(t testing.TB)
}

// soakFaults are the faults the soak cycles through: Redis killed (-9) and restarted empty, frozen
// (SIGSTOP) and thawed, replies slower than the command timeout, and the network half-open.
func soakFaults(srv *redistest.Server, proxy *redistest.Proxy) []soakFault {
	return []soakFault{
		{"kill -9, restart", srv.Kill, srv.Restart},
		{"freeze (SIGSTOP)", srv.Freeze, srv.Thaw},
		{"latency 400ms", func(testing.TB) { proxy.SetLatency(400 * time.Millisecond) }, func(testing.TB) { proxy.SetLatency(0) }},
		{"half-open", func(testing.TB) { proxy.SetHalfOpen(true) }, func(testing.TB) { proxy.SetHalfOpen(false) }},
	}
}

// vmRSS returns the resident set size of process pid, from /proc; "?" where there is no /proc.
func vmRSS(pid int) string {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return "?"
}

var goroutinesRE = regexp.MustCompile(`(?m)^go_goroutines (\d+)$`)

// goroutines returns the number of goroutines of p, from its /metrics.
func goroutines(t *testing.T, p *proc) int {
	t.Helper()
	n, err := metricsGoroutines(p.base)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// metricsGoroutines returns go_goroutines from the /metrics of the admit at base.
func metricsGoroutines(base string) (int, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	m := goroutinesRE.FindSubmatch(body)
	if m == nil {
		return 0, errors.New("/metrics has no go_goroutines")
	}
	return strconv.Atoi(string(m[1]))
}

// errOrNil formats err for a log line: empty when nil.
func errOrNil(err error) string {
	if err == nil {
		return ""
	}
	return "(" + err.Error() + ")"
}

// pause waits for d, and reports false if done is closed first.
func pause(done <-chan struct{}, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-done:
		return false
	case <-tm.C:
		return true
	}
}

// TestSoak (docs/failure-modes.md, "Soak") drives the real admit serve, on a real Redis behind the fault
// proxy, with loadgen at a constant arrival rate, and injects a fault every period: it checks that
// no request is admitted while Redis surely cannot answer (fail-closed), that every answer is 200,
// 429 or 503, that the process stays up and serves again by itself, and that its goroutines come
// back near their number before the load. It logs errors, p50/p99/p99.9, RSS and goroutines over
// time. ADMIT_SOAK=10m runs it for ten minutes with a fault a minute; without it, 24s with a fault
// every 6s.
func TestSoak(t *testing.T) {
	length, period, sample, rate := 24*time.Second, 6*time.Second, 2*time.Second, 200.0
	if v := os.Getenv(soakEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive Go duration", soakEnv, v)
		}
		length, period, sample = d, time.Minute, 10*time.Second
	}
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	config := filepath.Join(t.TempDir(), "admit.yaml")
	writeConfig(t, config, soakConfig)
	p := startAdmit(t, "--config", config, "--redis", proxy.URL())
	pid := p.cmd.Process.Pid

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	check := loadgen.HTTP(client, func(ctx context.Context) (*http.Request, error) {
		url := fmt.Sprintf("%s/v1/check?policy=soak&key=k%d", p.base, rand.IntN(soakKeys))
		return http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	})
	if o := check(t.Context()); o != "200" {
		t.Fatalf("the first check: %s; want 200", o)
	}
	baseline := goroutines(t, p)
	t.Logf("before the load: RSS %s, %d goroutines", vmRSS(pid), baseline)

	var down outage
	var admittedInOutage atomic.Int64
	do := func(ctx context.Context) string {
		span, on := down.mark()
		o := check(ctx)
		if span2, _ := down.mark(); on && span2 == span && o == "200" {
			admittedInOutage.Add(1)
		}
		return o
	}

	// The load runs in the background; the faults, which may fail t, on the test's goroutine.
	var res *loadgen.Result
	var runErr error
	done := make(chan struct{})
	runStart := time.Now()
	go func() {
		defer close(done)
		res, runErr = loadgen.Run(t.Context(), loadgen.Config{Rate: rate, Duration: length, Window: sample}, do)
	}()
	var samples []string
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for pause(done, sample) {
			n, err := metricsGoroutines(p.base)
			samples = append(samples, fmt.Sprintf("RSS %s, %d goroutines %v", vmRSS(pid), n, errOrNil(err)))
		}
	}()
	var faults []string
	all := soakFaults(srv, proxy)
	for i := 0; pause(done, period/3); i++ { // healthy for a third of a period, faulty for a third, healthy again
		f := all[i%len(all)]
		start := time.Now()
		f.inject(t)
		down.set(true)
		pause(done, period/3)
		down.set(false)
		f.clear(t)
		faults = append(faults, fmt.Sprintf("at %v: %s for %v", start.Sub(runStart).Round(time.Millisecond), f.name, time.Since(start).Round(time.Millisecond)))
		if !pause(done, period/3) {
			break
		}
	}
	<-done
	<-sampled
	if runErr != nil {
		t.Fatal(runErr)
	}

	t.Logf("soak: %v at %v/s, a fault every %v", length, rate, period)
	for _, f := range faults {
		t.Logf("fault: %s", f)
	}
	for i, w := range res.Windows {
		s := ""
		if i < len(samples) {
			s = samples[i] // sampled at the end of the window
		}
		t.Logf("%v; %s", &w, s)
	}
	t.Logf("total: %v", &res.Total)

	select {
	case <-p.exited:
		t.Fatalf("admit exited during the soak: %v", p.err)
	default:
	}
	if n := admittedInOutage.Load(); n > 0 {
		t.Errorf("%d request(s) admitted while Redis could not answer; fail-closed admits none", n)
	}
	for o, n := range res.Total.Outcomes {
		if o != "200" && o != "429" && o != "503" {
			t.Errorf("%d× %s; want only 200, 429 and 503", n, o)
		}
	}
	if res.Total.Outcomes["200"] == 0 || res.Total.Outcomes["503"] == 0 {
		t.Errorf("outcomes %v: want 200s while Redis is healthy and 503s during the faults", res.Total.Outcomes)
	}
	// Serving again by itself, and the goroutines of the load gone.
	eventually(t, "a decision after the soak", func() bool { o := check(t.Context()); return o == "200" || o == "429" })
	client.CloseIdleConnections()
	eventually(t, "goroutines back near the baseline", func() bool { return goroutines(t, p) <= baseline+5 })
	t.Logf("after the load: RSS %s, %d goroutines (%d before)", vmRSS(pid), goroutines(t, p), baseline)
}

// TestE2ESIGTERMUnderLoad sends SIGTERM to admit serve on Redis while loadgen
// drives /v1/check with a new connection per request: every request is answered 200, 429 or 503,
// or, once SIGTERM was sent, refused — or reset or closed (EOF) before any answer, for a connection
// still in the kernel's accept queue, or accepted but not yet read, when the server stopped: admit
// never read its request (a request being read or served is finished by Shutdown), so nothing was
// decided; none is cut off before SIGTERM; and admit exits 0, within its grace period (an exit after
// the grace period is not 0).
func TestE2ESIGTERMUnderLoad(t *testing.T) {
	srv := redistest.Start(t)
	config := filepath.Join(t.TempDir(), "admit.yaml")
	writeConfig(t, config, soakConfig)
	p := startAdmit(t, "--config", config, "--redis", srv.URL())
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	check := loadgen.HTTP(client, func(ctx context.Context) (*http.Request, error) {
		url := fmt.Sprintf("%s/v1/check?policy=soak&key=k%d", p.base, rand.IntN(soakKeys))
		return http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	})
	var termed atomic.Bool
	var refusedBefore atomic.Int64
	do := func(ctx context.Context) string {
		o := check(ctx)
		if (o == "error: connection refused" || o == "error: connection reset" || o == "error: EOF") && !termed.Load() {
			refusedBefore.Add(1)
		}
		return o
	}
	sent, exited := make(chan time.Time, 1), make(chan time.Time, 1)
	go func() {
		<-p.exited
		exited <- time.Now()
	}()
	time.AfterFunc(time.Second, func() {
		sent <- time.Now()
		termed.Store(true)
		p.cmd.Process.Signal(syscall.SIGTERM)
	})
	res, err := loadgen.Run(t.Context(), loadgen.Config{Rate: 300, Duration: 2 * time.Second}, do)
	if err != nil {
		t.Fatal(err)
	}
	code := p.wait(t)
	t.Logf("%v; exit %d, %v after SIGTERM", &res.Total, code, (<-exited).Sub(<-sent))
	if code != 0 {
		t.Errorf("exit code %d after SIGTERM under load, want 0", code)
	}
	for o, n := range res.Total.Outcomes {
		if o != "200" && o != "429" && o != "503" && o != "error: connection refused" && o != "error: connection reset" && o != "error: EOF" {
			t.Errorf("%d× %s; want only 200, 429, 503, or refused (or reset or EOF, never read) after SIGTERM", n, o)
		}
	}
	if n := refusedBefore.Load(); n > 0 {
		t.Errorf("%d request(s) refused, reset or cut off before SIGTERM", n)
	}
	if res.Total.Outcomes["200"] == 0 || res.Total.Outcomes["error: connection refused"] == 0 {
		t.Errorf("outcomes %v: want requests served before SIGTERM and refused after", res.Total.Outcomes)
	}
}
