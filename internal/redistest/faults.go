package redistest

import (
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Stop shuts the server down gracefully with SIGTERM (thawing it first if frozen) and waits for it to
// exit, killing it if it has not within 10s. Stopping a server that is not running does nothing.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	if p == nil || p.exited() {
		return
	}
	// Do's shared client is closed once the server is gone: closing it while the server is frozen stalls.
	defer s.dropInspectLocked()
	if p.frozen {
		s.signalLocked(t, syscall.SIGCONT)
		p.frozen = false
	}
	s.signalLocked(t, syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(exitTimeout):
	}
	if err := s.killLocked(); err != nil {
		t.Errorf("redistest: %v", err)
	}
	t.Errorf("redistest: %s did not exit within %v of SIGTERM; killed it\n%s", s.Addr(), exitTimeout, s.logTail())
}

// Kill sends the server SIGKILL and waits for it to exit. Killing a server that is not running does nothing.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.killLocked(); err != nil {
		t.Fatalf("redistest: %v", err)
	}
}

// Freeze stops the server with SIGSTOP, and returns once it is stopped: connections are still accepted
// by the kernel, but nothing is answered until [Server.Thaw].
func (s *Server) Freeze(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.signalLocked(t, syscall.SIGSTOP)
	s.proc.frozen = true
	if err := waitStopped(s.proc.cmd.Process.Pid, exitTimeout); err != nil {
		t.Fatalf("redistest: freeze %s: %v", s.Addr(), err)
	}
}

// Thaw resumes a server stopped by [Server.Freeze] with SIGCONT.
func (s *Server) Thaw(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.signalLocked(t, syscall.SIGCONT)
	s.proc.frozen = false
}

// Restart starts the server again on the same port, with the same arguments and directory, and returns
// when it answers PING. A server still running is killed first. Data does not survive: there is no
// persistence. Restart fails t if another process has taken the port meanwhile.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		t.Fatalf("redistest: restart %s after its test's cleanup", s.Addr())
	}
	if err := s.killLocked(); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	if err := s.launchLocked(); err != nil {
		t.Fatalf("redistest: restart: %v", err)
	}
}

// signalLocked sends sig to the current process, failing t if it is not running.
func (s *Server) signalLocked(t testing.TB, sig os.Signal) {
	t.Helper()
	p := s.proc
	if p == nil || p.exited() {
		t.Fatalf("redistest: %v to %s: server is not running", sig, s.Addr())
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("redistest: %v to %s: %v", sig, s.Addr(), err)
	}
}

// BlackHole returns the address of a TCP listener on 127.0.0.1 that accepts connections and never
// answers: it reads and discards whatever it is sent. The listener and its connections are closed at t's
// cleanup.
func BlackHole(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: black hole: %v", err)
	}
	var (
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
		done  bool
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return // closed at cleanup
			}
			mu.Lock()
			if done {
				mu.Unlock()
				c.Close()
				return
			}
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Go(func() {
				_, _ = io.Copy(io.Discard, c)
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
				c.Close()
			})
		}
	})
	t.Cleanup(func() {
		mu.Lock()
		done = true
		l.Close()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// ClosedPort returns "127.0.0.1:PORT" where nothing listens, so that a dial is refused. Where the
// platform allows, the port is held, bound but not listening, until t's cleanup, so nothing else can
// take it meanwhile.
func ClosedPort(t testing.TB) string {
	t.Helper()
	port, release, err := reserveClosedPort()
	if err != nil {
		t.Fatalf("redistest: closed port: %v", err)
	}
	t.Cleanup(release)
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}
