package redistest_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
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
	if want := "redis://admit:s3cret@" + p.Addr(); p.URL() != want {
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

// The request runs, then the client's connection is reset rather than answered.
func TestProxyResetAfterNextRequest(t *testing.T) {
	srv := redistest.Start(t)
	p := redistest.NewProxy(t, srv.Addr())
	c := dialProxy(t, p)
	if got, err := c.send(2*time.Second, "PING"); got != "+PONG" || err != nil {
		t.Fatalf("PING = %q, %v", got, err)
	}
	p.ResetAfterNextRequest()
	got, err := c.send(2*time.Second, "SET", "reset", "v")
	if got != "" || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("SET reset after forwarding = %q, %v; want nothing and a connection reset", got, err)
	}
	if v, ok := getDirect(t, srv, "reset"); v != "v" || !ok {
		t.Fatalf("GET reset on the server = %q, %v; want v: the request should have run", v, ok)
	}
	c2 := dialProxy(t, p)
	if got, err := c2.send(2*time.Second, "SET", "after", "w"); got != "+OK" || err != nil {
		t.Fatalf("SET after the fault = %q, %v", got, err)
	}
}

// The request runs; the client reads part of the reply, then EOF.
func TestProxyTruncateNextReply(t *testing.T) {
	srv := redistest.Start(t)
	p := redistest.NewProxy(t, srv.Addr())
	srv.Do(t, "SET", "greeting", "hello, world")
	c := dialProxy(t, p)
	p.TruncateNextReply()
	if _, err := io.WriteString(c.conn, "*2\r\n$4\r\nINCR\r\n$7\r\ncounter\r\n"); err != nil {
		t.Fatal(err)
	}
	c.conn.SetDeadline(time.Now().Add(2 * time.Second))
	got, err := io.ReadAll(c.r)
	if err != nil || len(got) == 0 || !strings.HasPrefix(":1\r\n", string(got)) || string(got) == ":1\r\n" {
		t.Fatalf("INCR with its reply truncated read %q, %v; want a proper prefix of \":1\\r\\n\", then EOF", got, err)
	}
	if v, _ := getDirect(t, srv, "counter"); v != "1" {
		t.Fatalf("counter on the server = %q, want 1: the request should have run once", v)
	}
	// One-shot: a new connection reads whole replies.
	c2 := dialProxy(t, p)
	if got, err := c2.send(2*time.Second, "GET", "greeting"); got != "$12" || err != nil {
		t.Fatalf("GET after the fault = %q, %v", got, err)
	}
	if rest, err := c2.r.ReadString('\n'); rest != "hello, world\r\n" || err != nil {
		t.Fatalf("GET's value after the fault = %q, %v", rest, err)
	}
}

// Replies arrive in one-byte writes, and intact.
func TestProxySlice(t *testing.T) {
	srv := redistest.Start(t)
	p := redistest.NewProxy(t, srv.Addr())
	value := strings.Repeat("0123456789abcdef", 4<<10) // 64 KiB: 64Ki one-byte writes
	srv.Do(t, "SET", "big", value)
	p.SetSlice(1)
	c := dialProxy(t, p)
	if _, err := io.WriteString(c.conn, "*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n"); err != nil {
		t.Fatal(err)
	}
	want := "$" + strconv.Itoa(len(value)) + "\r\n" + value + "\r\n"
	c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, len(want))
	first, err := c.conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if first == len(want) {
		t.Fatalf("the first read returned the whole %d-byte reply: it was not sliced", first)
	}
	if _, err := io.ReadFull(c.conn, buf[first:]); err != nil || string(buf) != want {
		t.Fatalf("sliced reply: %v, intact %v", err, string(buf) == want)
	}
	t.Logf("the first read of a sliced %d-byte reply returned %d byte(s)", len(want), first)
	p.SetSlice(0)
	if got, err := c.send(2*time.Second, "PING"); got != "+PONG" || err != nil {
		t.Fatalf("PING after slicing = %q, %v", got, err)
	}
}

// Replies are delayed by a random duration within the range, and stay in order.
func TestProxyJitter(t *testing.T) {
	srv := redistest.Start(t)
	p := redistest.NewProxy(t, srv.Addr())
	const lo, hi = 20 * time.Millisecond, 60 * time.Millisecond
	p.SetJitter(lo, hi)
	c := dialProxy(t, p)
	var slowest time.Duration
	for i := range 10 {
		start := time.Now()
		got, err := c.send(5*time.Second, "INCR", "n")
		elapsed := time.Since(start)
		if want := ":" + strconv.Itoa(i+1); got != want || err != nil {
			t.Fatalf("INCR %d = %q, %v; want %s", i+1, got, err, want)
		}
		if elapsed < lo {
			t.Fatalf("INCR %d answered in %v, less than the jitter's lower bound %v", i+1, elapsed, lo)
		}
		slowest = max(slowest, elapsed)
	}
	t.Logf("slowest of 10 with jitter %v…%v: %v", lo, hi, slowest)
	p.SetJitter(0, 0)
	start := time.Now()
	if got, err := c.send(5*time.Second, "PING"); got != "+PONG" || err != nil {
		t.Fatalf("PING = %q, %v", got, err)
	}
	if elapsed := time.Since(start); elapsed >= hi {
		t.Logf("PING without jitter took %v (a loaded machine?)", elapsed)
	}
}

// Half-open: nothing is relayed and nothing is closed; once relaying resumes, the held request and
// its reply go through.
func TestProxyHalfOpen(t *testing.T) {
	srv := redistest.Start(t)
	p := redistest.NewProxy(t, srv.Addr())
	c := dialProxy(t, p)
	if got, err := c.send(2*time.Second, "PING"); got != "+PONG" || err != nil {
		t.Fatalf("PING = %q, %v", got, err)
	}
	p.SetHalfOpen(true)
	_, err := c.send(300*time.Millisecond, "SET", "held", "v")
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("SET while half-open: %v; want a timeout, the connection still open", err)
	}
	if v, ok := getDirect(t, srv, "held"); ok {
		t.Fatalf("GET held on the server = %q while half-open; the request should be held", v)
	}
	// A new connection is accepted, and hears nothing either.
	c2 := dialProxy(t, p)
	if _, err := c2.send(300*time.Millisecond, "PING"); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("PING on a new connection while half-open: %v; want a timeout", err)
	}
	p.SetHalfOpen(false)
	c.conn.SetDeadline(time.Now().Add(2 * time.Second))
	if line, err := c.r.ReadString('\n'); line != "+OK\r\n" || err != nil {
		t.Fatalf("the held SET's reply after healing = %q, %v", line, err)
	}
	if v, _ := getDirect(t, srv, "held"); v != "v" {
		t.Fatalf("GET held on the server = %q after healing, want v", v)
	}
	c2.conn.SetDeadline(time.Now().Add(2 * time.Second))
	if line, err := c2.r.ReadString('\n'); line != "+PONG\r\n" || err != nil {
		t.Fatalf("the held PING's reply after healing = %q, %v", line, err)
	}
}
