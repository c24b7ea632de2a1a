package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/internal/wstest"
)

// proxyConfig is the configuration of the proxy's end-to-end test: GETs under /api/ are limited
// to 2 an hour per client; everything else is unlimited.
const proxyConfig = `
policies:
  - name: api
    algorithm: fixed_window
    limit: 2
    window: 1h
routes:
  - method: GET
    path_prefix: /api/
    policies: [api]
`

// TestE2EProxy starts the real admit proxy in front of a test upstream and checks a route's limit
// end to end, with headers; that a rejected request never reaches the upstream; that a streamed
// response and a WebSocket pass through; and that SIGTERM stops it cleanly.
func TestE2EProxy(t *testing.T) {
	var hits atomic.Int64
	read := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch {
		case r.Header.Get("Upgrade") == "websocket":
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
			brw.Flush()
			io.Copy(conn, brw) // echo
		case r.URL.Path == "/stream":
			io.WriteString(w, "first\n")
			w.(http.Flusher).Flush()
			select {
			case <-read:
				io.WriteString(w, "second\n")
			case <-time.After(30 * time.Second): // a hang guard
				io.WriteString(w, "the first chunk never reached the client\n")
			}
		default:
			io.WriteString(w, "upstream "+r.URL.Path+"\n")
		}
	}))
	defer upstream.Close()
	config := filepath.Join(t.TempDir(), "proxy.yaml")
	writeConfig(t, config, proxyConfig)
	p := startCommand(t, admitEnv(secretEnv+"="+testSecret), "proxy", "--upstream", upstream.URL, "--config", config)

	for i := range 2 {
		r := get(t, p.base+"/api/items")
		if r.status != 200 || r.body != "upstream /api/items\n" {
			t.Fatalf("request %d: %d %q; want 200 from the upstream", i, r.status, r.body)
		}
		if got, want := r.header.Get("RateLimit-Policy"), `"api";q=2;w=3600`; got != want {
			t.Errorf("request %d: RateLimit-Policy %q; want %q", i, got, want)
		}
		if got, want := r.header.Get("RateLimit"), fmt.Sprintf(`"api";r=%d;t=3600`, 1-i); got != want {
			t.Errorf("request %d: RateLimit %q; want %q", i, got, want)
		}
	}
	r := get(t, p.base+"/api/items")
	if r.status != 429 || r.body != "rate limit exceeded\n" || r.header.Get("Retry-After") == "" ||
		r.header.Get("Cache-Control") != "no-store" || !strings.HasPrefix(r.header.Get("RateLimit"), `"api";r=0;t=`) {
		t.Errorf("third request: %d %q %v; want 429 with Retry-After, no-store and RateLimit", r.status, r.body, r.header)
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("the upstream saw %d requests; want 2: the rejected one is never forwarded", n)
	}
	if r := get(t, p.base+"/elsewhere"); r.status != 200 || r.header.Get("RateLimit") != "" {
		t.Errorf("an unrouted request: %d %v; want 200 without RateLimit", r.status, r.header)
	}
	if strings.Contains(p.logs.String(), "listening for metrics") {
		t.Errorf("without --metrics-listen the proxy listens for metrics; want no such listener by default")
	}

	// A streamed response: the upstream writes its second chunk only once the first has arrived.
	resp, err := http.Get(p.base + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if first, err := br.ReadString('\n'); err != nil || first != "first\n" {
		t.Fatalf("stream: first chunk %q, %v", first, err)
	}
	read <- struct{}{}
	rest, err := io.ReadAll(br)
	resp.Body.Close()
	if err != nil || string(rest) != "second\n" {
		t.Errorf("stream: rest %q, %v; want second", rest, err)
	}

	// A WebSocket (on no route: /api/ is spent): the handshake passes, then bytes flow both ways.
	conn, cr, hs := wstest.Dial(t, p.base, "/socket")
	if hs.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v; want 101", hs)
	}
	io.WriteString(conn, "ping")
	buf := make([]byte, 4)
	if _, err := io.ReadFull(cr, buf); err != nil || string(buf) != "ping" {
		t.Errorf("echo %q, %v; want ping", buf, err)
	}
	conn.Close()

	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t); code != 0 {
		t.Errorf("exit %d after SIGTERM; want 0", code)
	}
}

// TestProxyCommandLine checks that admit proxy refuses to start without --upstream or --config,
// or with --metrics-listen on --listen's address.
func TestProxyCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"proxy", "--config", "x.yaml"}, "--upstream URL is required"},
		{[]string{"proxy", "--upstream", "ftp://x", "--config", "x.yaml"}, `--upstream "ftp://x": want an http:// or https:// URL`},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:3000"}, "--config FILE is required"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:3000", "--config", "x.yaml", "--metrics-listen", defaultProxyListen}, "--metrics-listen " + defaultProxyListen + " is --listen's"},
	} {
		var stderr strings.Builder
		if code := run(t.Context(), tc.args, io.Discard, &stderr); code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("admit %q: exit %d, stderr %q; want exit 2 saying %q", tc.args, code, stderr.String(), tc.want)
		}
	}
	var stdout strings.Builder
	if code := run(t.Context(), []string{"help", "proxy"}, &stdout, io.Discard); code != exitOK ||
		!strings.Contains(stdout.String(), "admit proxy --upstream URL --config FILE") || !strings.Contains(stdout.String(), defaultProxyListen) ||
		!strings.Contains(stdout.String(), "-metrics-listen address") {
		t.Errorf("admit help proxy: exit %d:\n%s", code, stdout.String())
	}
}

// metricsListeningRE finds the address of admit proxy's --metrics-listen in its log.
var metricsListeningRE = regexp.MustCompile(`msg="listening for metrics" addr=(\S+)`)

// startProxyWithMetrics starts admit proxy of proxyConfig in front of upstream, on redis, with
// --metrics-listen on a free port, and returns it and the base URL of its metrics listener.
func startProxyWithMetrics(t *testing.T, upstream string, redis *redistest.Server) (p *proc, ops string) {
	t.Helper()
	config := filepath.Join(t.TempDir(), "proxy.yaml")
	writeConfig(t, config, proxyConfig)
	p = startCommand(t, admitEnv(secretEnv+"="+testSecret), "proxy", "--upstream", upstream, "--config", config,
		"--redis", redis.URL(), "--metrics-listen", "127.0.0.1:0")
	p.logs.waitLine(t, "listening for metrics")
	m := metricsListeningRE.FindStringSubmatch(p.logs.String())
	if m == nil {
		t.Fatalf("no metrics address in admit proxy's log:\n%s", p.logs)
	}
	return p, "http://" + m[1]
}

// TestE2EProxyMetricsListen starts admit proxy on Redis with --metrics-listen and checks that
// /healthz, /readyz and /metrics are served there, with the proxy's answers and decisions, the
// breaker and the cache in the metrics; that /readyz answers 503 while Redis is down, and
// /healthz still 200; that the proxied port never answers those paths itself, but forwards them
// to the upstream as any path; and that the metrics listener forwards nothing.
func TestE2EProxyMetricsListen(t *testing.T) {
	var hits atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "upstream "+r.URL.Path+"\n")
	}))
	defer upstream.Close()
	redis := redistest.Start(t)
	p, ops := startProxyWithMetrics(t, upstream.URL, redis)
	if ops == p.base {
		t.Fatalf("the metrics listener is the proxied one, %s", ops)
	}

	// The proxied port forwards the endpoints' paths to the upstream, as any path.
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if r := get(t, p.base+path); r.status != 200 || r.body != "upstream "+path+"\n" {
			t.Errorf("%s on the proxied port: %d %q; want the upstream's answer", path, r.status, r.body)
		}
	}
	if n := hits.Load(); n != 3 {
		t.Errorf("the upstream saw %d requests; want 3", n)
	}
	for _, want := range []int{200, 200, 429} {
		if r := get(t, p.base+"/api/items"); r.status != want {
			t.Errorf("/api/items: %d; want %d", r.status, want)
		}
	}

	// The metrics listener serves the endpoints, and forwards nothing.
	for path, want := range map[string]string{"/healthz": "ok " + binaryVersion(t) + "\n", "/readyz": "ok\n"} {
		if r := get(t, ops+path); r.status != 200 || r.body != want {
			t.Errorf("%s: %d %q; want 200 %q", path, r.status, r.body, want)
		}
	}
	r := get(t, ops+"/metrics")
	if r.status != 200 {
		t.Fatalf("/metrics: %d %q; want 200", r.status, r.body)
	}
	for _, want := range []string{
		`admit_decisions_total{policy="api",result="allowed"} 2`,
		`admit_decisions_total{policy="api",result="limited"} 1`,
		`admit_proxy_requests_total{answer="forwarded"} 2`,
		`admit_proxy_requests_total{answer="limited"} 1`,
		`admit_proxy_requests_total{answer="unrouted"} 3`,
		`admit_breaker_state{breaker="redis"`,
		"admit_overlimit_cache_entries",
		"admit_config_info",
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if r := get(t, ops+"/api/items"); r.status != 404 {
		t.Errorf("/api/items on the metrics listener: %d %q; want 404", r.status, r.body)
	}
	if n := hits.Load(); n != 5 {
		t.Errorf("the upstream saw %d requests; want 5: the metrics listener forwards nothing", n)
	}

	// Redis down: not ready, yet alive.
	redis.Stop(t)
	if r := get(t, ops+"/readyz"); r.status != 503 || r.body != "not ready\n" {
		t.Errorf("/readyz with Redis down: %d %q; want 503 not ready", r.status, r.body)
	}
	if r := get(t, ops+"/healthz"); r.status != 200 {
		t.Errorf("/healthz with Redis down: %d; want 200", r.status)
	}

	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t); code != 0 {
		t.Errorf("exit %d after SIGTERM; want 0", code)
	}
}
