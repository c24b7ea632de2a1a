package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/limittest"
)

// backend is a limittest.Backend on one harness-started redis-server.
type backend struct{ srv *redistest.Server }

func (b backend) Open(t *testing.T) admit.Store { return openPatient(t, b.srv.URL()) }

func (b backend) Sleep(t *testing.T, d time.Duration) { time.Sleep(d) }

// Now is Redis's TIME, the clock the scripts decide by: the backend is a limittest.ClockBackend.
func (b backend) Now(t *testing.T) time.Time { return redisNow(t, b.srv) }

func (b backend) Address() string { return b.srv.URL() }

func (b backend) OpenAddress(t *testing.T, url string) admit.Store { return openPatient(t, url) }

func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	limittest.TestStore(t, func(t *testing.T) limittest.Backend { return backend{srv} })
}

// open returns a Store on url, closed at cleanup.
func open(t testing.TB, url string) *Store {
	t.Helper()
	s, err := New(Config{URL: url})
	if err != nil {
		t.Fatalf("New(%q): %v", url, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// patientCommandTimeout is the command timeout of the conformance suite's Stores, on one server and
// on a cluster: the suite proves decisions, not deadlines (the fault tests do, with the default
// 200ms), and under -race on a loaded machine — six cluster servers, ShortWindows racing many
// goroutines — a call can take longer than DefaultCommandTimeout for want of CPU, not of correctness.
const patientCommandTimeout = 2 * time.Second

// openPatient returns a Store on url (one server or a cluster) with patientCommandTimeout as its
// command and dial timeouts, closed at cleanup: for tests of decisions and of what a preflight finds,
// never of deadlines.
func openPatient(t testing.TB, url string) *Store {
	t.Helper()
	s, err := New(Config{URL: url, CommandTimeout: patientCommandTimeout, DialTimeout: patientCommandTimeout})
	if err != nil {
		t.Fatalf("New(%q): %v", url, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newKey(t testing.TB) string {
	var b [6]byte
	rand.Read(b[:])
	return "rl:test:v1:{" + hex.EncodeToString(b[:]) + "}"
}

var threePerMinute = admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Minute}

func take(t testing.TB, s *Store, key string, lim admit.Limit, n int64) admit.Decision {
	t.Helper()
	d, err := s.Take(context.Background(), admit.Request{Key: key, Limit: lim, Cost: n})
	if err != nil {
		t.Fatalf("Take(%q, %v, %d): %v", key, lim, n, err)
	}
	return d
}

// state reads a key's raw string value and PTTL.
func state(t testing.TB, srv *redistest.Server, key string) (string, int64) {
	t.Helper()
	v, err := srv.Do(t, "GET", key).ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v, pttl(t, srv, key)
}

// pttl reads a key's PTTL, whatever its type.
func pttl(t testing.TB, srv *redistest.Server, key string) int64 {
	t.Helper()
	ttl, err := srv.Do(t, "PTTL", key).AsInt64()
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	return ttl
}

// The origin design's table, checked on the raw Redis state rather than through the API.
func TestCounterInRedis(t *testing.T) {
	srv := redistest.Start(t)
	s, peer := openPatient(t, srv.URL()), openPatient(t, srv.URL())
	key := newKey(t)

	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	start := make(chan struct{})
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			store := s
			if i%2 == 1 {
				store = peer
			}
			d, err := store.Take(context.Background(), admit.Request{Key: key, Limit: threePerMinute, Cost: 1})
			if err != nil {
				t.Errorf("Take: %v", err)
				return
			}
			if d.Allowed {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	if admitted != 3 {
		t.Fatalf("admitted %d of 40 across two stores, want 3", admitted)
	}
	v, ttl := state(t, srv, key)
	if v != "3" || ttl <= 0 || ttl > threePerMinute.Period.Milliseconds() {
		t.Fatalf("after 40 requests: value %q, PTTL %d; want \"3\" and 0 < PTTL <= %d", v, ttl, threePerMinute.Period.Milliseconds())
	}
}

// G2 (docs/guarantees.md): a rejection issues no write: no keyspace event, an identical DUMP, an unextended TTL.
func TestRejectionsAreReadOnly(t *testing.T) {
	srv := redistest.Start(t, "--notify-keyspace-events", "KA")
	s := openPatient(t, srv.URL())
	key := newKey(t)
	marker := key + ":marker"
	for range 3 {
		take(t, s, key, threePerMinute, 1)
	}
	dumpBefore, err := srv.Do(t, "DUMP", key).ToString()
	if err != nil {
		t.Fatal(err)
	}
	_, ttlBefore := state(t, srv, key)

	events := watchKeyspace(t, srv, key, marker)
	for range 50 {
		if d := take(t, s, key, threePerMinute, 1); d.Allowed {
			t.Fatal("a request over the limit was allowed")
		}
		take(t, s, key, threePerMinute, 0) // peeks write nothing either
	}
	if got := events.until(t, marker); len(got) != 0 {
		t.Fatalf("rejections and peeks caused keyspace events %v, want none", got)
	}
	dumpAfter, err := srv.Do(t, "DUMP", key).ToString()
	if err != nil {
		t.Fatal(err)
	}
	if dumpAfter != dumpBefore {
		t.Fatal("DUMP of the key changed after rejections")
	}
	if _, ttlAfter := state(t, srv, key); ttlAfter > ttlBefore {
		t.Fatalf("PTTL grew from %d to %d after rejections", ttlBefore, ttlAfter)
	}
}

// keyspaceWatch collects keyspace events for some keys until a marker key is written.
type keyspaceWatch struct {
	mu     sync.Mutex
	events []string
	marked chan struct{}
	srv    *redistest.Server
}

// watchKeyspace subscribes to keyspace events of key and marker, and returns once the
// subscription is known to be live (an event for marker has arrived).
func watchKeyspace(t *testing.T, srv *redistest.Server, key, marker string) *keyspaceWatch {
	t.Helper()
	return watchKeys(t, srv, marker, key)
}

// watchKeys subscribes to keyspace events of keys and marker, and returns once the subscription is
// known to be live (an event for marker has arrived).
func watchKeys(t *testing.T, srv *redistest.Server, marker string, keys ...string) *keyspaceWatch {
	t.Helper()
	channels := []string{"__keyspace@0__:" + marker}
	for _, k := range keys {
		channels = append(channels, "__keyspace@0__:"+k)
	}
	c := srv.Client(t)
	w := &keyspaceWatch{srv: srv, marked: make(chan struct{}, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		c.Receive(ctx, c.B().Subscribe().Channel(channels...).Build(),
			func(m rueidis.PubSubMessage) {
				if strings.HasSuffix(m.Channel, ":"+marker) {
					w.marked <- struct{}{}
					return
				}
				w.mu.Lock()
				w.events = append(w.events, m.Message)
				w.mu.Unlock()
			})
	}()
	// Write the marker until the subscription reports it.
	deadline := time.Now().Add(15 * time.Second)
	for {
		srv.Do(t, "SET", marker, "1", "PX", "60000")
		select {
		case <-w.marked:
			return w
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("keyspace subscription never became live")
		}
	}
}

// until writes the marker once more, waits for its event, and returns the key's events so far:
// Redis delivers notifications in order, so every event of the key before it has arrived.
func (w *keyspaceWatch) until(t *testing.T, marker string) []string {
	t.Helper()
	w.srv.Do(t, "SET", marker, "2", "PX", "60000")
	select {
	case <-w.marked:
	case <-time.After(5 * time.Second):
		t.Fatal("marker event never arrived")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.events...)
}

// G3 (docs/guarantees.md): state no script writes is an error, and it is left byte-for-byte unchanged.
func TestCorruptStateIsAnErrorAndLeftAlone(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	cases := []struct {
		name  string
		setup [][]string // commands that build the state; KEY stands for the key
	}{
		{"text", [][]string{{"SET", "KEY", "abc", "PX", "60000"}}},
		{"float", [][]string{{"SET", "KEY", "1.5", "PX", "60000"}}},
		{"negative", [][]string{{"SET", "KEY", "-3", "PX", "60000"}}},
		{"zero", [][]string{{"SET", "KEY", "0", "PX", "60000"}}},
		{"leading zero", [][]string{{"SET", "KEY", "01", "PX", "60000"}}},
		{"exponent", [][]string{{"SET", "KEY", "1e2", "PX", "60000"}}},
		{"20 digits", [][]string{{"SET", "KEY", "12345678901234567890", "PX", "60000"}}},
		{"above 10^15", [][]string{{"SET", "KEY", "1000000000000001", "PX", "60000"}}},
		{"empty", [][]string{{"SET", "KEY", "", "PX", "60000"}}},
		{"no expiry", [][]string{{"SET", "KEY", "1"}}},
		{"persisted", [][]string{{"SET", "KEY", "2", "PX", "60000"}, {"PERSIST", "KEY"}}},
		{"expiry beyond the window", [][]string{{"SET", "KEY", "1", "PX", "3600000"}}},
		{"list", [][]string{{"RPUSH", "KEY", "1"}, {"PEXPIRE", "KEY", "60000"}}},
		{"hash", [][]string{{"HSET", "KEY", "count", "1"}, {"PEXPIRE", "KEY", "60000"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := newKey(t)
			for _, cmd := range tc.setup {
				args := append([]string(nil), cmd...)
				for i := range args {
					if args[i] == "KEY" {
						args[i] = key
					}
				}
				if err := srv.Do(t, args...).Error(); err != nil {
					t.Fatalf("%v: %v", args, err)
				}
			}
			before, err := srv.Do(t, "DUMP", key).ToString()
			if err != nil {
				t.Fatal(err)
			}
			ttlBefore := pttl(t, srv, key)
			for _, n := range []int64{1, 0, 3} {
				d, err := s.Take(context.Background(), admit.Request{Key: key, Limit: threePerMinute, Cost: n})
				if !errors.Is(err, admit.ErrCorruptState) || !errors.Is(err, admit.ErrUnavailable) {
					t.Fatalf("Take(cost %d) = %+v, %v; want an error matching ErrCorruptState and ErrUnavailable", n, d, err)
				}
				if d.Allowed {
					t.Fatal("corrupt state was allowed")
				}
			}
			after, err := srv.Do(t, "DUMP", key).ToString()
			if err != nil {
				t.Fatal(err)
			}
			if after != before {
				t.Fatal("the corrupt key was changed")
			}
			if ttlAfter := pttl(t, srv, key); ttlAfter > ttlBefore || (ttlBefore == -1) != (ttlAfter == -1) {
				t.Fatalf("PTTL went from %d to %d", ttlBefore, ttlAfter)
			}
		})
	}
}

// fixedWindowArgv returns the take script's ARGV for one fixed-window policy of the given arguments
// (limit, window, cost, aligned), without an ID.
func fixedWindowArgv(args ...string) []string {
	return append([]string{"1", "", "", "fixed_window"}, args...)
}

// Defence in depth: arguments that slip past Go's validation are refused by the script before any write.
func TestScriptRefusesInvalidArguments(t *testing.T) {
	srv := redistest.Start(t, "--notify-keyspace-events", "KA")
	s := openPatient(t, srv.URL())
	key := newKey(t)
	marker := key + ":marker"
	events := watchKeyspace(t, srv, key, marker)
	cases := [][]string{
		{"0", "60000", "1", "0"},                 // limit 0
		{"1000000000000001", "60000", "1", "0"},  // limit above 10^15
		{"3", "0", "1", "0"},                     // window 0
		{"3", "31622400001", "1", "0"},           // window above 366 days
		{"3", "60000", "4", "0"},                 // cost above limit
		{"3", "60000", "-1", "0"},                // negative cost
		{"3", "1.5", "1", "0"},                   // not an integer
		{"3", "60000", "1e0", "0"},               // not a plain integer
		{"x", "60000", "1", "0"},                 // not a number
		{"3", "60000"},                           // missing arguments
		{"3", "60000", "1"},                      // missing the aligned flag
		{"3", "60000", "1", "2"},                 // aligned neither 0 nor 1
		{"3", "60000", "1", ""},                  // aligned empty
		{"3", "60000", "1", "true"},              // aligned not a digit
		{"3", "60000", "1", "01"},                // aligned padded
		{"3", "60000", " 1", "0"},                // padded
		{"03", "60000", "1", "0"},                // leading zero
		{"3", "60000", "0x1", "0"},               // hex
		{"3", "60000", "99999999999999999", "0"}, // 17 digits
	}
	for _, args := range cases {
		_, err := s.run(context.Background(), takeScript, []string{key}, fixedWindowArgv(args...))
		if !errors.Is(err, admit.ErrInvalidRequest) {
			t.Errorf("script with fixed_window ARGV %q: err = %v, want ErrInvalidRequest", args, err)
		}
	}
	for _, tc := range []struct {
		keys []string
		argv []string
	}{
		{[]string{key, key + "2"}, fixedWindowArgv("3", "60000", "1", "0")},                         // a key too many
		{[]string{key}, []string{"0", ""}},                                                          // no policy
		{[]string{key}, append([]string{"17", ""}, fixedWindowArgv("3", "60000", "1", "0")[2:]...)}, // too many policies
		{[]string{key}, []string{"1", "", "no_such_algorithm", "3", "60000", "1", "0"}},             // unknown algorithm
		{[]string{key}, append(fixedWindowArgv("3", "60000", "1", "0"), "1")},                       // an argument too many
		{[]string{key}, []string{"1", "not hex", "fixed_window", "3", "60000", "1", "0"}},           // bad fingerprint
		{[]string{key}, []string{"1", "abc123", "fixed_window", "3", "60000", "1", "0"}},            // an ID without its record key
	} {
		if _, err := s.run(context.Background(), takeScript, tc.keys, tc.argv); !errors.Is(err, admit.ErrInvalidRequest) {
			t.Errorf("script with KEYS %q, ARGV %q: err = %v, want ErrInvalidRequest", tc.keys, tc.argv, err)
		}
	}
	if got := events.until(t, marker); len(got) != 0 {
		t.Fatalf("refused calls caused keyspace events %v", got)
	}
	if n, _ := srv.Do(t, "EXISTS", key).AsInt64(); n != 0 {
		t.Fatal("a refused call created the key")
	}
}

// Go validates before any I/O: an invalid request fails even with no Redis at all.
func TestInvalidRequestNeedsNoRedis(t *testing.T) {
	s := open(t, "redis://"+redistest.ClosedPort(t))
	for _, tc := range []struct {
		key  string
		lim  admit.Limit
		n    int64
		want error
	}{
		{"", threePerMinute, 1, admit.ErrInvalidRequest},
		{strings.Repeat("k", bound.MaxKeyLen+1), threePerMinute, 1, admit.ErrInvalidRequest},
		{"k", threePerMinute, 4, admit.ErrInvalidRequest},
		{"k", admit.Limit{Algorithm: admit.FixedWindow, Rate: 0, Period: time.Second}, 1, admit.ErrInvalidLimit},
		{"k", admit.Limit{Rate: 3, Period: time.Second}, 1, admit.ErrInvalidLimit},
	} {
		if _, err := s.Take(context.Background(), admit.Request{Key: tc.key, Limit: tc.lim, Cost: tc.n}); !errors.Is(err, tc.want) || errors.Is(err, admit.ErrUnavailable) {
			t.Errorf("Take(%.10q, %v, %d) = %v, want %v", tc.key, tc.lim, tc.n, err, tc.want)
		}
	}
}

// After SCRIPT FLUSH the next decision loads the script again and counts once.
func TestScriptFlushIsRecovered(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	key := newKey(t)
	take(t, s, key, threePerMinute, 1)
	if err := srv.Do(t, "SCRIPT", "FLUSH").Error(); err != nil {
		t.Fatal(err)
	}
	if d := take(t, s, key, threePerMinute, 1); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("after SCRIPT FLUSH: %+v, want allowed with 1 remaining", d)
	}
	if v, _ := state(t, srv, key); v != "2" {
		t.Fatalf("counter %q after two admissions, want 2", v)
	}
}

// timeoutSlack bounds how far past its command timeout a failing decision may run. The guarantee
// is 50ms; the test allows more so a loaded CI machine under -race does not flake, and logs the
// real figure.
const timeoutSlack = 300 * time.Millisecond

// requireUnavailable checks that a decision on s fails with ErrUnavailable, never allowed, and
// within the command timeout plus slack.
func requireUnavailable(t *testing.T, s *Store, key string) {
	t.Helper()
	start := time.Now()
	d, err := s.Take(context.Background(), admit.Request{Key: key, Limit: threePerMinute, Cost: 1})
	checkUnavailable(t, d, err, time.Since(start))
}

// checkUnavailable is requireUnavailable's check of a Take that returned d and err after elapsed.
func checkUnavailable(t *testing.T, d admit.Decision, err error, elapsed time.Duration) {
	t.Helper()
	if !errors.Is(err, admit.ErrUnavailable) || d.Allowed {
		t.Fatalf("Take = %+v, %v; want an error matching ErrUnavailable", d, err)
	}
	if errors.Is(err, admit.ErrCorruptState) {
		t.Fatalf("Take = %v; an outage is not corrupt state", err)
	}
	if elapsed > DefaultCommandTimeout+timeoutSlack {
		t.Fatalf("failing decision took %v, want at most %v", elapsed, DefaultCommandTimeout+timeoutSlack)
	}
	t.Logf("unavailable after %v: %v", elapsed, err)
}

// G4, a closed port: nothing listens.
func TestClosedPortIsUnavailable(t *testing.T) {
	s := open(t, "redis://"+redistest.ClosedPort(t))
	for range 3 {
		requireUnavailable(t, s, newKey(t))
	}
}

// G4, a black hole: a listener that accepts and never answers.
func TestBlackHoleIsUnavailable(t *testing.T) {
	s := open(t, "redis://"+redistest.BlackHole(t))
	for range 3 {
		requireUnavailable(t, s, newKey(t))
	}
}

// G4 and G5: a frozen server answers nothing; after it resumes, decisions come back by themselves and the
// counter never shows more admissions than were answered allowed plus those that timed out.
func TestFrozenServer(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv.URL())
	key := newKey(t)
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 100, Period: time.Minute}
	take(t, s, key, lim, 1)
	srv.Freeze(t)
	timedOut := 0
	for range 3 {
		requireUnavailable(t, s, key)
		timedOut++
	}
	srv.Thaw(t)
	allowed := 1
	deadline := time.Now().Add(15 * time.Second)
	for {
		d, err := s.Take(context.Background(), admit.Request{Key: key, Limit: lim, Cost: 1})
		if err == nil {
			if d.Allowed {
				allowed++
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing 15s after the server resumed: %v", err)
		}
		timedOut++
		time.Sleep(10 * time.Millisecond)
	}
	if count := int(counter(t, srv, key)); count < allowed || count > allowed+timedOut {
		t.Fatalf("counter %d after %d allowed and %d timed-out decisions", counter(t, srv, key), allowed, timedOut)
	}
}

// G4 and G6: kill -9 and restart without persistence: unavailable during the outage, then decisions
// resume by themselves, scripts reloaded on NOSCRIPT.
func TestKilledAndRestartedServer(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv.URL())
	key := newKey(t)
	take(t, s, key, threePerMinute, 1)
	srv.Kill(t)
	requireUnavailable(t, s, key)
	srv.Restart(t)
	deadline := time.Now().Add(15 * time.Second)
	for {
		d, err := s.Take(context.Background(), admit.Request{Key: key, Limit: threePerMinute, Cost: 1})
		if err == nil {
			// The restart lost the counter: a new window starts, worth one extra allowance at most.
			if !d.Allowed || d.Remaining != 2 {
				t.Fatalf("first decision after restart: %+v, want a fresh window", d)
			}
			break
		}
		if !errors.Is(err, admit.ErrUnavailable) {
			t.Fatalf("during recovery: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing 15s after restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A Store made while Redis is down connects once it comes up.
func TestConnectsLazily(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop(t)
	s := open(t, srv.URL())
	requireUnavailable(t, s, newKey(t))
	srv.Restart(t)
	if err := s.Ping(context.Background()); err != nil {
		t.Fatalf("Ping after Redis came up: %v", err)
	}
	take(t, s, newKey(t), threePerMinute, 1)
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	take(t, s, newKey(t), threePerMinute, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Take(context.Background(), admit.Request{Key: newKey(t), Limit: threePerMinute, Cost: 1}); !errors.Is(err, admit.ErrUnavailable) {
		t.Fatalf("Take after Close: %v, want ErrUnavailable", err)
	}
}

// A decision made while Close is closing the client of a frozen server ends by its own deadline:
// Close holds no lock that a decision waits for.
func TestCloseDoesNotHoldUpDecisions(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv.URL())
	take(t, s, newKey(t), threePerMinute, 1) // connected
	srv.Freeze(t)
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	time.Sleep(20 * time.Millisecond) // let Close start on the frozen connections

	const budget = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	start := time.Now()
	d, err := s.Take(ctx, admit.Request{Key: newKey(t), Limit: threePerMinute, Cost: 1})
	elapsed := time.Since(start)
	if !errors.Is(err, admit.ErrUnavailable) || d.Allowed {
		t.Fatalf("Take during Close = %+v, %v; want ErrUnavailable", d, err)
	}
	if elapsed > budget+timeoutSlack {
		t.Fatalf("Take during Close took %v; its deadline was %v", elapsed, budget)
	}
	t.Logf("Take during Close failed after %v: %v", elapsed, err)
	srv.Thaw(t)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return 10s after the server thawed")
	}
}

func TestBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{URL: "http://127.0.0.1:6379"},
		{URL: "redis://127.0.0.1:6379", DialTimeout: -1},
		{URL: "redis://127.0.0.1:6379", CommandTimeout: -1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded, want an error", cfg)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for _, bad := range []string{
		"redis://user:s3cret@127.0.0.1:6379/notanumber", // rueidis refuses it
		"redis://user:s3cret@127.0.0.1:port",            // url.Parse refuses it
		"redis://user:s3cret@[::1",                      // url.Parse refuses it
	} {
		_, err := New(Config{URL: bad})
		if err == nil {
			t.Fatalf("New(%q) succeeded", bad)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("error leaks the password: %v", err)
		}
	}
	for in, want := range map[string]string{
		"redis://127.0.0.1:6379":                   "redis://127.0.0.1:6379",
		"redis://user:pw@127.0.0.1:6379/2":         "redis://xxxxx@127.0.0.1:6379/2",
		"rediss://:pw@h:6380":                      "rediss://xxxxx@h:6380",
		"redis://pw@h:1?master_set=m&addr=h2:1":    "redis://xxxxx@h:1?master_set=m&addr=h2:1",
		"redis://u:p%40ss@h:1":                     "redis://xxxxx@h:1",
		"redis://admin:hunter2@[::1":               "(unparseable URL)",
		"redis://[::1]:6379":                       "redis://[::1]:6379",
		"redis://user:pw@h:1/0?client_name=admit1": "redis://xxxxx@h:1/0?client_name=admit1",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// G4: out of memory with noeviction: a decision that must write fails as unavailable and changes
// nothing; decisions that only read still work; once memory is available, admissions resume.
func TestOutOfMemory(t *testing.T) {
	srv := redistest.Start(t, "--maxmemory-policy", "noeviction")
	s := openPatient(t, srv.URL())
	full := newKey(t)
	for range 3 {
		take(t, s, full, threePerMinute, 1)
	}
	// 2 MiB of ballast, then a 1 MiB limit: Redis refuses every write until the ballast is gone.
	ballast := strings.Repeat("x", 64<<10)
	for i := range 32 {
		if err := srv.Do(t, "SET", "ballast:"+strconv.Itoa(i), ballast).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Do(t, "CONFIG", "SET", "maxmemory", "1mb").Error(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Do(t, "SET", "probe", "1").Error(); err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("a write with the ballast in place: %v, want OOM", err)
	}
	fresh := newKey(t)
	if _, err := s.Take(context.Background(), admit.Request{Key: fresh, Limit: threePerMinute, Cost: 1}); !errors.Is(err, admit.ErrUnavailable) {
		t.Fatalf("Take of a new key out of memory: %v, want ErrUnavailable", err)
	}
	if n, _ := srv.Do(t, "EXISTS", fresh).AsInt64(); n != 0 {
		t.Fatal("a failed decision created its key")
	}
	// A rejection writes nothing, so it is still decided.
	if d := take(t, s, full, threePerMinute, 1); d.Allowed {
		t.Fatal("a full key admitted a request out of memory")
	}
	// Memory becomes available again (the limit goes back up).
	if err := srv.Do(t, "CONFIG", "SET", "maxmemory", "0").Error(); err != nil {
		t.Fatal(err)
	}
	if d := take(t, s, fresh, threePerMinute, 1); !d.Allowed {
		t.Fatalf("after memory was freed: %+v", d)
	}
}

// G4: a script busy on the server (BUSY) makes decisions fail as unavailable within the command
// timeout; they succeed again once it is killed.
func TestBusyServer(t *testing.T) {
	srv := redistest.Start(t, "--busy-reply-threshold", "50")
	s := open(t, srv.URL())
	key := newKey(t)
	take(t, s, key, threePerMinute, 1)

	busy := srv.Client(t)
	running := make(chan error, 1)
	go func() {
		// A read-only endless loop, which SCRIPT KILL may stop.
		running <- busy.Do(context.Background(), busy.B().Eval().Script("while true do end").Numkeys(0).Build()).Error()
	}()
	// Wait until the server reports BUSY.
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := srv.Do(t, "PING").Error()
		if err != nil && strings.HasPrefix(err.Error(), "BUSY") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server never became busy: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	requireUnavailable(t, s, key)
	if err := srv.Do(t, "SCRIPT", "KILL").Error(); err != nil {
		t.Fatalf("SCRIPT KILL: %v", err)
	}
	<-running
	if d := take(t, s, key, threePerMinute, 1); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("after the busy script ended: %+v, want allowed with 1 remaining", d)
	}
}

// G4: decisions against a black hole leave no goroutine behind once the Store is closed, and
// none of them waits past its timeout.
func TestNoGoroutineOutlivesTheStore(t *testing.T) {
	for name, url := range map[string]string{
		"black hole": "redis://" + redistest.BlackHole(t),
		"healthy":    redistest.Start(t).URL(),
	} {
		t.Run(name, func(t *testing.T) {
			baseline := runtime.NumGoroutine()
			s, err := New(Config{URL: url})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for range 50 {
				wg.Go(func() {
					d, err := s.Take(context.Background(), admit.Request{Key: newKey(t), Limit: threePerMinute, Cost: 1})
					if err != nil && !errors.Is(err, admit.ErrUnavailable) || err == nil && !d.Allowed {
						t.Errorf("Take = %+v, %v", d, err)
					}
				})
			}
			wg.Wait()
			s.Close()
			requireGoroutinesBack(t, "after Close", baseline)
		})
	}
}
