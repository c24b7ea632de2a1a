package redistest_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/redistest"
	"github.com/redis/rueidis"
)

// proxyClient is a raw RESP connection through a proxy.
type proxyClient struct {
	conn net.Conn
	r    *bufio.Reader
}

func dialProxy(t *testing.T, p *redistest.Proxy) *proxyClient {
	t.Helper()
	conn, err := net.DialTimeout("tcp", p.Addr(), 2*time.Second)
	if err != nil {
		t.Fatalf("dial proxy: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return &proxyClient{conn: conn, r: bufio.NewReader(conn)}
}

// send writes one command in RESP, in one Write, and returns the first line of the reply.
func (c *proxyClient) send(timeout time.Duration, args ...string) (string, error) {
	var b strings.Builder
	b.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
	}
	if err := c.conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c.conn, b.String()); err != nil {
		return "", err
	}
	line, err := c.r.ReadString('\n')
	return strings.TrimSpace(line), err
}

// getDirect reads key from the server itself, not through the proxy; "" with ok false means nil.
func getDirect(t *testing.T, srv *redistest.Server, key string) (string, bool) {
	t.Helper()
	v, err := srv.Do(t, "GET", key).ToString()
	if rueidis.IsRedisNil(err) {
		return "", false
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v, true
}

func TestProxyRelays(t *testing.T) {
	srv := redistest.Start(t)
	p := redistest.NewProxy(t, srv.Addr())
	if want := "redis://" + p.Addr(); p.URL() != want {
		t.Fatalf("URL() = %q, want %q", p.URL(), want)
	}
	c := dialProxy(t, p)
	if got, err := c.send(2*time.Second, "SET", "k", "v"); got != "+OK" || err != nil {
		t.Fatalf("SET through the proxy = %q, %v", got, err)
	}
	if v, _ := getDirect(t, srv, "k"); v != "v" {
		t.Fatalf("GET k on the server = %q, want v", v)
	}
	// A rueidis client works through it too.
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{p.Addr()}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if v, err := rc.Do(t.Context(), rc.B().Get().Key("k").Build()).ToString(); v != "v" || err != nil {
		t.Fatalf("GET k through the proxy with rueidis = %q, %v", v, err)
	}
}

// The request runs, the reply never comes: the client sees its connection closed.
func TestProxyLoseNextReply(t *testing.T) {
	srv := redistest.Start(t)
	p := redistest.NewProxy(t, srv.Addr())
	c := dialProxy(t, p)
	if got, err := c.send(2*time.Second, "PING"); got != "+PONG" || err != nil {
		t.Fatalf("PING = %q, %v", got, err)
	}
	p.LoseNextReply()
	got, err := c.send(2*time.Second, "SET", "lost", "v")
	if got != "" || !errors.Is(err, io.EOF) {
		t.Fatalf("SET with its reply lost = %q, %v; want nothing and EOF", got, err)
	}
	if v, ok := getDirect(t, srv, "lost"); v != "v" || !ok {
		t.Fatalf("GET lost on the server = %q, %v; want v: the request should have run", v, ok)
	}
	// One-shot: a new connection works.
	c2 := dialProxy(t, p)
	if got, err := c2.send(2*time.Second, "SET", "after", "w"); got != "+OK" || err != nil {
		t.Fatalf("SET after the fault = %q, %v", got, err)
	}
}

// The request never reaches the server: the client's connection is reset.
func TestProxyDropNextRequest(t *testing.T) {
	srv := redistest.Start(t)
	p := redistest.NewProxy(t, srv.Addr())
	c := dialProxy(t, p)
	if got, err := c.send(2*time.Second, "PING"); got != "+PONG" || err != nil {
		t.Fatalf("PING = %q, %v", got, err)
	}
	p.DropNextRequest()
	got, err := c.send(2*time.Second, "SET", "dropped", "v")
	var ne net.Error
	if got != "" || err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("SET dropped = %q, %v; want the connection reset", got, err)
	}
	t.Logf("dropped request: %v", err)
	if v, ok := getDirect(t, srv, "dropped"); ok {
		t.Fatalf("GET dropped on the server = %q; the request should never have run", v)
	}
	c2 := dialProxy(t, p)
	if got, err := c2.send(2*time.Second, "SET", "after", "w"); got != "+OK" || err != nil {
		t.Fatalf("SET after the fault = %q, %v", got, err)
	}
}

func TestProxyLatency(t *testing.T) {
	srv := redistest.Start(t)
	p := redistest.NewProxy(t, srv.Addr())
	c := dialProxy(t, p)
	const d = 150 * time.Millisecond
	p.SetLatency(d)
	start := time.Now()
	if got, err := c.send(5*time.Second, "PING"); got != "+PONG" || err != nil {
		t.Fatalf("PING = %q, %v", got, err)
	}
	if elapsed := time.Since(start); elapsed < d {
		t.Fatalf("PING with %v latency answered in %v", d, elapsed)
	}
	// A client that gives up before the delay ends: the request ran all the same.
	if _, err := c.send(50*time.Millisecond, "SET", "late", "v"); err == nil {
		t.Fatal("SET answered within 50ms despite the latency")
	}
	if v, _ := getDirect(t, srv, "late"); v != "v" {
		t.Fatalf("GET late on the server = %q, want v", v)
	}
	p.SetLatency(0)
	c2 := dialProxy(t, p)
	start = time.Now()
	if got, err := c2.send(5*time.Second, "PING"); got != "+PONG" || err != nil {
		t.Fatalf("PING = %q, %v", got, err)
	}
	if elapsed := time.Since(start); elapsed >= d {
		t.Fatalf("PING with no latency took %v", elapsed)
	}
}

// Connections through a proxy are closed with it, at cleanup.
func TestProxyClosedAtCleanup(t *testing.T) {
	srv := redistest.Start(t)
	var c *proxyClient
	var addr string
	t.Run("proxy", func(t *testing.T) {
		p := redistest.NewProxy(t, srv.Addr())
		addr = p.Addr()
		conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c = &proxyClient{conn: conn, r: bufio.NewReader(conn)}
		if got, err := c.send(2*time.Second, "PING"); got != "+PONG" || err != nil {
			t.Fatalf("PING = %q, %v", got, err)
		}
	})
	defer c.conn.Close()
	if err := c.conn.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := c.r.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("read after the proxy's cleanup = %d, %v; want EOF", n, err)
	}
	if conn, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		conn.Close()
		t.Fatal("the proxy still accepts connections after its cleanup")
	}
}
