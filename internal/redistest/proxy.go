package redistest

import (
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	// proxyDialTimeout bounds how long the proxy waits to connect to its target for a new client.
	proxyDialTimeout = 5 * time.Second
	// lostReplyWait bounds how long LoseNextReply's connection waits for the server's reply before it
	// is closed anyway.
	lostReplyWait = 5 * time.Second
	// chunkSize is the most one Read returns, in either direction.
	chunkSize = 32 << 10
	// delayedChunks is how many server->client chunks a connection holds while they wait out the latency.
	delayedChunks = 64
)

// A fault is a one-shot fault armed on a Proxy.
type fault int

const (
	noFault fault = iota
	dropRequest
	loseReply
	resetAfter
	truncateReply
)

// Proxy is a TCP proxy on 127.0.0.1 in front of a server, for injecting network faults. Each client
// connection gets its own connection to the server; bytes are relayed in chunks, a chunk being
// whatever one Read returns (for a small command on loopback, the whole command). Its methods are
// safe for concurrent use. Make one with [NewProxy]; the zero value is not usable.
type Proxy struct {
	target  string
	ln      net.Listener
	latency atomic.Int64 // a time.Duration added to every server->client chunk
	jitter  atomic.Pointer[jitterRange]
	slice   atomic.Int64 // the most bytes one write to a client carries; 0 means a whole chunk

	mu       sync.Mutex
	armed    fault                   // applies to the next client->server chunk on any connection
	conns    map[*proxyConn]struct{} // open connections
	closed   bool                    // cleanup has run
	halfOpen chan struct{}           // non-nil while half-open: closed when relaying resumes

	wg sync.WaitGroup
}

// NewProxy starts a Proxy in front of target ("host:port"). The proxy, and every connection through
// it, is closed at t's cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: proxy: %v", err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[*proxyConn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// Addr returns the proxy's address, "127.0.0.1:PORT".
func (p *Proxy) Addr() string {
	return p.ln.Addr().String()
}

// URL returns the proxy's address as a Redis URL that logs in as the least-privilege [User] of the
// server behind it, "redis://admit:s3cret@127.0.0.1:PORT".
func (p *Proxy) URL() string {
	return "redis://" + User + ":" + Password + "@" + p.Addr()
}

// DropNextRequest arms a one-shot fault: the next chunk any client sends is not forwarded, and that
// client's connection is reset at once (RST): a reset before the request was forwarded. The request
// never reaches the server. It replaces a fault armed before and not yet applied.
func (p *Proxy) DropNextRequest() {
	p.arm(dropRequest)
}

// LoseNextReply arms a one-shot fault: the next chunk any client sends is forwarded, but the client
// sends nothing more to the server on that connection; the first chunk of the server's reply is read
// and discarded, and the connection is closed, both sides. The request runs; the client never hears
// of it. It replaces a fault armed before and not yet applied.
func (p *Proxy) LoseNextReply() {
	p.arm(loseReply)
}

// SetLatency delays every server->client chunk read from now on by d, on every connection; 0 means no
// delay. Chunks keep their order, and each is delayed from the moment it was read, so delays do not
// add up.
func (p *Proxy) SetLatency(d time.Duration) {
	p.latency.Store(int64(max(d, 0)))
}

// ResetAfterNextRequest arms a one-shot fault: the next chunk any client sends is forwarded, the
// server's reply is read and discarded, and then that client's connection is reset (RST) rather than
// closed. The request runs; the client hears only "connection reset by peer". It replaces a fault
// armed before and not yet applied.
func (p *Proxy) ResetAfterNextRequest() {
	p.arm(resetAfter)
}

// TruncateNextReply arms a one-shot fault: the next chunk any client sends is forwarded, but only
// the first half (at least one byte) of the first chunk of the server's reply reaches the client,
// and then the connection is closed, both sides. The request runs; the client reads part of a
// reply, then EOF. It replaces a fault armed before and not yet applied.
func (p *Proxy) TruncateNextReply() {
	p.arm(truncateReply)
}

// SetJitter delays every server->client chunk read from now on by a random duration between lo and
// hi (uniform, both included), on top of [Proxy.SetLatency]'s delay, on every connection. Chunks
// keep their order: one drawn shorter than its predecessor's waits for it. SetJitter(0, 0) turns
// jitter off; hi below lo is taken as lo.
func (p *Proxy) SetJitter(lo, hi time.Duration) {
	lo = max(lo, 0)
	hi = max(hi, lo)
	if hi == 0 {
		p.jitter.Store(nil)
		return
	}
	p.jitter.Store(&jitterRange{lo: lo, hi: hi})
}

// SetSlice makes the proxy write server->client data to each client at most n bytes per write from
// now on, on every connection, so that a client's reads see a reply in pieces (n = 1: one byte at a
// time, each its own TCP segment). n <= 0 turns slicing off: each chunk is written whole.
func (p *Proxy) SetSlice(n int) {
	p.slice.Store(int64(max(n, 0)))
}

// SetHalfOpen(true) makes the proxy stop relaying in both directions, on every connection, new ones
// included, while keeping every TCP connection open: like a peer that died or a network that
// partitioned without an RST, a client's writes succeed and no reply ever comes. Bytes already read
// are held, not discarded, and SetHalfOpen(false) relays them in order, as TCP retransmission would
// once the network heals. A connection the client closes meanwhile is still closed.
func (p *Proxy) SetHalfOpen(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && p.halfOpen == nil:
		p.halfOpen = make(chan struct{})
	case !on && p.halfOpen != nil:
		close(p.halfOpen)
		p.halfOpen = nil
	}
}

// pass waits while the proxy is half-open; it reports false if c was closed meanwhile.
func (p *Proxy) pass(c *proxyConn) bool {
	p.mu.Lock()
	gate := p.halfOpen
	p.mu.Unlock()
	if gate == nil {
		return true
	}
	select {
	case <-gate:
		return true
	case <-c.done:
		return false
	}
}

// delay returns how long a server->client chunk read now waits: the latency plus any jitter.
func (p *Proxy) delay() time.Duration {
	d := time.Duration(p.latency.Load())
	if j := p.jitter.Load(); j != nil {
		d += j.lo + rand.N(j.hi-j.lo+1)
	}
	return d
}

// A jitterRange is the range of SetJitter's random delay.
type jitterRange struct{ lo, hi time.Duration }

func (p *Proxy) arm(f fault) {
	p.mu.Lock()
	p.armed = f
	p.mu.Unlock()
}

// takeFault returns the armed fault, if any, and disarms it.
func (p *Proxy) takeFault() fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.armed
	p.armed = noFault
	return f
}

// accept serves clients until the listener is closed.
func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed at cleanup
		}
		p.wg.Go(func() { p.serve(client) })
	}
}

// serve connects client to the target and relays between them until either side closes.
func (p *Proxy) serve(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.target, proxyDialTimeout)
	if err != nil {
		reset(client)
		return
	}
	c := &proxyConn{
		proxy:  p,
		client: client,
		server: server,
		down:   make(chan chunk, delayedChunks),
		done:   make(chan struct{}),
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.close(false)
		return
	}
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()

	var wg sync.WaitGroup
	wg.Go(func() { p.readServer(c) })
	wg.Go(c.writeClient)
	p.readClient(c)
	wg.Wait()
}

// readClient relays client->server chunks, applying an armed fault to the first one it reads.
func (p *Proxy) readClient(c *proxyConn) {
	buf := make([]byte, chunkSize)
	for {
		n, err := c.client.Read(buf)
		if n > 0 {
			if !p.pass(c) {
				return
			}
			switch f := p.takeFault(); f {
			case dropRequest:
				c.close(true)
				return
			case loseReply, resetAfter, truncateReply:
				c.reply.Store(int32(f)) // before the write, so the reply cannot slip through
				if _, err := c.server.Write(buf[:n]); err != nil {
					c.close(false)
					return
				}
				// readServer (or writeClient) closes c once the reply has come; close it anyway if
				// it never does.
				tm := time.NewTimer(lostReplyWait)
				select {
				case <-c.done:
				case <-tm.C:
				}
				tm.Stop()
				c.close(f == resetAfter)
				return
			}
			if _, err := c.server.Write(buf[:n]); err != nil {
				c.close(false)
				return
			}
		}
		if err != nil {
			c.close(false)
			return
		}
	}
}

// readServer reads server->client chunks and queues them, each with the time it is due, for
// writeClient. When a reply is to be lost or reset, it discards the first chunk and closes the
// connection; when it is to be truncated, it queues the first half of the first chunk and stops, so
// that writeClient closes the connection once that half is written.
func (p *Proxy) readServer(c *proxyConn) {
	defer close(c.down)
	for {
		buf := make([]byte, chunkSize)
		n, err := c.server.Read(buf)
		if n > 0 {
			switch fault(c.reply.Load()) {
			case loseReply:
				c.close(false)
				return
			case resetAfter:
				c.close(true)
				return
			case truncateReply:
				n = max(1, n/2)
				err = io.EOF
			}
			ch := chunk{data: buf[:n], due: time.Now().Add(p.delay())}
			select {
			case c.down <- ch:
			case <-c.done:
				return
			}
		}
		if err != nil {
			// The server is gone: writeClient delivers what is queued, then closes the connection.
			return
		}
	}
}

// close closes the listener and every connection, and waits for their goroutines to end.
func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.ln.Close()
	for c := range p.conns {
		c.close(false)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// A proxyConn is one client connection and the proxy's connection to the server on its behalf.
type proxyConn struct {
	proxy          *Proxy
	client, server net.Conn
	down           chan chunk    // server->client chunks waiting for their time; closed by readServer
	reply          atomic.Int32  // a fault: what becomes of the next server->client chunk
	done           chan struct{} // closed once c is closed
	once           sync.Once
}

// A chunk is what one Read returned, to be written by due.
type chunk struct {
	data []byte
	due  time.Time
}

// writeClient writes queued chunks to the client once each is due, and closes c after the last.
func (c *proxyConn) writeClient() {
	for {
		var ch chunk
		var ok bool
		select {
		case ch, ok = <-c.down:
		case <-c.done:
			return
		}
		if !ok {
			c.close(false)
			return
		}
		if wait := time.Until(ch.due); wait > 0 {
			tm := time.NewTimer(wait)
			select {
			case <-tm.C:
			case <-c.done:
				tm.Stop()
				return
			}
		}
		if !c.write(ch.data) {
			return
		}
	}
}

// write writes data to the client, in slices of the proxy's slice size, each once the proxy is not
// half-open. It reports false, having closed c, if a write failed, or if c was closed meanwhile.
func (c *proxyConn) write(data []byte) bool {
	for len(data) > 0 {
		if !c.proxy.pass(c) {
			return false
		}
		n := len(data)
		if s := int(c.proxy.slice.Load()); s > 0 {
			n = min(n, s)
		}
		if _, err := c.client.Write(data[:n]); err != nil {
			c.close(false)
			return false
		}
		data = data[n:]
	}
	return true
}

// close closes both sides of c, resetting the client's side (RST rather than FIN) if rst is set.
// It is idempotent; only the first call's rst counts.
func (c *proxyConn) close(rst bool) {
	c.once.Do(func() {
		if rst {
			reset(c.client)
		} else {
			c.client.Close()
		}
		c.server.Close()
		close(c.done)
	})
}

// reset closes conn with an RST: its peer's next read or write fails with "connection reset by peer".
func reset(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
}
