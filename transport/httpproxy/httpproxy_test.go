package httpproxy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/internal/wstest"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/httpproxy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// testConfig is the configuration of most tests: a limited route of GETs under /api/, a route
// whose subject is a header, a concurrency route, and everything else unlimited.
const testConfig = `
server:
  trusted_proxies: [127.0.0.1/32]
  forwarded_header: x-forwarded-for
policies:
  - name: per-hour
    algorithm: fixed_window
    limit: 2
    window: 1h
  - name: per-user
    algorithm: fixed_window
    limit: 1
    window: 1h
  - name: shadow
    algorithm: fixed_window
    limit: 1
    window: 1h
    mode: shadow
  - name: in-flight
    algorithm: concurrency
    limit: 2
    lease_ttl: 1h
routes:
  - method: GET
    path_prefix: /api/
    policies: [per-hour, shadow]
  - path_prefix: /user/
    policies: [per-user]
    subject:
      from: header
      header: X-User-Id
  - path_prefix: /slow/
    policies: [in-flight]
    subject:
      from: constant
`

// upstream is a test app that counts the requests it is sent.
type upstream struct {
	*httptest.Server
	hits atomic.Int64
	last atomic.Pointer[http.Request] // the last request it was sent
}

// newUpstream starts an upstream that counts each request and then calls h.
func newUpstream(t *testing.T, h http.HandlerFunc) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		u.last.Store(r)
		h(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

// ok answers "ok".
func ok(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }

// newProxy serves a Proxy to target under the configuration src, on a memstore, and returns its
// base URL.
func newProxy(t *testing.T, src, target string) string {
	t.Helper()
	mem := memstore.New(memstore.Options{})
	t.Cleanup(func() { mem.Close() })
	return serveProxy(t, mem, src, target)
}

// serveProxy serves a Proxy to target under the configuration src, on store, and returns its base
// URL.
func serveProxy(t *testing.T, store admit.Store, src, target string) string {
	t.Helper()
	cfg, err := policy.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := admit.NewKeyBuilder([]byte("httpproxy test secret, 32 bytes"))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(store, keys, cfg)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p, err := httpproxy.New(httpproxy.Options{Upstream: u, Service: svc, LogInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	t.Cleanup(front.Close)
	return front.URL
}

// result is what the tests read of an answer.
type result struct {
	status int
	header http.Header
	body   string
}

// do sends a request of method to url with client c (nil: a default one) and the header fields
// hdr ("Name: value" each), and returns the answer.
func do(t *testing.T, c *http.Client, method, url string, hdr ...string) result {
	t.Helper()
	if c == nil {
		c = http.DefaultClient
	}
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hdr {
		name, value, _ := strings.Cut(h, ": ")
		req.Header.Add(name, value)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return result{resp.StatusCode, resp.Header, string(body)}
}

// peer returns a client that connects from the loopback address addr, such as 127.0.0.2, or skips
// the test where that cannot be bound.
func peer(t *testing.T, addr string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}, Timeout: 5 * time.Second}
	if c, err := d.Dial("tcp", "127.0.0.1:1"); err != nil && strings.Contains(err.Error(), "assign requested address") {
		t.Skipf("cannot bind to %s on this machine: %v", addr, err)
	} else if err == nil {
		c.Close()
	}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// TestRouteLimited checks a route's limit end to end: admitted requests reach the upstream with
// the RateLimit fields on their response; the rejected one is answered 429 with its headers and
// never reaches it; a shadow policy lets through and is not in the fields.
func TestRouteLimited(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("RateLimit", `"upstream's own";r=1`) // replaced by the proxy's
		ok(w, r)
	})
	base := newProxy(t, testConfig, up.URL)
	for i := range 2 {
		r := do(t, nil, "GET", base+"/api/x")
		if r.status != 200 || r.body != "ok\n" {
			t.Fatalf("request %d: %d %q; want 200 from the upstream", i, r.status, r.body)
		}
		if got, want := r.header.Get("RateLimit-Policy"), `"per-hour";q=2;w=3600`; got != want {
			t.Errorf("request %d: RateLimit-Policy %q; want %q (no shadow policy)", i, got, want)
		}
		if got, want := r.header.Values("RateLimit"), []string{fmt.Sprintf(`"per-hour";r=%d;t=3600`, 1-i)}; strings.Join(got, "|") != want[0] {
			t.Errorf("request %d: RateLimit %q; want %q", i, got, want)
		}
	}
	r := do(t, nil, "GET", base+"/api/x")
	if r.status != 429 || r.body != "rate limit exceeded\n" || r.header.Get("Retry-After") == "" ||
		r.header.Get("Cache-Control") != "no-store" || !strings.HasPrefix(r.header.Get("RateLimit"), `"per-hour";r=0;t=`) {
		t.Errorf("third request: %d %q %v; want 429 with Retry-After, no-store and RateLimit", r.status, r.body, r.header)
	}
	if n := up.hits.Load(); n != 2 {
		t.Errorf("the upstream saw %d requests; want 2: a rejected request is never forwarded", n)
	}
	// A POST matches no route: unlimited, and without RateLimit fields of the proxy.
	for i := range 5 {
		if r := do(t, nil, "POST", base+"/api/x"); r.status != 200 || r.header.Get("RateLimit-Policy") != "" {
			t.Fatalf("unrouted request %d: %d %v; want 200 without RateLimit-Policy", i, r.status, r.header)
		}
	}
	if n := up.hits.Load(); n != 7 {
		t.Errorf("the upstream saw %d requests; want 7", n)
	}
}

// TestRateLimitHeadersOff checks that ratelimit_headers: false leaves the fields out.
func TestRateLimitHeadersOff(t *testing.T) {
	up := newUpstream(t, ok)
	base := newProxy(t, strings.Replace(testConfig, "server:\n", "server:\n  ratelimit_headers: false\n", 1), up.URL)
	for _, want := range []int{200, 200, 429} {
		r := do(t, nil, "GET", base+"/api/")
		if r.status != want || r.header.Get("RateLimit-Policy") != "" || r.header.Get("RateLimit") != "" {
			t.Errorf("%d %v; want %d without RateLimit fields", r.status, r.header, want)
		}
	}
}

// TestSubjectHeaderOnlyFromTrustedPeer checks that a route's subject header is read from a
// trusted peer (127.0.0.1) only: another peer (127.0.0.2) is answered 400 and never forwarded.
func TestSubjectHeaderOnlyFromTrustedPeer(t *testing.T) {
	up := newUpstream(t, ok)
	base := newProxy(t, testConfig, up.URL)
	trusted, other := peer(t, "127.0.0.1"), peer(t, "127.0.0.2")
	for _, tc := range []struct {
		c      *http.Client
		user   string
		status int
	}{
		{trusted, "alice", 200},
		{trusted, "alice", 429},
		{trusted, "bob", 200},
		{other, "carol", 400}, // carol is fresh: only the peer's trust refuses her
		{other, "", 400},
		{trusted, "", 400}, // a trusted peer must name the subject
		{trusted, "carol", 200},
	} {
		var hdr []string
		if tc.user != "" {
			hdr = append(hdr, "X-User-Id: "+tc.user)
		}
		if r := do(t, tc.c, "GET", base+"/user/profile", hdr...); r.status != tc.status {
			t.Errorf("user %q: %d %q; want %d", tc.user, r.status, r.body, tc.status)
		}
	}
	if n := up.hits.Load(); n != 3 {
		t.Errorf("the upstream saw %d requests; want 3", n)
	}
}

// TestXForwardedFor checks the X-Forwarded-For the upstream sees: the peer's own header is kept
// and appended to only when the peer is trusted; a malformed one from a trusted peer is 400.
func TestXForwardedFor(t *testing.T) {
	up := newUpstream(t, ok)
	base := newProxy(t, testConfig, up.URL)
	trusted, other := peer(t, "127.0.0.1"), peer(t, "127.0.0.2")
	for _, tc := range []struct {
		c    *http.Client
		want string
	}{
		{trusted, "203.0.113.7, 127.0.0.1"},
		{other, "127.0.0.2"},
	} {
		if r := do(t, tc.c, "GET", base+"/open", "X-Forwarded-For: 203.0.113.7", "Forwarded: for=198.51.100.1"); r.status != 200 {
			t.Fatalf("%d; want 200", r.status)
		}
		last := up.last.Load()
		if got := strings.Join(last.Header.Values("X-Forwarded-For"), ", "); got != tc.want {
			t.Errorf("X-Forwarded-For at the upstream %q; want %q", got, tc.want)
		}
		if f := last.Header.Get("Forwarded"); f != "" {
			t.Errorf("Forwarded at the upstream %q; want none (forwarded_header is x-forwarded-for)", f)
		}
	}
	// The client_ip route of a trusted peer reads its X-Forwarded-For: a garbled one is malformed.
	if r := do(t, trusted, "GET", base+"/api/", "X-Forwarded-For: not-an-address"); r.status != 400 || r.body != "bad request\n" {
		t.Errorf("garbled X-Forwarded-For: %d %q; want 400", r.status, r.body)
	}
	// The client is 203.0.113.7, not the peer: two requests each for two clients.
	for _, client := range []string{"203.0.113.7", "203.0.113.8"} {
		for _, want := range []int{200, 200, 429} {
			if r := do(t, trusted, "GET", base+"/api/", "X-Forwarded-For: "+client); r.status != want {
				t.Errorf("client %s: %d; want %d", client, r.status, want)
			}
		}
	}
}

// TestStreaming checks that a streamed response reaches the client as it is written: the upstream
// writes a first chunk, flushes, and writes the rest only once the client has read the first.
func TestStreaming(t *testing.T) {
	read := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-read:
			io.WriteString(w, "second\n")
		case <-time.After(30 * time.Second): // a hang guard: the test fails, it does not hang
			io.WriteString(w, "the first chunk never reached the client\n")
		}
	})
	base := newProxy(t, testConfig, up.URL)
	for _, path := range []string{"/api/stream", "/open/stream"} { // a limited route and an unlimited one
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		first, err := br.ReadString('\n')
		if err != nil || first != "first\n" {
			t.Fatalf("%s: first chunk %q, %v", path, first, err)
		}
		read <- struct{}{}
		rest, err := io.ReadAll(br)
		resp.Body.Close()
		if err != nil || string(rest) != "second\n" {
			t.Errorf("%s: rest %q, %v; want second", path, rest, err)
		}
	}
}

// TestWebSocket checks that an Upgrade: websocket handshake passes through the proxy, with the
// RateLimit fields on the 101, and that bytes then flow both ways.
func TestWebSocket(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "want an upgrade", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		io.Copy(conn, brw) // echo
	})
	base := newProxy(t, testConfig, up.URL)
	conn, br, resp := wstest.Dial(t, base, "/api/socket")
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("RateLimit") == "" {
		t.Fatalf("handshake: %d %v; want 101 with RateLimit", resp.StatusCode, resp.Header)
	}
	for _, msg := range []string{"hello", "world"} {
		if _, err := io.WriteString(conn, msg); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(br, buf); err != nil || string(buf) != msg {
			t.Fatalf("echo %q, %v; want %q", buf, err, msg)
		}
	}
}

// TestBadGateway checks that an upstream nobody listens on is answered 502, and that the leases of
// a concurrency route are released after it.
func TestBadGateway(t *testing.T) {
	closed := "http://" + redistest.ClosedPort(t) // held closed: no listener of this test can get it
	base := newProxy(t, testConfig, closed)
	for i := range 4 { // more than in-flight's 2: each lease ends with its 502
		if r := do(t, nil, "GET", base+"/slow/"); r.status != 502 || r.body != "bad gateway\n" {
			t.Errorf("request %d: %d %q; want 502", i, r.status, r.body)
		}
	}
	if r := do(t, nil, "GET", base+"/open"); r.status != 502 {
		t.Errorf("unrouted: %d; want 502", r.status)
	}
}

// TestConcurrencyRoute checks that a concurrency route never has more than its limit in flight at
// the upstream, rejects the others, and releases the leases when the responses are written.
func TestConcurrencyRoute(t *testing.T) {
	var inFlight, most atomic.Int64
	unblock := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-unblock
		ok(w, r)
	})
	base := newProxy(t, testConfig, up.URL)
	const n = 6
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := http.Get(base + "/slow/")
			if err != nil {
				statuses <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses <- resp.StatusCode
		})
	}
	// Two are admitted and wait at the upstream until unblocked; the other four are rejected.
	for range n - 2 {
		if s := <-statuses; s != 429 {
			t.Errorf("status %d while 2 are in flight; want 429", s)
		}
	}
	close(unblock)
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != 200 {
			t.Errorf("an admitted request: %d; want 200", s)
		}
	}
	if m := most.Load(); m > 2 {
		t.Errorf("%d requests in flight at the upstream; want at most 2", m)
	}
	// The responses are written: their leases are released, so two more fit.
	for i := range 2 {
		if r := do(t, nil, "GET", base+"/slow/"); r.status != 200 {
			t.Errorf("after the releases, request %d: %d; want 200", i, r.status)
		}
	}
	if h := up.hits.Load(); h != 4 {
		t.Errorf("the upstream saw %d requests; want 4", h)
	}
}

// TestUnavailable checks that a backend that cannot decide is answered 503 with Retry-After, and
// the request is not forwarded (fail closed), while unrouted requests still are.
func TestUnavailable(t *testing.T) {
	addr := redistest.ClosedPort(t) // nobody listens: the store cannot decide
	store, err := redisstore.New(redisstore.Config{URL: "redis://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	up := newUpstream(t, ok)
	base := serveProxy(t, store, testConfig, up.URL)
	r := do(t, nil, "GET", base+"/api/")
	if r.status != 503 || r.body != "limiter unavailable\n" || r.header.Get("Retry-After") != "1" {
		t.Errorf("%d %q %v; want 503 with Retry-After: 1", r.status, r.body, r.header)
	}
	if r := do(t, nil, "GET", base+"/open"); r.status != 200 {
		t.Errorf("unrouted: %d; want 200", r.status)
	}
	if h := up.hits.Load(); h != 1 {
		t.Errorf("the upstream saw %d requests; want 1 (the unrouted one)", h)
	}
}

// TestNewRejects checks New's errors.
func TestNewRejects(t *testing.T) {
	if _, err := httpproxy.New(httpproxy.Options{}); err == nil {
		t.Error("New without Upstream and Service: no error")
	}
}

// decidingConfig has a route of a loose and a tight policy, and a route whose first policy is a
// shadow one that rejects from its second request on.
const decidingConfig = `
policies:
  - name: loose
    algorithm: fixed_window
    limit: 100
    window: 1h
  - name: tight
    algorithm: fixed_window
    limit: 1
    window: 1h
  - name: trial
    algorithm: fixed_window
    limit: 1
    window: 1h
    mode: shadow
  - name: enforced
    algorithm: fixed_window
    limit: 100
    window: 1h
routes:
  - path_prefix: /pair/
    policies: [loose, tight]
  - path_prefix: /trial/
    policies: [trial, enforced]
`

// TestRouteDecidedByEveryPolicy checks that a route's answer is the answer of all its policies
// together, never its first policy's: under [loose, tight], once tight is spent, a request is
// answered 429 with tight's Retry-After and reaches no upstream though loose would admit it;
// under [trial (shadow), enforced], a request that the shadow policy rejects is forwarded.
func TestRouteDecidedByEveryPolicy(t *testing.T) {
	up := newUpstream(t, ok)
	base := newProxy(t, decidingConfig, up.URL)
	if r := do(t, nil, "GET", base+"/pair/x"); r.status != 200 {
		t.Fatalf("first request of [loose, tight]: %d %q; want 200", r.status, r.body)
	}
	for i := range 3 {
		r := do(t, nil, "GET", base+"/pair/x")
		if r.status != 429 || r.body != "rate limit exceeded\n" || r.header.Get("Retry-After") == "" {
			t.Errorf("request %d of [loose, tight] with tight spent: %d %q; want 429", i+2, r.status, r.body)
		}
		if got := strings.Join(r.header.Values("RateLimit"), ", "); got != `"loose";r=99;t=3600, "tight";r=0;t=3600` {
			t.Errorf("request %d of [loose, tight]: RateLimit %q; want loose's r=99 (nothing consumed) and tight's r=0", i+2, got)
		}
	}
	if n := up.hits.Load(); n != 1 {
		t.Errorf("the upstream saw %d requests of [loose, tight]; want 1: tight rejects the others", n)
	}
	for i := range 3 {
		r := do(t, nil, "GET", base+"/trial/x")
		if r.status != 200 || r.body != "ok\n" {
			t.Errorf("request %d of [trial (shadow), enforced]: %d %q; want 200: a shadow policy never rejects", i+1, r.status, r.body)
		}
		if got, want := r.header.Get("RateLimit-Policy"), `"enforced";q=100;w=3600`; got != want {
			t.Errorf("request %d of [trial (shadow), enforced]: RateLimit-Policy %q; want %q", i+1, got, want)
		}
	}
	if n := up.hits.Load(); n != 4 {
		t.Errorf("the upstream saw %d requests; want 4: every request of [trial, enforced] is forwarded", n)
	}
}

// TestOps checks the handler of the proxy's own endpoints: /healthz always, /readyz by Ready,
// /metrics only when given, 405 for other methods and 404 for any other path.
func TestOps(t *testing.T) {
	var notReady atomic.Bool
	h := httpproxy.NewOps(httpproxy.OpsOptions{
		Ready: func(context.Context) error {
			if notReady.Load() {
				return errors.New("backend down")
			}
			return nil
		},
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metrics\n") }),
		Version: "v1.2.0",
	})
	ops := httptest.NewServer(h)
	t.Cleanup(ops.Close)
	for _, tc := range []struct {
		method, path string
		down         bool
		status       int
		body         string
	}{
		{"GET", "/healthz", false, 200, "ok v1.2.0\n"},
		{"HEAD", "/healthz", false, 200, ""},
		{"GET", "/readyz", false, 200, "ok\n"},
		{"GET", "/metrics", false, 200, "metrics\n"},
		{"GET", "/readyz", true, 503, "not ready\n"},
		{"GET", "/healthz", true, 200, "ok v1.2.0\n"},
		{"POST", "/healthz", false, 405, ""},
		{"GET", "/api/x", false, 404, ""},
	} {
		notReady.Store(tc.down)
		r := do(t, nil, tc.method, ops.URL+tc.path)
		if r.status != tc.status || tc.body != "" && r.body != tc.body {
			t.Errorf("%s %s (backend down: %v): %d %q; want %d %q", tc.method, tc.path, tc.down, r.status, r.body, tc.status, tc.body)
		}
	}
	bare := httptest.NewServer(httpproxy.NewOps(httpproxy.OpsOptions{}))
	t.Cleanup(bare.Close)
	if r := do(t, nil, "GET", bare.URL+"/metrics"); r.status != 404 {
		t.Errorf("/metrics without Metrics: %d; want 404", r.status)
	}
	if r := do(t, nil, "GET", bare.URL+"/readyz"); r.status != 200 {
		t.Errorf("/readyz without Ready: %d; want 200", r.status)
	}
	if r := do(t, nil, "GET", bare.URL+"/healthz"); r.status != 200 || r.body != "ok\n" {
		t.Errorf("/healthz without Version: %d %q; want 200 %q", r.status, r.body, "ok\n")
	}
	defer func() {
		if recover() == nil {
			t.Error(`NewOps accepted the Version "v1 2"`)
		}
	}()
	httpproxy.NewOps(httpproxy.OpsOptions{Version: "v1 2"})
}

// TestMetrics checks admit_proxy_requests_total, by answer, and admit_proxy_upstream_errors_total.
func TestMetrics(t *testing.T) {
	up := newUpstream(t, ok)
	cfg, err := policy.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	mem := memstore.New(memstore.Options{})
	t.Cleanup(func() { mem.Close() })
	keys, err := admit.NewKeyBuilder([]byte("httpproxy test secret, 32 bytes"))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(mem, keys, cfg)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	proxyTo := func(target string) string {
		u, err := url.Parse(target)
		if err != nil {
			t.Fatal(err)
		}
		p, err := httpproxy.New(httpproxy.Options{Upstream: u, Service: svc, LogInterval: -1, Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
		front := httptest.NewServer(p)
		t.Cleanup(front.Close)
		return front.URL
	}
	base := proxyTo(up.URL)
	for _, want := range []int{200, 200, 429} {
		if r := do(t, nil, "GET", base+"/api/x"); r.status != want {
			t.Fatalf("/api/x: %d; want %d", r.status, want)
		}
	}
	if r := do(t, nil, "GET", base+"/open"); r.status != 200 {
		t.Fatalf("/open: %d; want 200", r.status)
	}
	if r := rawGet(t, base, "GET", "//api/x"); r.status != 308 {
		t.Fatalf("GET //api/x: %d; want 308", r.status)
	}
	for _, target := range []string{"//api/x", "/api%2fx"} {
		if r := rawGet(t, base, "POST", target); r.status != 400 {
			t.Fatalf("POST %s: %d; want 400", target, r.status)
		}
	}
	if r := do(t, nil, "GET", base+"/user/x"); r.status != 400 { // no subject header
		t.Fatalf("/user/x without X-User-Id: %d; want 400", r.status)
	}
	if _, err := httpproxy.New(httpproxy.Options{Upstream: &url.URL{Scheme: "http", Host: "x"}, Service: svc, Registerer: reg}); err == nil {
		t.Error("a second Proxy on one Registerer: no error")
	}
	want := `
# HELP admit_proxy_requests_total Requests answered by admit proxy, by answer (forwarded, unrouted, limited, redirected, non_canonical, malformed, invalid, unavailable).
# TYPE admit_proxy_requests_total counter
admit_proxy_requests_total{answer="forwarded"} 2
admit_proxy_requests_total{answer="invalid"} 0
admit_proxy_requests_total{answer="limited"} 1
admit_proxy_requests_total{answer="malformed"} 1
admit_proxy_requests_total{answer="non_canonical"} 2
admit_proxy_requests_total{answer="redirected"} 1
admit_proxy_requests_total{answer="unavailable"} 0
admit_proxy_requests_total{answer="unrouted"} 1
# HELP admit_proxy_upstream_errors_total Forwarded requests that the upstream did not answer, answered 502 Bad Gateway.
# TYPE admit_proxy_upstream_errors_total counter
admit_proxy_upstream_errors_total 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// TestMetricsBadGateway checks that a request the upstream does not answer counts in
// admit_proxy_upstream_errors_total.
func TestMetricsBadGateway(t *testing.T) {
	closed := &url.URL{Scheme: "http", Host: redistest.ClosedPort(t)}
	cfg, err := policy.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	mem := memstore.New(memstore.Options{})
	t.Cleanup(func() { mem.Close() })
	keys, err := admit.NewKeyBuilder([]byte("httpproxy test secret, 32 bytes"))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(mem, keys, cfg)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	p, err := httpproxy.New(httpproxy.Options{Upstream: closed, Service: svc, LogInterval: -1, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	t.Cleanup(front.Close)
	for _, path := range []string{"/api/x", "/open"} {
		if r := do(t, nil, "GET", front.URL+path); r.status != 502 {
			t.Fatalf("%s: %d; want 502", path, r.status)
		}
	}
	want := `
# HELP admit_proxy_upstream_errors_total Forwarded requests that the upstream did not answer, answered 502 Bad Gateway.
# TYPE admit_proxy_upstream_errors_total counter
admit_proxy_upstream_errors_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "admit_proxy_upstream_errors_total"); err != nil {
		t.Error(err)
	}
}
