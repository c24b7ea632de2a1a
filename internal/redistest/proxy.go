package redistest

import (
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
)

// Proxy is a TCP proxy on 127.0.0.1 in front of a server, for injecting network faults. Each client
// connection gets its own connection to the server; bytes are relayed in chunks, a chunk being
// whatever one Read returns (for a small command on loopback, the whole command). Its methods are
// safe for concurrent use. Make one with [NewProxy]; the zero value is not usable.
type Proxy struct {
	target  string
	ln      net.Listener
	latency atomic.Int64 // a time.Duration added to every server->client chunk

	mu     sync.Mutex
	armed  fault                   // applies to the next client->server chunk on any connection
	conns  map[*proxyConn]struct{} // open connections
	closed bool                    // cleanup has run

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

// URL returns the proxy's address as a Redis URL, "redis://127.0.0.1:PORT".
func (p *Proxy) URL() string {
	return "redis://" + p.Addr()
}

// DropNextRequest arms a one-shot fault: the next chunk any client sends is not forwarded, and that
// client's connection is reset at once. The request never reaches the server. It replaces a fault
// armed before and not yet applied.
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
			switch p.takeFault() {
			case dropRequest:
				c.close(true)
				return
			case loseReply:
				c.losing.Store(true) // before the write, so the reply cannot slip through
				if _, err := c.server.Write(buf[:n]); err != nil {
					c.close(false)
					return
				}
				// readServer closes c once the reply has come; close it anyway if it never does.
				tm := time.NewTimer(lostReplyWait)
				select {
				case <-c.done:
				case <-tm.C:
				}
				tm.Stop()
				c.close(false)
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
// writeClient. When a reply is to be lost, it discards the first chunk and closes the connection.
func (p *Proxy) readServer(c *proxyConn) {
	defer close(c.down)
	for {
		buf := make([]byte, chunkSize)
		n, err := c.server.Read(buf)
		if n > 0 {
			if c.losing.Load() {
				c.close(false)
				return
			}
			ch := chunk{data: buf[:n], due: time.Now().Add(time.Duration(p.latency.Load()))}
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
	client, server net.Conn
	down           chan chunk    // server->client chunks waiting for their time; closed by readServer
	losing         atomic.Bool   // the next server->client chunk is to be discarded, and c closed
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
		if _, err := c.client.Write(ch.data); err != nil {
			c.close(false)
			return
		}
	}
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
