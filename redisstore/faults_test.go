package redisstore

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
)

// G5 (docs/guarantees.md): network faults injected by a TCP proxy between the Store and a real redis-server. A
// script call is never sent twice, so a failure after the request was sent consumes at most one
// unit, and a failed decision never admits.

// keepAliveGap is how long a rueidis connection may go without a reply before rueidis PINGs it (the
// dialer's keep-alive, 1s by default). A one-shot fault applies to the next chunk any client sends:
// a test arms one within this long of connecting, so that it lands on the script call it targets,
// not on a keep-alive PING.
const keepAliveGap = time.Second

// behindProxy starts a redis-server, a proxy in front of it and a Store on the proxy, and opens
// every connection the Store multiplexes over (each script call picks one at random) with peeks on a
// scratch key, so that a fault armed next meets a script call rather than a handshake. It returns
// the time the first connection was made.
func behindProxy(t *testing.T) (*redistest.Server, *redistest.Proxy, *Store, time.Time) {
	t.Helper()
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	s := open(t, proxy.URL())
	connected := time.Now()
	scratch := newKey(t)
	// Setup, with patience: the first peeks dial and load the script through the proxy, which a
	// loaded machine may take longer than the command timeout to do (a CI run beside other jobs).
	for i, deadline := 0, time.Now().Add(time.Minute); i < 64; {
		_, err := s.Take(context.Background(), admit.Request{Key: scratch, Limit: threePerMinute})
		switch {
		case err == nil:
			i++
		case !errors.Is(err, admit.ErrUnavailable) || time.Now().After(deadline):
			t.Fatalf("a peek before any fault: %v", err)
		}
	}
	t.Logf("the Store holds %d connection(s) to Redis", storeConns(t, srv))
	return srv, proxy, s, connected
}

// storeConns counts the server's clients other than the harness's own.
func storeConns(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	list, err := srv.Do(t, "CLIENT", "LIST").ToString()
	if err != nil {
		t.Fatalf("CLIENT LIST: %v", err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if !strings.Contains(line, "cmd=client|list") {
			n++
		}
	}
	return n
}

// noKeepAlive reports whether a fault armed after connected cannot have met a keep-alive PING: the
// faulty call ended less than keepAliveGap after the Store connected. When it did not, only a
// loaded machine was too slow to tell, and the test starts again (see faultAttempts).
func noKeepAlive(t *testing.T, connected time.Time) bool {
	t.Helper()
	if elapsed := time.Since(connected); elapsed >= keepAliveGap {
		t.Logf("the faulty call ended %v after the Store connected: a keep-alive PING may have taken the fault", elapsed)
		return false
	}
	return true
}

// faultAttempts runs attempt, a whole test on a server, proxy and Store of its own, until it
// returns true, or fails t after 5 attempts: attempt returns false, before checking anything, when
// the machine was too slow to tell what its fault hit (noKeepAlive).
func faultAttempts(t *testing.T, attempt func() bool) {
	t.Helper()
	const attempts = 5
	for i := 1; i <= attempts; i++ {
		if attempt() {
			return
		}
		t.Logf("attempt %d of %d abandoned; starting again", i, attempts)
	}
	t.Fatalf("in %d attempts the faulty call never ended within %v of the Store connecting: the machine is too slow to tell which call took the fault", attempts, keepAliveGap)
}

// counter reads a fixed-window counter directly from the server, not through the proxy; 0 if absent.
func counter(t *testing.T, srv *redistest.Server, key string) int64 {
	t.Helper()
	v, _ := state(t, srv, key)
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("counter %q: %v", v, err)
	}
	return n
}

// The reply to a script call is lost after the script ran: the decision fails, the script is not
// sent again (the counter shows exactly one more unit), and the Store reconnects by itself.
func TestLostReplyIsNotRetried(t *testing.T) {
	faultAttempts(t, func() bool {
		srv, proxy, s, connected := behindProxy(t)
		key := newKey(t)
		if d := take(t, s, key, threePerMinute, 1); !d.Allowed || d.Remaining != 2 {
			t.Fatalf("first decision: %+v, want allowed with 2 remaining", d)
		}
		proxy.LoseNextReply()
		start := time.Now()
		d, err := s.Take(context.Background(), admit.Request{Key: key, Limit: threePerMinute, Cost: 1})
		elapsed := time.Since(start)
		if !noKeepAlive(t, connected) {
			return false
		}
		// The counter first: it tells how often the script ran, whatever Take said.
		if n := counter(t, srv, key); n != 2 {
			t.Fatalf("counter %d after one admission and one call whose reply was lost, want 2: that call ran the script %d times (and returned %+v, %v)", n, n-1, d, err)
		}
		if !errors.Is(err, admit.ErrUnavailable) || errors.Is(err, admit.ErrCorruptState) || d.Allowed {
			t.Fatalf("Take with its reply lost = %+v, %v; want an error matching ErrUnavailable", d, err)
		}
		if elapsed > DefaultCommandTimeout+timeoutSlack {
			t.Fatalf("failing decision took %v, want at most %v", elapsed, DefaultCommandTimeout+timeoutSlack)
		}
		t.Logf("reply lost: unavailable after %v: %v", elapsed, err)
		if d := take(t, s, key, threePerMinute, 1); !d.Allowed || d.Remaining != 0 {
			t.Fatalf("decision after the lost reply: %+v, want allowed with 0 remaining", d)
		}
		if n := counter(t, srv, key); n != 3 {
			t.Fatalf("counter %d, want 3", n)
		}
		return true
	})
}

// A request dropped before it reaches Redis fails and consumes nothing.
func TestDroppedRequestConsumesNothing(t *testing.T) {
	faultAttempts(t, func() bool {
		srv, proxy, s, connected := behindProxy(t)
		key := newKey(t)
		take(t, s, key, threePerMinute, 1)
		proxy.DropNextRequest()
		start := time.Now()
		d, err := s.Take(context.Background(), admit.Request{Key: key, Limit: threePerMinute, Cost: 1})
		elapsed := time.Since(start)
		if !noKeepAlive(t, connected) {
			return false
		}
		checkUnavailable(t, d, err, elapsed)
		if n := counter(t, srv, key); n != 1 {
			t.Fatalf("counter %d after one admission and one dropped request, want 1", n)
		}
		if d := take(t, s, key, threePerMinute, 1); !d.Allowed || d.Remaining != 1 {
			t.Fatalf("decision after the dropped request: %+v, want allowed with 1 remaining", d)
		}
		return true
	})
}

// Replies slower than the command timeout: decisions fail in time, each consumes at most one unit,
// and once the latency is gone decisions come back by themselves, matching the counter (no late
// reply is taken for a later call's).
func TestLatencyAboveTimeout(t *testing.T) {
	srv, proxy, s, _ := behindProxy(t)
	key := newKey(t)
	take(t, s, key, threePerMinute, 1)
	before := counter(t, srv, key)
	proxy.SetLatency(2 * DefaultCommandTimeout)
	timedOut := int64(0)
	for range 2 {
		requireUnavailable(t, s, key)
		timedOut++
	}
	proxy.SetLatency(0)
	var d admit.Decision
	deadline := time.Now().Add(15 * time.Second)
	for {
		var err error
		d, err = s.Take(context.Background(), admit.Request{Key: key, Limit: threePerMinute, Cost: 1})
		if err == nil {
			break
		}
		if !errors.Is(err, admit.ErrUnavailable) {
			t.Fatalf("during recovery: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing 15s after the latency went: %v", err)
		}
		timedOut++
		time.Sleep(10 * time.Millisecond)
	}
	after := counter(t, srv, key)
	admitted := int64(0)
	if d.Allowed {
		admitted = 1
	}
	if extra := after - before - admitted; extra < 0 || extra > timedOut {
		t.Fatalf("counter went from %d to %d with %d admitted and %d failed decisions", before, after, admitted, timedOut)
	}
	if d.Remaining != threePerMinute.Rate-after {
		t.Fatalf("decision after recovery %+v does not match the counter %d", d, after)
	}
	t.Logf("counter %d -> %d: %d admitted, %d timed out", before, after, admitted, timedOut)
}

// Replies slower than usual but within the command timeout: decisions are exact.
func TestLatencyBelowTimeout(t *testing.T) {
	srv, proxy, s, _ := behindProxy(t)
	key := newKey(t)
	proxy.SetLatency(DefaultCommandTimeout / 4)
	for i, want := range []bool{true, true, true, false} {
		start := time.Now()
		d := take(t, s, key, threePerMinute, 1)
		if elapsed := time.Since(start); elapsed < DefaultCommandTimeout/4 {
			t.Fatalf("decision %d took %v, less than the latency", i+1, elapsed)
		}
		if d.Allowed != want || d.Remaining != max(0, 2-int64(i)) {
			t.Fatalf("decision %d: %+v, want allowed=%v with %d remaining", i+1, d, want, max(0, 2-int64(i)))
		}
	}
	if n := counter(t, srv, key); n != 3 {
		t.Fatalf("counter %d, want 3", n)
	}
}

// hangGuard is how long any one decision under a fault may take before the suite calls it a hang.
// The guarantee is the command timeout + 50ms; the suite logs the real figure and asserts only this.
const hangGuard = 2 * time.Second

// suiteLimit is high enough that a fault suite's key is never full: every decision that does not
// fail must admit.
var suiteLimit = admit.Limit{Algorithm: admit.FixedWindow, Rate: 1000, Period: time.Minute}

// A proxyFault is one fault of the suite, injected by the proxy in front of Redis.
type proxyFault struct {
	name string
	// arm injects the fault; clear, if not nil, removes it (a one-shot fault removes itself).
	arm, clear func(p *redistest.Proxy)
	// oneShot: the fault hits the next call alone, which must fail, and ran that call's script
	// ran times (0 or 1).
	oneShot bool
	ran     int64
	// outcome during the fault: every decision fails, every decision is exact, or either.
	outcome faultOutcome
	// hold is how long decisions go on under the fault, at least.
	hold time.Duration
}

type faultOutcome int

const (
	eitherOutcome faultOutcome = iota
	alwaysFails
	alwaysDecides
)

var proxyFaults = []proxyFault{
	{name: "reset before the request", arm: (*redistest.Proxy).DropNextRequest, oneShot: true, ran: 0},
	{name: "reply lost", arm: (*redistest.Proxy).LoseNextReply, oneShot: true, ran: 1},
	{name: "reset after the request", arm: (*redistest.Proxy).ResetAfterNextRequest, oneShot: true, ran: 1},
	{name: "truncated reply", arm: (*redistest.Proxy).TruncateNextReply, oneShot: true, ran: 1},
	{
		name:    "latency below the timeout",
		arm:     func(p *redistest.Proxy) { p.SetLatency(DefaultCommandTimeout / 4) },
		clear:   func(p *redistest.Proxy) { p.SetLatency(0) },
		outcome: alwaysDecides,
	},
	{
		name:    "latency above the timeout",
		arm:     func(p *redistest.Proxy) { p.SetLatency(2 * DefaultCommandTimeout) },
		clear:   func(p *redistest.Proxy) { p.SetLatency(0) },
		outcome: alwaysFails,
	},
	{
		name:    "jitter below the timeout",
		arm:     func(p *redistest.Proxy) { p.SetJitter(0, DefaultCommandTimeout/3) },
		clear:   func(p *redistest.Proxy) { p.SetJitter(0, 0) },
		outcome: alwaysDecides,
	},
	{
		name:    "jitter across the timeout",
		arm:     func(p *redistest.Proxy) { p.SetJitter(DefaultCommandTimeout/2, 2*DefaultCommandTimeout) },
		clear:   func(p *redistest.Proxy) { p.SetJitter(0, 0) },
		outcome: eitherOutcome,
	},
	{
		name:    "1-byte slices",
		arm:     func(p *redistest.Proxy) { p.SetSlice(1) },
		clear:   func(p *redistest.Proxy) { p.SetSlice(0) },
		outcome: alwaysDecides,
	},
	{
		name:    "1-byte slices and jitter",
		arm:     func(p *redistest.Proxy) { p.SetSlice(1); p.SetJitter(0, DefaultCommandTimeout/3) },
		clear:   func(p *redistest.Proxy) { p.SetSlice(0); p.SetJitter(0, 0) },
		outcome: alwaysDecides,
	},
	{
		// Longer than connIdleTimeout, so that the client gives its silent connections up.
		name:    "half-open",
		arm:     func(p *redistest.Proxy) { p.SetHalfOpen(true) },
		clear:   func(p *redistest.Proxy) { p.SetHalfOpen(false) },
		outcome: alwaysFails,
		hold:    connIdleTimeout(DefaultCommandTimeout) * 3 / 2,
	},
}

// TestFaultSuite (G4, G5) runs decisions on one key through each fault of the proxy, against a
// real redis-server, and checks: each decision is exact (allowed, its remaining matching the counter
// read in Redis) or fails with ErrUnavailable, never admitting; none hangs; the counter holds every
// admission and at most one unit per failed decision (exactly the script runs of a one-shot fault);
// the Store recovers by itself once the fault is removed; and no goroutine outlives the subtest.
func TestFaultSuite(t *testing.T) {
	for _, f := range proxyFaults {
		baseline := runtime.NumGoroutine()
		t.Run(f.name, func(t *testing.T) { runProxyFault(t, f) })
		requireGoroutinesBack(t, f.name, baseline)
	}
}

// faultTally counts a key's decisions and checks each against the counter in Redis.
type faultTally struct {
	t                    *testing.T
	srv                  *redistest.Server
	s                    *Store
	key                  string
	admitted, failed     int64
	slowestFail, slowest time.Duration
}

// decide makes one decision and checks it; it reports whether it was decided.
func (ft *faultTally) decide() bool {
	t := ft.t
	t.Helper()
	start := time.Now()
	d, err := ft.s.Take(context.Background(), admit.Request{Key: ft.key, Limit: suiteLimit, Cost: 1})
	elapsed := time.Since(start)
	ft.slowest = max(ft.slowest, elapsed)
	if elapsed > hangGuard {
		t.Fatalf("a decision took %v (%+v, %v): a hang", elapsed, d, err)
	}
	if err != nil {
		if !errors.Is(err, admit.ErrUnavailable) || errors.Is(err, admit.ErrCorruptState) || d.Allowed {
			t.Fatalf("Take = %+v, %v; want a decision or an error matching ErrUnavailable", d, err)
		}
		ft.failed++
		ft.slowestFail = max(ft.slowestFail, elapsed)
		return false
	}
	ft.admitted++
	n := counter(t, ft.srv, ft.key)
	if !d.Allowed || d.Remaining != suiteLimit.Rate-n {
		t.Fatalf("decision %+v with the counter at %d: want allowed with %d remaining", d, n, suiteLimit.Rate-n)
	}
	if n < ft.admitted || n > ft.admitted+ft.failed {
		t.Fatalf("counter %d after %d admitted and %d failed decisions", n, ft.admitted, ft.failed)
	}
	return true
}

func runProxyFault(t *testing.T, f proxyFault) {
	if f.oneShot {
		faultAttempts(t, func() bool { return runProxyFaultOnce(t, f) })
		return
	}
	runProxyFaultOnce(t, f)
}

// runProxyFaultOnce is runProxyFault on a server, proxy and Store of its own; it returns false when
// a one-shot fault may have met a keep-alive PING (noKeepAlive), before checking what it did.
func runProxyFaultOnce(t *testing.T, f proxyFault) bool {
	srv, proxy, s, connected := behindProxy(t)
	ft := &faultTally{t: t, srv: srv, s: s, key: newKey(t)}
	if !ft.decide() {
		t.Fatal("the first decision, before any fault, failed")
	}
	f.arm(proxy)
	if f.oneShot {
		decided := ft.decide()
		if !noKeepAlive(t, connected) {
			return false
		}
		if decided {
			t.Fatal("the call that met a one-shot fault was decided")
		}
		if n := counter(t, srv, ft.key); n != 1+f.ran {
			t.Fatalf("counter %d after one admission and a faulty call, want %d: the script ran %d times", n, 1+f.ran, n-1)
		}
	} else {
		start := time.Now()
		for i := 0; i < 5 || time.Since(start) < f.hold; i++ {
			decided := ft.decide()
			switch {
			case f.outcome == alwaysFails && decided:
				t.Fatalf("decision %d was decided under the fault", i+1)
			case f.outcome == alwaysDecides && !decided:
				t.Fatalf("decision %d failed under a fault it should ride out", i+1)
			}
		}
		f.clear(proxy)
	}
	during := ft.failed
	t.Logf("under the fault: %d admitted, %d failed; slowest decision %v, slowest failure %v (command timeout %v)",
		ft.admitted, ft.failed, ft.slowest, ft.slowestFail, DefaultCommandTimeout)

	// Recovery by itself: decided within 10s (a hang guard; it takes milliseconds), then every
	// decision exact.
	deadline := time.Now().Add(10 * time.Second)
	for !ft.decide() {
		if time.Now().After(deadline) {
			t.Fatal("still failing 10s after the fault was removed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := range 3 {
		if !ft.decide() {
			t.Fatalf("decision %d after recovery failed", i+1)
		}
	}
	n := counter(t, srv, ft.key)
	t.Logf("recovered after %d more failure(s); counter %d = %d admitted + %d unit(s) of %d failed decisions",
		ft.failed-during, n, ft.admitted, n-ft.admitted, ft.failed)
	return true
}

// requireGoroutinesBack waits up to 5s for the number of goroutines to fall back to baseline.
func requireGoroutinesBack(t *testing.T, what string, baseline int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%s: %d goroutines 15s after the subtest, %d before:\n%s",
				what, runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
