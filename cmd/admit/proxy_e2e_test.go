package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

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

// TestProxyCommandLine checks that admit proxy refuses to start without --upstream or --config.
func TestProxyCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"proxy", "--config", "x.yaml"}, "--upstream URL is required"},
		{[]string{"proxy", "--upstream", "ftp://x", "--config", "x.yaml"}, `--upstream "ftp://x": want an http:// or https:// URL`},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:3000"}, "--config FILE is required"},
	} {
		var stderr strings.Builder
		if code := run(t.Context(), tc.args, io.Discard, &stderr); code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("admit %q: exit %d, stderr %q; want exit 2 saying %q", tc.args, code, stderr.String(), tc.want)
		}
	}
	var stdout strings.Builder
	if code := run(t.Context(), []string{"help", "proxy"}, &stdout, io.Discard); code != exitOK ||
		!strings.Contains(stdout.String(), "admit proxy --upstream URL --config FILE") || !strings.Contains(stdout.String(), defaultProxyListen) {
		t.Errorf("admit help proxy: exit %d:\n%s", code, stdout.String())
	}
}
