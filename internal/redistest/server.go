package redistest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// A Server is one redis-server process started by [Start], on a loopback port it keeps across
// [Server.Restart]. Its methods are safe for concurrent use; those that take a testing.TB report failures
// through it and must then be called from the goroutine running that test. The zero value is not usable.
type Server struct {
	path    string      // redis-server's path
	port    int         // fixed at Start, reused by Restart
	dir     string      // the working directory, a t.TempDir
	logFile string      // redis-server's --logfile
	outFile string      // its stdout and stderr, where config errors go
	pre     []string    // arguments before the harness's own: a configuration file, --sentinel
	args    []string    // the extra arguments given to Start
	tls     *tls.Config // set by StartTLS: the server listens only on TLS, and the harness's clients use this
	acl     string      // the rules of User, created at every launch; "" for a sentinel, which has no User

	owner testing.TB // Start's t

	mu      sync.Mutex
	proc    *process         // the current incarnation; nil only during Start
	inspect rueidis.Client   // Do's client, made on first use
	clients []rueidis.Client // made by Client(owner), closed after the process is gone
	closed  bool             // cleanup has run
}

// A process is one run of redis-server.
type process struct {
	cmd    *exec.Cmd
	done   chan struct{} // closed once the process has been reaped
	err    error         // what Wait returned, valid once done is closed
	frozen bool          // sent SIGSTOP and not yet SIGCONT
}

// exited reports whether p has been reaped.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Start starts a redis-server on a free 127.0.0.1 port and returns when it answers PING. Extra args are
// passed to redis-server (e.g. "--maxmemory", "1mb"), after the harness's own, so they win.
//
// The server runs in its own t.TempDir() with no persistence (--save "" --appendonly no) and is killed,
// whatever its state, at t's cleanup; it also dies with the test binary. If redis-server is not on PATH,
// Start skips t, or fails it when the environment variable ADMIT_REQUIRE_REDIS is 1.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	requireRedis(t)
	s, err := start(t, nil, args, ACLRules+" "+ResetACLRules)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return s
}

// start starts a redis-server as Start does, with pre before the harness's own arguments (a
// configuration file must come first) and args after them, and User allowed acl ("" for no User),
// and reports failure rather than failing t, so that several servers may be started at once from
// other goroutines.
func start(t testing.TB, pre, args []string, acl string) (*Server, error) {
	return startWith(t, pre, args, acl, nil)
}

// startWith is start for a TLS-only server when conf, the harness's client configuration, is set.
func startWith(t testing.TB, pre, args []string, acl string, conf *tls.Config) (*Server, error) {
	path, err := exec.LookPath(binary)
	if err != nil {
		return nil, err
	}
	dir := t.TempDir()
	s := &Server{
		path:    path,
		dir:     dir,
		logFile: filepath.Join(dir, "redis.log"),
		outFile: filepath.Join(dir, "redis.out"),
		pre:     append([]string(nil), pre...),
		args:    append([]string(nil), args...),
		tls:     conf,
		acl:     acl,
		owner:   t,
	}
	// Registered after TempDir, so it runs before the directory is removed.
	t.Cleanup(s.cleanup(t))

	s.mu.Lock()
	defer s.mu.Unlock()
	for attempt := 1; ; attempt++ {
		if s.port, err = pickPort(); err != nil {
			return nil, err
		}
		err := s.launchLocked()
		if err == nil {
			return s, nil
		}
		if errors.Is(err, errPortTaken) && attempt < startAttempts {
			t.Logf("redistest: port %d was taken, retrying on another (attempt %d of %d)", s.port, attempt, startAttempts)
			continue
		}
		return nil, err
	}
}

// Addr returns the server's address, "127.0.0.1:PORT".
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Port returns the server's TCP port.
func (s *Server) Port() int {
	return s.port
}

// URL returns a URL that logs in to the server as the least-privilege [User]:
// "redis://admit:s3cret@127.0.0.1:PORT", or rediss:// for a server started by [StartTLS]. A
// sentinel has no User: its URL has no credentials.
func (s *Server) URL() string {
	if s.acl == "" {
		return s.AdminURL()
	}
	return s.scheme() + User + ":" + Password + "@" + s.Addr()
}

// AdminURL returns the server's address as a URL without credentials, "redis://127.0.0.1:PORT" (or
// rediss://), which logs in as the unrestricted default user: for the few tests that need a store, or
// a program, allowed commands outside [ACLRules].
func (s *Server) AdminURL() string {
	return s.scheme() + s.Addr()
}

// scheme returns "rediss://" for a TLS-only server, "redis://" otherwise.
func (s *Server) scheme() string {
	if s.tls != nil {
		return "rediss://"
	}
	return "redis://"
}

// Client returns a new plain rueidis client of the server, with retries and client-side caching off,
// for inspecting or corrupting its state in tests. The client is closed at t's cleanup. Like any client
// without retries, its first command after [Server.Kill], [Server.Stop] or [Server.Restart] may fail
// with the broken connection's error; it redials for the next. (Do's shared client is replaced instead.)
func (s *Server) Client(t testing.TB) rueidis.Client {
	t.Helper()
	c, err := s.newClient()
	if err != nil {
		t.Fatalf("redistest: client of %s: %v\n%s", s.Addr(), err, s.logTail())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t == s.owner && !s.closed {
		// Closed by the server's cleanup once the process is gone: rueidis takes a second to close a
		// client of a server that is frozen, as a test may well leave it.
		s.clients = append(s.clients, c)
	} else {
		t.Cleanup(c.Close)
	}
	return c
}

// Do sends one command through a client shared by every call of s and returns its result. It fails t
// on a network error, or a command that does not answer within 10s; a Redis error reply, or a nil reply,
// is returned in the result, not reported.
func (s *Server) Do(t testing.TB, args ...string) rueidis.RedisResult {
	t.Helper()
	if len(args) == 0 || args[0] == "" {
		t.Fatal("redistest: Do needs a command")
	}
	if strings.HasSuffix(strings.ToUpper(args[0]), "SUBSCRIBE") {
		t.Fatalf("redistest: Do cannot send %s; use a Client", args[0])
	}
	c, err := s.inspectClient()
	if err != nil {
		t.Fatalf("redistest: client of %s: %v\n%s", s.Addr(), err, s.logTail())
	}
	ctx, cancel := context.WithTimeout(context.Background(), doTimeout)
	defer cancel()
	res := c.Do(ctx, c.B().Arbitrary(args...).Build())
	if err := res.Error(); err != nil {
		var reply *rueidis.RedisError
		if !errors.As(err, &reply) {
			t.Fatalf("redistest: %s on %s: %v", strings.Join(args, " "), s.Addr(), err)
		}
	}
	return res
}

// try sends one command as Do does, but returns a network error in the result rather than failing a
// test, for polls that look at a topology while it changes: a connection its server closed (a
// promotion closes every client's) is dialled again by the next call.
func (s *Server) try(args ...string) rueidis.RedisResult {
	c, err := s.inspectClient()
	if err != nil {
		return rueidis.NewErrorResult(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), doTimeout)
	defer cancel()
	return c.Do(ctx, c.B().Arbitrary(args...).Build())
}

// cleanup returns the function Start registers with t.Cleanup: it closes the shared client and kills
// the current process, whatever its state.
func (s *Server) cleanup(t testing.TB) func() {
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.closed = true
		if err := s.killLocked(); err != nil {
			t.Errorf("redistest: cleanup: %v", err)
		}
		for _, c := range s.clients {
			c.Close()
		}
		s.clients = nil
	}
}

// launchLocked starts redis-server on s.port and waits until it answers PING. On failure no process is
// left running, and the error, which matches errPortTaken if the port was not free, quotes the logs.
func (s *Server) launchLocked() error {
	out, err := os.OpenFile(s.outFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close() // the child has its own copy
	port := []string{"--port", strconv.Itoa(s.port)}
	if s.tls != nil {
		port = []string{"--port", "0", "--tls-port", strconv.Itoa(s.port)}
	}
	args := []string{
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--logfile", s.logFile,
		"--save", "",
		"--appendonly", "no",
		"--protected-mode", "no",
		"--daemonize", "no",
	}
	cmd := exec.Command(s.path, slices.Concat(s.pre, port, args, s.args)...)
	cmd.Dir = s.dir
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.path, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	s.proc = p
	err = s.waitReady(p)
	if err == nil && s.acl != "" {
		err = s.createUser()
	}
	if err != nil {
		if kerr := s.killLocked(); kerr != nil {
			err = errors.Join(err, kerr)
		}
		return fmt.Errorf("redis-server on %s: %w\n%s", s.Addr(), err, s.logTail())
	}
	return nil
}

// waitReady waits until the server on s.port answers PING and is p, not another process that holds the
// port.
func (s *Server) waitReady(p *process) error {
	deadline := time.Now().Add(readyTimeout)
	pause := 5 * time.Millisecond
	for {
		if p.exited() {
			if s.portTakenInLog() {
				return fmt.Errorf("%w: exited at startup (%v)", errPortTaken, p.err)
			}
			return fmt.Errorf("exited at startup: %v", p.err)
		}
		pid, err := ping(s.Addr(), s.tls, 500*time.Millisecond)
		if err == nil {
			if pid == p.cmd.Process.Pid {
				return nil
			}
			return fmt.Errorf("%w: process %d answers there, not ours (%d)", errPortTaken, pid, p.cmd.Process.Pid)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer to PING within %v: %v", readyTimeout, err)
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// createUser creates User, allowed s.acl, on the server: ACL is neither persisted nor replicated, so
// it is done at every launch, on every server.
func (s *Server) createUser() error {
	args := slices.Concat([]string{"ACL", "SETUSER", User, "reset", "on", ">" + Password}, strings.Fields(s.acl))
	reply, err := command(s.Addr(), s.tls, readyTimeout, args...)
	if err != nil {
		return fmt.Errorf("ACL SETUSER %s: %w", User, err)
	}
	if reply != "+OK" {
		return fmt.Errorf("ACL SETUSER %s answered %q", User, reply)
	}
	return nil
}

// portTakenInLog reports whether the server's logs say it could not bind its port.
func (s *Server) portTakenInLog() bool {
	for _, name := range []string{s.logFile, s.outFile} {
		b, _ := os.ReadFile(name)
		if strings.Contains(string(b), "Address already in use") {
			return true
		}
	}
	return false
}

// killLocked thaws and kills the current process, if it is running, and waits until it is reaped.
func (s *Server) killLocked() error {
	p := s.proc
	// Do's shared client is closed once the server is gone: closing it while the server is frozen stalls.
	defer s.dropInspectLocked()
	if p == nil || p.exited() {
		return nil
	}
	// A stopped process dies of SIGKILL anyway; SIGCONT first is belt and braces.
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	p.frozen = false
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(exitTimeout):
		return fmt.Errorf("redis-server %d on %s still running %v after SIGKILL", p.cmd.Process.Pid, s.Addr(), exitTimeout)
	}
}

// dropInspectLocked closes Do's shared client, so that Do after a restart starts on a fresh connection.
func (s *Server) dropInspectLocked() {
	if s.inspect != nil {
		s.inspect.Close()
		s.inspect = nil
	}
}

// inspectClient returns the client Do shares, making it on first use.
func (s *Server) inspectClient() (rueidis.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("server already cleaned up")
	}
	if s.inspect == nil {
		c, err := s.newClient()
		if err != nil {
			return nil, err
		}
		s.inspect = c
	}
	return s.inspect, nil
}

// newClient dials a plain rueidis client of the server.
func (s *Server) newClient() (rueidis.Client, error) {
	return rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{s.Addr()},
		ForceSingleClient: true,
		DisableRetry:      true,
		DisableCache:      true,
		TLSConfig:         s.tls,
	})
}

// logTail returns the last lines of the server's log and of its stdout and stderr, for failure messages.
func (s *Server) logTail() string {
	var b strings.Builder
	for _, name := range []string{s.logFile, s.outFile} {
		data, err := os.ReadFile(name)
		if err != nil || len(strings.TrimSpace(string(data))) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > logTailLines {
			lines = lines[len(lines)-logTailLines:]
		}
		fmt.Fprintf(&b, "--- last lines of %s ---\n%s\n", filepath.Base(name), strings.Join(lines, "\n"))
	}
	if b.Len() == 0 {
		return "(redis-server logged nothing)"
	}
	return b.String()
}
