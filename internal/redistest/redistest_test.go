package redistest_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/redistest"
	"github.com/redis/rueidis"
)

// rawPing sends PING on a fresh connection to addr and returns the reply line, waiting at most timeout.
func rawPing(addr string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(conn, "*1\r\n$4\r\nPING\r\n"); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}

// wantPong fails t unless the server at addr answers PING within 2s.
func wantPong(t *testing.T, addr string) {
	t.Helper()
	got, err := rawPing(addr, 2*time.Second)
	if err != nil || got != "+PONG" {
		t.Fatalf("PING %s = %q, %v; want +PONG", addr, got, err)
	}
}

// wantTimeout fails t unless a PING to addr connects but gets no reply within 200ms.
func wantTimeout(t *testing.T, addr string) {
	t.Helper()
	got, err := rawPing(addr, 200*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("PING %s = %q, %v; want a timeout", addr, got, err)
	}
}

// wantRefused fails t unless a dial to addr is refused.
func wantRefused(t *testing.T, addr string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		conn.Close()
		t.Fatalf("dial %s succeeded; want connection refused", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v; want connection refused", addr, err)
	}
}

// wantString fails t unless res is the string want.
func wantString(t *testing.T, res rueidis.RedisResult, want string) {
	t.Helper()
	if got, err := res.ToString(); err != nil || got != want {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
}

func TestStart(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	if want := fmt.Sprintf("127.0.0.1:%d", s.Port()); s.Addr() != want {
		t.Errorf("Addr() = %q; want %q", s.Addr(), want)
	}
	if want := "redis://admit:s3cret@" + s.Addr(); s.URL() != want {
		t.Errorf("URL() = %q; want %q", s.URL(), want)
	}
	if want := "redis://" + s.Addr(); s.AdminURL() != want {
		t.Errorf("AdminURL() = %q; want %q", s.AdminURL(), want)
	}
	wantPong(t, s.Addr())
	wantString(t, s.Do(t, "PING"), "PONG")

	// No persistence.
	save, err := s.Do(t, "CONFIG", "GET", "save").AsStrMap()
	if err != nil || save["save"] != "" {
		t.Errorf("CONFIG GET save = %v, %v; want empty", save, err)
	}
	aof, err := s.Do(t, "CONFIG", "GET", "appendonly").AsStrMap()
	if err != nil || aof["appendonly"] != "no" {
		t.Errorf("CONFIG GET appendonly = %v, %v; want no", aof, err)
	}

	// A Client sees what Do wrote.
	wantString(t, s.Do(t, "SET", "k", "v"), "OK")
	c := s.Client(t)
	wantString(t, c.Do(t.Context(), c.B().Get().Key("k").Build()), "v")
}

func TestStartArgs(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, "--maxmemory", "1mb")
	got, err := s.Do(t, "CONFIG", "GET", "maxmemory").AsStrMap()
	if err != nil || got["maxmemory"] != "1048576" {
		t.Fatalf("CONFIG GET maxmemory = %v, %v; want 1048576", got, err)
	}
}

func TestStartMany(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		ports = map[int]bool{}
	)
	for i := range 6 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			s := redistest.Start(t)
			wantString(t, s.Do(t, "PING"), "PONG")
			mu.Lock()
			defer mu.Unlock()
			if ports[s.Port()] {
				t.Errorf("port %d handed out twice", s.Port())
			}
			ports[s.Port()] = true
		})
	}
}

func TestDoReplies(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)

	err := s.Do(t, "NOSUCHCOMMAND", "x").Error()
	if e, ok := rueidis.IsRedisErr(err); !ok || !strings.Contains(e.Error(), "unknown command") {
		t.Errorf("Do(NOSUCHCOMMAND) error = %v; want an unknown command reply", err)
	}
	if err := s.Do(t, "GET", "missing").Error(); !rueidis.IsRedisNil(err) {
		t.Errorf("Do(GET missing) error = %v; want a nil reply", err)
	}
	wantString(t, s.Do(t, "SET", "s", "v"), "OK")
	if err := s.Do(t, "INCR", "s").Error(); err == nil {
		t.Errorf("Do(INCR on a string) succeeded; want an error reply")
	}
}

func TestKillRestart(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	addr := s.Addr()
	wantString(t, s.Do(t, "SET", "k", "v"), "OK")
	c := s.Client(t)

	s.Kill(t)
	wantRefused(t, addr)
	s.Kill(t) // no-op

	s.Restart(t)
	if s.Addr() != addr {
		t.Fatalf("restarted on %s; want %s", s.Addr(), addr)
	}
	wantPong(t, addr)
	// The shared client reconnects; nothing was persisted.
	if err := s.Do(t, "GET", "k").Error(); !rueidis.IsRedisNil(err) {
		t.Errorf("GET k after restart: %v; want nil", err)
	}
	// A Client may fail once on its broken connection, then redials.
	c.Do(t.Context(), c.B().Ping().Build())
	wantString(t, c.Do(t.Context(), c.B().Ping().Build()), "PONG")

	// Restart of a running server kills it first.
	wantString(t, s.Do(t, "SET", "k", "v2"), "OK")
	s.Restart(t)
	wantPong(t, addr)
	if err := s.Do(t, "GET", "k").Error(); !rueidis.IsRedisNil(err) {
		t.Errorf("GET k after second restart: %v; want nil", err)
	}
}

func TestStop(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	s.Stop(t)
	wantRefused(t, s.Addr())
	s.Stop(t) // no-op
	s.Restart(t)
	wantPong(t, s.Addr())
}

func TestFreezeThaw(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	s.Freeze(t)
	wantTimeout(t, s.Addr())
	s.Thaw(t)
	wantPong(t, s.Addr())
	wantString(t, s.Do(t, "PING"), "PONG")

	// A frozen server stops gracefully.
	s.Freeze(t)
	s.Stop(t)
	wantRefused(t, s.Addr())
}

func TestCleanupKills(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		do   func(*testing.T, *redistest.Server)
	}{
		{"running", func(*testing.T, *redistest.Server) {}},
		{"frozen", func(t *testing.T, s *redistest.Server) { s.Freeze(t) }},
		{"restarted", func(t *testing.T, s *redistest.Server) { s.Kill(t); s.Restart(t) }},
		{"killed", func(t *testing.T, s *redistest.Server) { s.Kill(t) }},
	} {
		var addr string
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Start(t)
			s.Do(t, "PING") // make the shared client
			s.Client(t)
			addr = s.Addr()
			tc.do(t, s)
		})
		if addr != "" {
			wantRefused(t, addr)
		}
	}
}

func TestBlackHole(t *testing.T) {
	t.Parallel()
	addr := redistest.BlackHole(t)
	wantTimeout(t, addr)
	wantTimeout(t, addr) // and again, on a second connection

	// Cleanup closes the listener and its open connections.
	var conn net.Conn
	t.Run("cleanup", func(t *testing.T) {
		addr := redistest.BlackHole(t)
		var err error
		if conn, err = net.Dial("tcp", addr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(conn, "PING\r\n"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // let it be accepted
	})
	if conn == nil {
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if n, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("read from a black hole after cleanup = %d, %v; want EOF or reset", n, err)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("black hole connection still open after cleanup: %v", err)
	}
}

func TestClosedPort(t *testing.T) {
	t.Parallel()
	addr := redistest.ClosedPort(t)
	wantRefused(t, addr)
	wantRefused(t, addr)
	// Nothing else can take it meanwhile.
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Errorf("listen on %s succeeded; want the port held", addr)
	}
}

// A fakeTB records the first Fatal or Skip and ends the goroutine, as testing.T would end the test.
type fakeTB struct {
	testing.TB
	mu      sync.Mutex
	failed  string
	skipped string
}

func (f *fakeTB) fatal(msg string) {
	f.mu.Lock()
	f.failed = msg
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeTB) skip(msg string) {
	f.mu.Lock()
	f.skipped = msg
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeTB) Fatal(args ...any)                 { f.fatal(fmt.Sprint(args...)) }
func (f *fakeTB) Fatalf(format string, args ...any) { f.fatal(fmt.Sprintf(format, args...)) }
func (f *fakeTB) FailNow()                          { f.fatal("FailNow") }
func (f *fakeTB) Skip(args ...any)                  { f.skip(fmt.Sprint(args...)) }
func (f *fakeTB) Skipf(format string, args ...any)  { f.skip(fmt.Sprintf(format, args...)) }
func (f *fakeTB) SkipNow()                          { f.skip("SkipNow") }

// run calls fn with a fakeTB wrapping t, and returns the message of its Fatal and of its Skip.
func run(t *testing.T, fn func(testing.TB)) (failed, skipped string) {
	t.Helper()
	f := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed, f.skipped
}

// Not parallel: it changes PATH.
func TestMissingRedis(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if redistest.Available() {
		t.Fatal("Available() = true with an empty PATH")
	}

	starts := map[string]func(testing.TB){
		"Start":         func(tb testing.TB) { redistest.Start(tb) },
		"StartCluster":  func(tb testing.TB) { redistest.StartCluster(tb) },
		"StartSentinel": func(tb testing.TB) { redistest.StartSentinel(tb) },
	}
	for name, start := range starts {
		t.Setenv("ADMIT_REQUIRE_REDIS", "")
		failed, skipped := run(t, start)
		if failed != "" || !strings.Contains(skipped, "redis-server not found: Redis tests SKIPPED") ||
			!strings.Contains(skipped, "apt-get install redis-server") {
			t.Errorf("%s without redis-server: failed %q, skipped %q; want a loud skip", name, failed, skipped)
		}

		t.Setenv("ADMIT_REQUIRE_REDIS", "1")
		failed, skipped = run(t, start)
		if skipped != "" || !strings.Contains(failed, "apt-get install redis-server") {
			t.Errorf("%s without redis-server, ADMIT_REQUIRE_REDIS=1: failed %q, skipped %q; want a failure with the install command", name, failed, skipped)
		}
	}
}

func TestStartBadArgs(t *testing.T) {
	t.Parallel()
	if !redistest.Available() {
		t.Skip("redis-server not found")
	}
	failed, _ := run(t, func(tb testing.TB) { redistest.Start(tb, "--no-such-directive", "x") })
	if !strings.Contains(failed, "no-such-directive") {
		t.Errorf("Start with a bad directive failed with %q; want the server's complaint quoted", failed)
	}
}

func TestRestartPortTaken(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	s.Kill(t)
	l, err := net.Listen("tcp", s.Addr())
	if err != nil {
		t.Skipf("port taken by someone else already: %v", err)
	}
	defer l.Close()
	failed, _ := run(t, func(tb testing.TB) { s.Restart(tb) })
	if !strings.Contains(failed, "port already in use") || !strings.Contains(failed, "Address already in use") {
		t.Errorf("Restart on a taken port failed with %q; want the port named as taken and the log quoted", failed)
	}
	l.Close()
	s.Restart(t)
	wantPong(t, s.Addr())
}

// Every server has the least-privilege user, with exactly ACLRules, again after a restart; the
// harness's own client is the unrestricted default user.
func TestLeastPrivilegeUser(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	check := func(t *testing.T) {
		t.Helper()
		c, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress: []string{s.Addr()}, Username: redistest.User, Password: redistest.Password,
			ForceSingleClient: true, DisableRetry: true, DisableCache: true,
		})
		if err != nil {
			t.Fatalf("log in as %s: %v", redistest.User, err)
		}
		defer c.Close()
		ctx := t.Context()
		if err := c.Do(ctx, c.B().Set().Key("rl:harness").Value("1").Build()).Error(); err != nil {
			t.Errorf("SET rl:harness as %s: %v", redistest.User, err)
		}
		for _, cmd := range [][]string{{"SET", "other", "1"}, {"FLUSHALL"}, {"EVAL", "return 1", "0"}, {"CONFIG", "GET", "save"}} {
			if err := c.Do(ctx, c.B().Arbitrary(cmd...).Build()).Error(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
				t.Errorf("%s as %s: %v, want NOPERM", strings.Join(cmd, " "), redistest.User, err)
			}
		}
		rules, err := s.Do(t, "ACL", "GETUSER", redistest.User).ToAny()
		if err != nil {
			t.Fatalf("ACL GETUSER %s: %v", redistest.User, err)
		}
		if got := fmt.Sprint(rules); !strings.Contains(got, "+zremrangebyscore") || strings.Contains(got, "+@all") {
			t.Errorf("ACL GETUSER %s = %s, want the rules of ACLRules", redistest.User, got)
		}
		if err := s.Do(t, "CONFIG", "GET", "save").Error(); err != nil {
			t.Errorf("CONFIG GET through Do: %v, want the unrestricted default user", err)
		}
	}
	check(t)
	s.Restart(t)
	check(t)
}
