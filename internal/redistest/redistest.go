// Package redistest starts real redis-server processes, and listeners that misbehave, for tests and benchmarks.
//
// A test starts its own redis-server, which is gone when the test ends:
//
//	func TestCounter(t *testing.T) {
//		s := redistest.Start(t, "--maxmemory", "1mb")
//		if n, err := s.Do(t, "INCR", "hits").AsInt64(); err != nil || n != 1 {
//			t.Fatalf("INCR hits = %d, %v; want 1", n, err)
//		}
//		s.Kill(t)    // Redis is gone: the code under test should report it unavailable.
//		s.Restart(t) // Same address, empty data.
//	}
//
// Every data server the harness starts (by [Start], [StartTLS], [StartCluster] and [StartSentinel], and
// again at every [Server.Restart]) has a least-privilege ACL user, [User] with [Password], allowed only
// [ACLRules] (plus [ClusterACLRules] on a cluster node, [SentinelACLRules] on a server Sentinel
// watches). The URLs the harness hands out ([Server.URL], [Cluster.URL], [Sentinel.URL], [Proxy.URL])
// log in as that user, so whatever the code under test runs through them runs with the permissions
// a production deployment gives it. The harness's own clients ([Server.Do], [Server.Client]) and
// [Server.AdminURL] are the unrestricted default user, for the commands a test needs to inspect or
// break a server (DEBUG, FLUSHALL, CONFIG, MEMORY USAGE, CLUSTER, SCRIPT FLUSH).
//
// Every function needs the testing.TB of a running test, so the package has no runnable Example;
// its own tests show each use.
package redistest

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
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

const (
	// binary is the program Start runs, looked up on PATH.
	binary = "redis-server"
	// requireEnv names the environment variable that turns a missing redis-server from a skip into a failure.
	requireEnv = "ADMIT_REQUIRE_REDIS"
	// startAttempts bounds how many free ports Start tries when another process takes the one it chose.
	startAttempts = 5
	// readyTimeout bounds how long a start waits for the server to answer PING: patient, as a loaded
	// machine may take seconds to start one.
	readyTimeout = 30 * time.Second
	// exitTimeout bounds how long Stop waits for a graceful exit, and Kill for the process to be reaped.
	exitTimeout = 10 * time.Second
	// doTimeout bounds one command sent by Do.
	doTimeout = 10 * time.Second
	// logTailLines is how many lines of each log a failure message quotes.
	logTailLines = 30
)

// User and Password are the least-privilege ACL user the harness creates on every data server it starts.
const (
	// User is the name of the least-privilege user.
	User = "admit"
	// Password is User's password.
	Password = "s3cret"
)

// ACLRules is the ACL SETUSER rule list of admit's least-privilege user on a standalone Redis, as
// README.md, docs/redis.md and docs/running-redis.md give it: EVALSHA and SCRIPT LOAD (never EVAL),
// MULTI and EXEC (the transaction redisstore falls back to on a second NOSCRIPT), PING, and the data
// commands the scripts call, on rl:* keys. A redisstore test checks that it is what
// redisstore derives from its scripts and what the docs say; the harness creates [User] with it on
// every server it starts.
const ACLRules = "resetkeys ~rl:* resetchannels -@all +evalsha +script|load +multi +exec +ping +decrby +del +get +hgetall +hincrby +hset +incrby +pexpireat +pexpiretime +pttl +set +time +zadd +zcard +zcount +zrange +zrem +zremrangebyscore"

// ClusterACLRules are the rules a Redis Cluster node's user needs besides [ACLRules]: the client reads
// the cluster's topology with CLUSTER SLOTS (Redis 7) or CLUSTER SHARDS (Redis 8 and later), and
// follows an ASK redirect, while a slot migrates, with ASKING. READONLY is not needed: redisstore
// never reads from replicas.
const ClusterACLRules = "+cluster|slots +cluster|shards +asking"

// SentinelACLRules are the rules the user of a server Sentinel watches needs besides [ACLRules]: the
// client asks the server the sentinels name with ROLE whether it really is the primary.
const SentinelACLRules = "+role"

// errPortTaken reports that a redis-server could not have its port because another socket holds it.
var errPortTaken = errors.New("port already in use")

// Available reports whether redis-server is on PATH, that is, whether [Start] would run rather than skip.
func Available() bool {
	_, err := exec.LookPath(binary)
	return err == nil
}

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
	s, err := start(t, nil, args, ACLRules)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return s
}

// requireRedis skips t when redis-server is not on PATH, or fails it when the environment variable
// ADMIT_REQUIRE_REDIS is 1.
func requireRedis(t testing.TB) {
	t.Helper()
	if Available() {
		return
	}
	if os.Getenv(requireEnv) == "1" {
		t.Fatalf("redis-server not found on PATH and %s=1: install it with: apt-get install redis-server", requireEnv)
	}
	t.Skip("redis-server not found: Redis tests SKIPPED; install it (apt-get install redis-server) or run make test")
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

// command dials addr, sends one command and returns the first line of its reply, without its CRLF.
func command(addr string, conf *tls.Config, timeout time.Duration, args ...string) (string, error) {
	conn, err := dial(addr, conf, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// dial connects to addr, over TLS when conf is set.
func dial(addr string, conf *tls.Config, timeout time.Duration) (net.Conn, error) {
	if conf != nil {
		return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", addr, conf)
	}
	return net.DialTimeout("tcp", addr, timeout)
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

// ping dials addr, sends PING and INFO server, and returns the process_id of the server that answered
// PONG.
func ping(addr string, conf *tls.Config, timeout time.Duration) (int, error) {
	conn, err := dial(addr, conf, timeout)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return 0, err
	}
	if _, err := io.WriteString(conn, "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n"); err != nil {
		return 0, err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if line != "+PONG\r\n" {
		return 0, fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	line, err = r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
	if !strings.HasPrefix(line, "$") || err != nil || n < 0 {
		return 0, fmt.Errorf("INFO answered %q", strings.TrimSpace(line))
	}
	info := make([]byte, n)
	if _, err := io.ReadFull(r, info); err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(info), "\r\n") {
		if v, ok := strings.CutPrefix(l, "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server has no process_id")
}

// pickPort returns a loopback TCP port that was free a moment ago, outside the kernel's range of
// ephemeral ports when it can: an outgoing connection (a client of another server, on any test) takes
// its local port from that range, so a port from it may be taken while its server is killed, and
// [Server.Restart] would fail. It falls back to a port the kernel picks.
func pickPort() (int, error) {
	const (
		minPort = 10000 // above the ports of common services (6379, 8080, …)
		maxPort = 55535 // a cluster node's bus port is its port + 10000 unless set
	)
	lo, hi := ephemeralPorts()
	for range 64 {
		port := minPort + rand.IntN(maxPort-minPort+1)
		if port >= lo && port <= hi {
			continue
		}
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			l.Close()
			return port, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralPorts returns the kernel's range of local ports for outgoing connections: Linux's
// ip_local_port_range, or IANA's 49152–65535 where it cannot be read.
func ephemeralPorts() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			l, err1 := strconv.Atoi(f[0])
			h, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && l <= h {
				return l, h
			}
		}
	}
	return 49152, 65535
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
