package guard_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/guard"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/limittest"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/redisstore"
)

// newFailOpenClock returns a fake clock for the local limiter.
func newFailOpenClock() *limittest.Clock {
	return limittest.NewClock(time.Date(2026, 3, 1, 12, 0, 7, 250_000_000, time.UTC))
}

// halfOf fails every Limit open, with half its Rate (at least 1) as the local limit.
func halfOf(lim admit.Limit) (int64, bool) { return max(1, lim.Rate/2), true }

// localLimits returns a FailOpenOptions.Local that fails open the policies named in limits, with
// their local limits, and every other closed.
func localLimits(limits map[string]int64) func(admit.Limit) (int64, bool) {
	return func(lim admit.Limit) (int64, bool) {
		n, ok := limits[lim.Name]
		return n, ok
	}
}

// deadRedis returns a redisstore.Store on a closed port: every decision fails with
// admit.ErrUnavailable, for real.
func deadRedis(t *testing.T) *redisstore.Store {
	t.Helper()
	return openRedis(t, "redis://"+redistest.ClosedPort(t))
}

// openRedis returns a redisstore.Store on url, closed at t's cleanup. Its timeouts are patient (2 s):
// the tests fail Redis by killing it or by a closed port, which refuse at once, and a loaded
// machine's slow reply must not pass for an outage.
func openRedis(t *testing.T, url string) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(redisstore.Config{URL: url, CommandTimeout: 2 * time.Second, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newFailOpen returns a FailOpen over next, closed at t's cleanup.
func newFailOpen(t *testing.T, next admit.Store, opts guard.FailOpenOptions) *guard.FailOpen {
	f := guard.NewFailOpen(next, opts)
	t.Cleanup(f.Close)
	return f
}

// backend is a limittest.Backend of a FailOpen over a memstore on a fake clock.
type backend struct {
	clock *limittest.Clock
	store admit.Store
}

func (b *backend) Open(t *testing.T) admit.Store       { return b.store }
func (b *backend) Now(t *testing.T) time.Time          { return b.clock.Now() }
func (b *backend) Sleep(t *testing.T, d time.Duration) { b.clock.Advance(d) }

// TestFailOpenConformance: while the backend decides, a FailOpen is the backend — it passes the whole
// suite over a memstore, with every Limit failing open.
func TestFailOpenConformance(t *testing.T) {
	limittest.TestStore(t, func(t *testing.T) limittest.Backend {
		clock := newFailOpenClock()
		s := memstore.New(memstore.Options{Now: clock.Now})
		t.Cleanup(func() { s.Close() })
		return &backend{clock: clock, store: newFailOpen(t, s, guard.FailOpenOptions{Local: halfOf, Now: clock.Now})}
	})
}

// mustTake decides r on s and fails t on an error.
func mustTake(t *testing.T, s admit.Store, r admit.Request) admit.Decision {
	t.Helper()
	d, err := s.Take(t.Context(), r)
	if err != nil {
		t.Fatalf("Take(%v): %v", r.Limit, err)
	}
	return d
}

// TestFailOpenClosedPort: with Redis unreachable, a policy with a local limit of 4 admits 4 per
// window, each Decision degraded and under the local Limit; the next window admits 4 again.
func TestFailOpenClosedPort(t *testing.T) {
	clock := newFailOpenClock()
	lim := admit.Limit{Name: "api", Algorithm: admit.FixedWindow, Rate: 100, Period: time.Minute}
	f := newFailOpen(t, deadRedis(t), guard.FailOpenOptions{Local: localLimits(map[string]int64{"api": 4}), Now: clock.Now})
	r := admit.Request{Key: "rl:api:v1:{alice}", Limit: lim, Cost: 1}
	for window := range 2 {
		admitted := 0
		for range 10 {
			d := mustTake(t, f, r)
			if !d.Degraded {
				t.Fatalf("window %d: a Decision with Redis unreachable is not Degraded: %+v", window, d)
			}
			if d.Limit.Rate != 4 || d.Limit.Name != "api" {
				t.Errorf("window %d: Decision.Limit = %v; want the local Limit, api at 4 per minute", window, d.Limit)
			}
			if d.Allowed {
				admitted++
			} else if d.RetryAfter <= 0 || d.RetryAfter > lim.Period {
				t.Errorf("window %d: a local rejection with RetryAfter %v; want 0 < RetryAfter ≤ %v", window, d.RetryAfter, lim.Period)
			}
		}
		if admitted != 4 {
			t.Errorf("window %d: %d of 10 admitted; want the local limit, 4", window, admitted)
		}
		clock.Advance(lim.Period)
	}
}

// TestFailOpenFailsClosed: with Redis unreachable, every case that must not fail open returns Redis's
// error, and consumes nothing locally.
func TestFailOpenFailsClosed(t *testing.T) {
	clock := newFailOpenClock()
	open := admit.Limit{Name: "open", Algorithm: admit.FixedWindow, Rate: 10, Period: time.Minute}
	closed := admit.Limit{Name: "closed", Algorithm: admit.FixedWindow, Rate: 10, Period: time.Minute}
	f := newFailOpen(t, deadRedis(t), guard.FailOpenOptions{Local: localLimits(map[string]int64{"open": 2}), Now: clock.Now})
	openReq := admit.Request{Key: "rl:open:v1:{bob}", Limit: open, Cost: 1}
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	cases := []struct {
		name string
		ctx  context.Context
		rs   []admit.Request
	}{
		{"no local limit", t.Context(), []admit.Request{{Key: "rl:closed:v1:{bob}", Limit: closed, Cost: 1}}},
		{"one of two without a local limit", t.Context(), []admit.Request{openReq, {Key: "rl:closed:v1:{bob}", Limit: closed, Cost: 1}}},
		{"cost above the local limit", t.Context(), []admit.Request{{Key: openReq.Key, Limit: open, Cost: 3}}},
		{"the caller's context is done", canceled, []admit.Request{openReq}},
		{"local limit above the rate", t.Context(), []admit.Request{{Key: "rl:big:v1:{bob}", Limit: admit.Limit{Name: "open", Algorithm: admit.FixedWindow, Rate: 1, Period: time.Minute}, Cost: 1}}},
		// The local limiter has no replica to confirm an admission: a replicated Limit fails closed.
		{"replicated", t.Context(), []admit.Request{openReq, {Key: "rl:open:v1:{bob}:r", Limit: admit.Limit{Name: "open", Algorithm: admit.FixedWindow, Rate: 10, Period: time.Minute, Replicas: 1}, Cost: 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ds := make([]admit.Decision, len(c.rs))
			allowed, err := f.TakeAll(c.ctx, c.rs, ds)
			if !errors.Is(err, admit.ErrUnavailable) || allowed {
				t.Fatalf("TakeAll = %v, %v; want an error matching admit.ErrUnavailable", allowed, err)
			}
		})
	}
	// Nothing above consumed the open policy's key: its local limit is all there.
	for i := range 2 {
		if d := mustTake(t, f, openReq); !d.Allowed || !d.Degraded {
			t.Errorf("request %d on the open policy after the closed cases: %+v; want allowed, degraded", i, d)
		}
	}
}

// TestFailOpenCorruptStateStaysClosed: corrupt state is one key's error, not an outage (G3 of docs/guarantees.md): it is
// returned as it is, and the local limiter decides nothing.
func TestFailOpenCorruptStateStaysClosed(t *testing.T) {
	srv := redistest.Start(t)
	f := newFailOpen(t, openRedis(t, srv.URL()), guard.FailOpenOptions{Local: halfOf})
	key := "rl:corrupt:v1:{carol}"
	srv.Do(t, "SET", key, "abc", "PX", "60000")
	lim := admit.Limit{Name: "corrupt", Algorithm: admit.FixedWindow, Rate: 10, Period: time.Minute}
	d, err := f.Take(t.Context(), admit.Request{Key: key, Limit: lim, Cost: 1})
	if !errors.Is(err, admit.ErrCorruptState) {
		t.Fatalf("Take on corrupt state = %+v, %v; want an error matching admit.ErrCorruptState", d, err)
	}
	if got := srv.Do(t, "GET", key); mustString(t, got) != "abc" {
		t.Errorf("the corrupt key now holds %q; want it unchanged", mustString(t, got))
	}
}

// mustString returns the string of a Redis reply.
func mustString(t *testing.T, r interface{ ToString() (string, error) }) string {
	t.Helper()
	s, err := r.ToString()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFailOpenKilledRedis: before Redis dies, decisions are Redis's (not degraded, counted in Redis); while it
// is dead, they are the local limiter's (degraded, bounded by the local limit, not in Redis); once it
// is back, they are Redis's again.
func TestFailOpenKilledRedis(t *testing.T) {
	srv := redistest.Start(t)
	f := newFailOpen(t, openRedis(t, srv.URL()), guard.FailOpenOptions{Local: localLimits(map[string]int64{"kill": 2})})
	lim := admit.Limit{Name: "kill", Algorithm: admit.FixedWindow, Rate: 10, Period: time.Minute}
	r := admit.Request{Key: "rl:kill:v1:{dave}", Limit: lim, Cost: 1}
	for i := range 3 {
		if d := mustTake(t, f, r); !d.Allowed || d.Degraded || d.Limit != lim {
			t.Fatalf("request %d with Redis up: %+v; want allowed by Redis, not degraded", i, d)
		}
	}
	if n := mustString(t, srv.Do(t, "GET", r.Key)); n != "3" {
		t.Fatalf("Redis counts %s; want 3", n)
	}

	srv.Kill(t)
	admitted := 0
	for i := range 6 {
		d := mustTake(t, f, r)
		if !d.Degraded {
			t.Fatalf("request %d with Redis killed: %+v; want degraded", i, d)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != 2 {
		t.Errorf("Redis killed: %d of 6 admitted; want the local limit, 2", admitted)
	}

	srv.Restart(t)
	var d admit.Decision
	// The client may fail once on its dead connection before it reconnects; a loaded machine may
	// take a while (a hang guard of 15 s).
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if d = mustTake(t, f, r); !d.Degraded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still degraded 15 s after Redis restarted")
		}
	}
	if !d.Allowed || d.Limit != lim || d.Remaining != lim.Rate-1 {
		t.Errorf("first decision by the restarted Redis: %+v; want allowed by Redis, 9 remaining", d)
	}
	// The restarted Redis lost its state (no persistence) and saw none of the degraded admissions.
	if n := mustString(t, srv.Do(t, "GET", r.Key)); n != "1" {
		t.Errorf("the restarted Redis counts %s; want 1", n)
	}
}

// TestFailOpenLocalLeases: a lease acquired locally is released locally — while Redis is down, and after it
// is back; a lease that Redis gave is released on Redis.
func TestFailOpenLocalLeases(t *testing.T) {
	srv := redistest.Start(t)
	f := newFailOpen(t, openRedis(t, srv.URL()), guard.FailOpenOptions{Local: localLimits(map[string]int64{"conc": 2})})
	lim := admit.Limit{Name: "conc", Algorithm: admit.Concurrency, Rate: 5, Period: time.Minute}
	r := admit.Request{Key: "rl:conc:v1:{erin}", Limit: lim, Cost: 1}
	remote := mustTake(t, f, r)
	if !remote.Allowed || remote.Degraded || remote.Token == 0 {
		t.Fatalf("lease with Redis up: %+v; want one from Redis", remote)
	}

	srv.Kill(t)
	var held []admit.Decision
	for range 3 {
		if d := mustTake(t, f, r); d.Allowed {
			held = append(held, d)
		}
	}
	if len(held) != 2 || !held[0].Degraded {
		t.Fatalf("Redis killed: %d of 3 leases acquired, degraded %v; want the local limit, 2, degraded", len(held), len(held) > 0 && held[0].Degraded)
	}
	release := func(d admit.Decision) error {
		return f.Release(t.Context(), admit.Lease{Key: r.Key, Limit: lim, Token: d.Token})
	}
	if err := release(held[0]); err != nil {
		t.Fatalf("releasing a local lease with Redis down: %v", err)
	}
	if d := mustTake(t, f, r); !d.Allowed || !d.Degraded {
		t.Fatalf("after a local release: %+v; want a local lease again", d)
	} else {
		held[0] = d
	}
	// Redis's own lease cannot be released while Redis is down: that is an error, not a local act.
	if err := release(remote); !errors.Is(err, admit.ErrUnavailable) {
		t.Errorf("releasing Redis's lease with Redis down: %v; want an error matching admit.ErrUnavailable", err)
	}

	srv.Restart(t)
	// Wait until the client has reconnected (a hang guard of 15 s).
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if d := mustTake(t, f, admit.Request{Key: r.Key, Limit: lim}); !d.Degraded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still degraded 15 s after Redis restarted")
		}
	}
	if err := release(held[1]); err != nil {
		t.Fatalf("releasing a local lease with Redis back: %v", err)
	}
	// The local limiter has one lease free again: seen once Redis is down again.
	srv.Kill(t)
	if d := mustTake(t, f, r); !d.Allowed || !d.Degraded {
		t.Errorf("Redis killed again, after a local release with Redis up: %+v; want a local lease", d)
	}
	if d := mustTake(t, f, r); d.Allowed {
		t.Errorf("Redis killed again: a lease beyond the local limit: %+v", d)
	}
}

// TestFailOpenTableCap: however many keys arrive while Redis is down, the local limiter holds at most
// its cap (rounded up to its 64 shards): the others fail closed with Redis's error.
func TestFailOpenTableCap(t *testing.T) {
	const maxEntries = 128
	clock := newFailOpenClock()
	f := newFailOpen(t, deadRedis(t), guard.FailOpenOptions{Local: halfOf, MaxEntries: maxEntries, Now: clock.Now})
	lim := admit.Limit{Name: "flood", Algorithm: admit.FixedWindow, Rate: 10, Period: time.Minute}
	admitted, refused := 0, 0
	for i := range 2000 {
		d, err := f.Take(t.Context(), admit.Request{Key: fmt.Sprintf("rl:flood:v1:{%d}", i), Limit: lim, Cost: 1})
		switch {
		case err == nil && d.Allowed && d.Degraded:
			admitted++
		case errors.Is(err, admit.ErrUnavailable) && !errors.Is(err, memstore.ErrFull):
			refused++ // Redis's own error, not the local table's
		default:
			t.Fatalf("key %d: %+v, %v; want a degraded admission or Redis's error", i, d, err)
		}
	}
	if admitted > maxEntries || admitted == 0 || refused == 0 {
		t.Errorf("2000 new keys: %d admitted locally, %d refused; want at most the cap, %d, admitted, and the rest refused", admitted, refused, maxEntries)
	}
	// Once the windows end, the table takes new keys again.
	clock.Advance(lim.Period)
	if d := mustTake(t, f, admit.Request{Key: "rl:flood:v1:{late}", Limit: lim, Cost: 1}); !d.Allowed || !d.Degraded {
		t.Errorf("a new key after the windows ended: %+v; want a degraded admission", d)
	}
}

// TestFailOpenGCRABurstScaled: a GCRA Limit's Burst is scaled with its Rate, so a local bucket admits its
// scaled burst at once.
func TestFailOpenGCRABurstScaled(t *testing.T) {
	clock := newFailOpenClock()
	f := newFailOpen(t, deadRedis(t), guard.FailOpenOptions{Local: localLimits(map[string]int64{"bucket": 10}), Now: clock.Now})
	lim := admit.Limit{Name: "bucket", Algorithm: admit.GCRA, Rate: 100, Period: time.Minute, Burst: 50}
	admitted := 0
	for range 20 {
		d := mustTake(t, f, admit.Request{Key: "rl:bucket:v1:{frank}", Limit: lim, Cost: 1})
		if d.Limit.Rate != 10 || d.Limit.Burst != 5 {
			t.Fatalf("local Limit %v; want rate 10, burst 5 (50 × 10/100)", d.Limit)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != 5 {
		t.Errorf("%d admitted at once; want the scaled burst, 5", admitted)
	}
}

// childEnv carries the work of a child process of TestFailOpenBoundAcrossProcesses: the closed address.
const childEnv = "ADMIT_GUARD_FAILOPEN_CHILD"

// Numbers of TestFailOpenBoundAcrossProcesses.
const (
	boundProcesses = 3
	boundWorkers   = 8  // goroutines in each process
	boundAttempts  = 10 // requests each goroutine makes
	boundLocal     = 4  // the local limit
	boundPeriod    = time.Second
)

// TestFailOpenBoundAcrossProcesses proves the fail-open bound (G7 of docs/guarantees.md) with several OS
// processes: the test binary, run again as children, each with a FailOpen over a Redis that cannot
// be reached, hammer one key. Each admits at least its local limit (its first window) and at most the
// local limit per window its run spanned; all of them together at most processes × local limit ×
// windows.
func TestFailOpenBoundAcrossProcesses(t *testing.T) {
	if addr := os.Getenv(childEnv); addr != "" {
		runBoundChild(t, addr)
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	addr := redistest.ClosedPort(t) // held, not listening, for the children's whole run
	outs := make([][]byte, boundProcesses)
	errs := make([]error, boundProcesses)
	var wg sync.WaitGroup
	for i := range boundProcesses {
		wg.Go(func() {
			cmd := exec.CommandContext(t.Context(), exe, "-test.run=^TestFailOpenBoundAcrossProcesses$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), childEnv+"="+addr)
			outs[i], errs[i] = cmd.CombinedOutput()
		})
	}
	wg.Wait()
	total, maxWindows := 0, 0
	for i := range boundProcesses {
		if errs[i] != nil {
			t.Fatalf("child %d: %v; output:\n%s", i, errs[i], outs[i])
		}
		var admitted, windows int
		if _, err := fmt.Sscanf(childLine(outs[i]), "failopen-child admitted %d windows %d", &admitted, &windows); err != nil {
			t.Fatalf("child %d printed no result (%v); output:\n%s", i, err, outs[i])
		}
		if admitted < boundLocal || admitted > boundLocal*windows {
			t.Errorf("child %d admitted %d in a run spanning at most %d windows of %v; want %d … %d (local limit %d per window)",
				i, admitted, windows, boundPeriod, boundLocal, boundLocal*windows, boundLocal)
		}
		total += admitted
		maxWindows = max(maxWindows, windows)
	}
	if bound := boundProcesses * boundLocal * maxWindows; total > bound {
		t.Errorf("%d processes admitted %d in all; want at most %d × %d × %d = %d", boundProcesses, total, boundProcesses, boundLocal, maxWindows, bound)
	}
	t.Logf("%d processes × %d requests on one key with Redis unreachable: %d admitted, within at most %d windows each", boundProcesses, boundWorkers*boundAttempts, total, maxWindows)
}

// runBoundChild is a child's part of TestFailOpenBoundAcrossProcesses: it hammers one key through a FailOpen
// over the Redis at the closed addr, and prints what it admitted and how many windows its run can
// have spanned.
func runBoundChild(t *testing.T, addr string) {
	f := newFailOpen(t, openRedis(t, "redis://"+addr), guard.FailOpenOptions{Local: func(admit.Limit) (int64, bool) { return boundLocal, true }})
	r := admit.Request{Key: "rl:bound:v1:{shared}", Limit: admit.Limit{Name: "bound", Algorithm: admit.FixedWindow, Rate: 100, Period: boundPeriod}, Cost: 1}
	var admitted atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range boundWorkers {
		wg.Go(func() {
			for range boundAttempts {
				d, err := f.Take(context.Background(), r)
				if err != nil || !d.Degraded {
					t.Errorf("with Redis unreachable: %+v, %v; want a degraded decision", d, err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	// A local window starts at an admission at or after start and lasts boundPeriod, so a run of
	// length e spans at most e/boundPeriod + 1 of them.
	windows := int(time.Since(start)/boundPeriod) + 1
	fmt.Printf("failopen-child admitted %d windows %d\n", admitted.Load(), windows)
}

// childLine returns the result line a child printed, or "".
func childLine(out []byte) string {
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(line, "failopen-child ") {
			return line
		}
	}
	return ""
}

// TestFailOpenTokenTableCap: while the backend is down, the tokens FailOpen remembers of degraded
// leases and reservations stay within MaxEntries however many one key gets — a bound the local
// limiter's own entry cap cannot give, as one key is one entry. Calls that find the token table
// full fail closed with the backend's error, and once the tokens' time is up the table takes new
// ones again.
func TestFailOpenTokenTableCap(t *testing.T) {
	const maxEntries, calls = 64, 1000
	for _, lim := range []admit.Limit{
		{Name: "leases", Algorithm: admit.Concurrency, Rate: 100_000, Period: time.Minute}, // never released
		{Name: "bucket", Algorithm: admit.GCRA, Rate: 1_000_000, Period: time.Minute, Burst: 1_000_000},
	} {
		t.Run(lim.Algorithm.String(), func(t *testing.T) {
			clock := newFailOpenClock()
			down := &switchable{}
			down.down.Store(true)
			f := newFailOpen(t, down, guard.FailOpenOptions{
				Local:      func(lim admit.Limit) (int64, bool) { return lim.Rate, true },
				MaxEntries: maxEntries,
				Now:        clock.Now,
			})
			r := admit.Request{Key: "rl:" + lim.Name + ":v1:{one}", Limit: lim, Cost: 1}
			admitted, refused := 0, 0
			for i := range calls {
				d, err := f.Take(t.Context(), r)
				switch {
				case err == nil && d.Allowed && d.Degraded:
					admitted++
				case errors.Is(err, errDown):
					refused++ // the backend's own error: failed closed
				default:
					t.Fatalf("call %d: %+v, %v; want a degraded admission or the backend's error", i, d, err)
				}
				if n := f.TrackedTokens(); n > maxEntries {
					t.Fatalf("after %d degraded admissions of one key: %d tokens remembered; want at most MaxEntries, %d", admitted, n, maxEntries)
				}
			}
			if admitted == 0 || refused == 0 {
				t.Errorf("%d calls on one key: %d admitted locally, %d refused; want some admitted, and the rest refused once the token table is full", calls, admitted, refused)
			}
			clock.Advance(lim.MaxWait() + time.Millisecond)
			if d := mustTake(t, f, r); !d.Allowed || !d.Degraded {
				t.Errorf("once the remembered tokens' time is up: %+v; want a degraded admission", d)
			}
		})
	}
}
