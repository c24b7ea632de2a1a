package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/internal/slot"
	"github.com/admit-dev/admit/limittest"
)

// uncoalescedBackend is backend with coalescing off: the conformance suite runs in both modes.
type uncoalescedBackend struct{ backend }

func (b uncoalescedBackend) Open(t *testing.T) admit.Store {
	return openMode(t, b.srv.URL(), CoalescingOff)
}

func (b uncoalescedBackend) OpenAddress(t *testing.T, url string) admit.Store {
	return openMode(t, url, CoalescingOff)
}

func TestConformanceUncoalesced(t *testing.T) {
	srv := redistest.Start(t)
	limittest.TestStore(t, func(t *testing.T) limittest.Backend { return uncoalescedBackend{backend{srv}} })
}

// openMode is openPatient with coalescing as mode.
func openMode(t testing.TB, url string, mode Coalescing) *Store {
	t.Helper()
	s, err := New(Config{URL: url, CommandTimeout: patientCommandTimeout, DialTimeout: patientCommandTimeout, Coalescing: mode})
	if err != nil {
		t.Fatalf("New(%q): %v", url, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// laneOf returns the lane the takes of key join.
func laneOf(t testing.TB, s *Store, key string) *lane {
	t.Helper()
	c, err := s.conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s.co.mu.Lock()
	defer s.co.mu.Unlock()
	return s.co.lane(key, c.Mode() == rueidis.ClientModeCluster)
}

// hold waits until key's lane is idle and fills it, as its laneCalls calls in flight do, so that the takes of key queue;
// the returned func ends the pretended calls, the last of which sends the queue.
func hold(t testing.TB, s *Store, key string) func() {
	t.Helper()
	l := laneOf(t, s, key)
	deadline := time.Now().Add(time.Minute)
	for {
		s.co.mu.Lock()
		if l.calls == 0 && l.drains == 0 { // a drain of earlier takes may still be ending
			l.calls = s.co.laneCalls
			s.co.mu.Unlock()
			return func() {
				s.co.mu.Lock()
				l.calls = 1
				s.co.mu.Unlock()
				s.co.next(s, l)
			}
		}
		s.co.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("lane of %s still busy after a minute", key)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitQueued waits until n takes wait in key's lane (a hang guard, not a timing bound).
func waitQueued(t testing.TB, s *Store, key string, n int) {
	t.Helper()
	l := laneOf(t, s, key)
	deadline := time.Now().Add(time.Minute)
	for {
		s.co.mu.Lock()
		got := len(l.queue)
		s.co.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d takes queued after a minute, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// recorder keeps every take a coalescing Store decided, in the order Redis ran them.
type recorder struct {
	mu  sync.Mutex
	log []*queuedTake
}

func record(s *Store) *recorder {
	r := &recorder{}
	s.co.laneCalls = 1 // one call in flight: calls end in the order Redis ran them
	s.co.record = func(p *queuedTake) {
		r.mu.Lock()
		r.log = append(r.log, p)
		r.mu.Unlock()
	}
	return r
}

func (r *recorder) taken() []*queuedTake {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*queuedTake(nil), r.log...)
}

// A hot key taken by many callers at once: exactly its limit admitted, coalesced or not, and with
// coalescing the takes queued behind a call in flight go as one batch call.
func TestCoalescedHotKeyExact(t *testing.T) {
	srv := redistest.Start(t)
	for _, mode := range []Coalescing{CoalescingOn, CoalescingOff} {
		t.Run(mode.String(), func(t *testing.T) {
			s := openMode(t, srv.URL(), mode)
			key := newKey(t)
			lim := admit.Limit{Algorithm: admit.GCRA, Rate: 40, Period: time.Hour, Burst: 40}
			var release func()
			if mode == CoalescingOn {
				release = hold(t, s, key)
			}
			const callers = 100
			var wg sync.WaitGroup
			var mu sync.Mutex
			admitted := 0
			errs := make(chan error, callers)
			for range callers {
				wg.Go(func() {
					d, err := s.Take(context.Background(), admit.Request{Key: key, Limit: lim, Cost: 1})
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					if d.Allowed {
						admitted++
					}
					mu.Unlock()
				})
			}
			if release != nil {
				waitQueued(t, s, key, callers)
				loadScripts(t, srv)
				before := evalshaCalls(t, srv)
				release()
				wg.Wait()
				if calls := evalshaCalls(t, srv) - before; calls != 1 {
					t.Errorf("%d queued takes went in %d EVALSHA calls, want 1 batch", callers, calls)
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if admitted != 40 {
				t.Fatalf("%d of %d admitted, want 40", admitted, callers)
			}
		})
	}
}

var tenPerMinute = admit.Limit{Algorithm: admit.FixedWindow, Rate: 10, Period: time.Minute}

// loadScripts loads the take and batch scripts on srv, so that EVALSHA calls counted after it are
// the decisions' own, not NOSCRIPT's.
func loadScripts(t testing.TB, srv *redistest.Server) {
	t.Helper()
	for _, sc := range []*script{takeScript, batchScript} {
		if err := srv.Do(t, "SCRIPT", "LOAD", sc.src).Error(); err != nil {
			t.Fatal(err)
		}
	}
}

// evalshaCalls returns the server's count of EVALSHA calls (INFO commandstats).
func evalshaCalls(t testing.TB, srv *redistest.Server) int64 {
	t.Helper()
	info, err := srv.Do(t, "INFO", "commandstats").ToString()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:calls="); ok {
			n, err := strconv.ParseInt(v[:strings.IndexByte(v, ',')], 10, 64)
			if err != nil {
				t.Fatalf("INFO %s: %v", line, err)
			}
			return n
		}
	}
	return 0
}

// diffLimits are the policies of the differential test, by key index: every algorithm, windows of
// minutes (the test's real time never expires a key), small limits so that rejections come.
var diffLimits = []admit.Limit{
	{Name: "fa", Algorithm: admit.FixedWindow, Rate: 7, Period: time.Minute, Aligned: true},
	{Name: "gc", Algorithm: admit.GCRA, Rate: 5, Period: time.Minute, Burst: 6},
	{Name: "sw", Algorithm: admit.SlidingWindow, Rate: 9, Period: 2 * time.Minute},
	{Name: "sl", Algorithm: admit.SlidingLog, Rate: 6, Period: time.Minute},
	{Name: "cc", Algorithm: admit.Concurrency, Rate: 4, Period: 3 * time.Minute},
	{Name: "fw", Algorithm: admit.FixedWindow, Rate: 8, Period: 5 * time.Minute},
	{Name: "sh", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Minute, Aligned: true, Shadow: true},
}

// diffRequests returns a random take: one to three policies of one subject (one slot), a cost of
// 0 … 2, sometimes a request ID from a small pool, so that retries replay and IDs are reused for
// other requests (refused).
func diffRequests(rng *rand.Rand, subjects []string) []admit.Request {
	if rng.IntN(3) == 0 { // a hot fixed window: runs of them are merged in a batch
		lim := diffLimits[5]
		return []admit.Request{{Key: subjects[0] + ":" + lim.Name, Limit: lim, Cost: int64(rng.IntN(3))}}
	}
	subject := subjects[rng.IntN(len(subjects))]
	n := 1 + rng.IntN(3)
	if rng.IntN(2) == 0 {
		n = 1
	}
	first := rng.IntN(len(diffLimits))
	cost := int64(rng.IntN(3))
	id := ""
	if rng.IntN(6) == 0 {
		id = "id" + strconv.Itoa(rng.IntN(8))
	}
	rs := make([]admit.Request, n)
	for i := range rs {
		lim := diffLimits[(first+i)%len(diffLimits)]
		c := cost
		if lim.Algorithm == admit.Concurrency {
			c = min(c, 1) // one lease each
		}
		rs[i] = admit.Request{Key: subject + ":" + lim.Name, Limit: lim, Cost: c, ID: id}
	}
	return rs
}

// A batch's run of takes of one fixed window, merged into one read and one write, decides each take
// as its own call would at that instant: admitted while the count the takes before it left has room,
// ResetAfter the window from the first admission on (less the real time the batch took, for a run
// that reads the key again), every admission's Token the key's expiry; a take that is not merged (a
// request ID, two policies) ends the run, and sees its writes.
func TestCoalescedFixedWindowRun(t *testing.T) {
	srv := redistest.Start(t)
	s := openMode(t, srv.URL(), CoalescingOn)
	key := newKey(t)
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 10, Period: time.Minute}
	other := admit.Request{Key: key + ":b", Limit: lim, Cost: 1}
	costs := []int64{0, 1, 0, 3, 2, 5, 1, 0, -1, 4, 1, 1, -2, 0, 1, 9}
	release := hold(t, s, key)
	var wg sync.WaitGroup
	type answer struct {
		ds  []admit.Decision
		ok  bool
		err error
	}
	answers := make([]answer, len(costs))
	for i, c := range costs {
		rs := []admit.Request{{Key: key, Limit: lim, Cost: c}}
		switch c {
		case -1: // a request ID: not merged
			rs[0].Cost, rs[0].ID = 1, "id"
		case -2: // two policies: not merged
			rs[0].Cost = 1
			rs = append(rs, other)
		}
		wg.Go(func() {
			ds := make([]admit.Decision, len(rs))
			ok, err := s.TakeAll(context.Background(), rs, ds)
			answers[i] = answer{ds, ok, err}
		})
		waitQueued(t, s, key, i+1) // in this order
	}
	start := time.Now()
	release()
	wg.Wait()
	elapsed := time.Since(start) // a take after a take that was not merged reads the key's TTL again, as much later
	expires, err := srv.Do(t, "PEXPIRETIME", key).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	count := int64(0)
	for i, c := range costs {
		a := answers[i]
		if a.err != nil {
			t.Fatalf("take %d: %v", i, a.err)
		}
		c = max(c, 1)
		if costs[i] == 0 {
			c = 0
		}
		allowed := count+c <= lim.Rate
		want := admit.Decision{Allowed: allowed, Limit: lim, Remaining: lim.Rate - count - c, ResetAfter: time.Minute}
		switch {
		case !allowed:
			want.Remaining, want.RetryAfter = lim.Rate-count, time.Minute
		case c > 0:
			want.Token = uint64(expires)
		case count == 0:
			want.ResetAfter = 0 // a peek of a missing key
		}
		if allowed {
			count += c
		}
		got := a.ds[0]
		for _, d := range []*time.Duration{&got.ResetAfter, &got.RetryAfter} {
			if *d > 0 && *d < time.Minute && time.Minute-*d <= elapsed+time.Millisecond {
				*d = time.Minute
			}
		}
		if a.ok != allowed || got != want {
			t.Errorf("take %d of cost %d: %v, %+v; want %v, %+v", i, costs[i], a.ok, a.ds[0], allowed, want)
		}
	}
	if v, _ := state(t, srv, key); v != strconv.FormatInt(count, 10) {
		t.Fatalf("the key counts %s, want %d", v, count)
	}
}

// The coalesced path against the one-call path, decision by decision: callers take a seeded random
// mix of algorithms, costs, keys and request IDs at once on a coalescing Store (the test assemblies,
// at a time the test sets: phase after phase, 20 s apart), each phase once with all of them queued
// behind a held lane (one batch) and once free-running; the order Redis ran them in, recorded, is
// replayed one call at a time on a fresh server, and every answer must be the same: allowed, each
// Decision, each error.
func TestCoalescedMatchesOneCallPath(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	srv := redistest.Start(t)
	s := openMode(t, srv.URL(), CoalescingOn)
	rec := record(s)
	subjects := []string{newKey(t), newKey(t), newKey(t)}
	t0 := time.Now()
	type phase struct {
		at   string
		upTo int
	}
	var phases []phase
	const callers, each = 24, 12
	batched := 0
	for k := range 8 {
		at := strconv.FormatInt(t0.Add(time.Duration(k)*20*time.Second).UnixMicro(), 10)
		s.test = &testScripts{take: testTakeScript, batch: testBatchScript, at: at}
		for _, held := range []bool{true, false} {
			var release func()
			if held {
				release = hold(t, s, subjects[0])
			}
			var wg sync.WaitGroup
			for g := range callers {
				rng := rand.New(rand.NewPCG(seed, uint64(k*1000+g)))
				wg.Go(func() {
					for range each {
						rs := diffRequests(rng, subjects)
						s.TakeAll(context.Background(), rs, make([]admit.Decision, len(rs))) // recorded
						if held {
							return // one take each into the held lane's queue
						}
					}
				})
			}
			if held {
				waitQueued(t, s, subjects[0], callers)
				release()
				batched += callers
			}
			wg.Wait()
		}
		phases = append(phases, phase{at: at, upTo: len(rec.taken())})
	}
	log := rec.taken()
	if want := 8 * (callers + callers*each); len(log) != want {
		t.Fatalf("%d takes recorded, want %d", len(log), want)
	}

	fresh := openMode(t, redistest.Start(t).URL(), CoalescingOff)
	from := 0
	for _, ph := range phases {
		for i := from; i < ph.upTo; i++ {
			p := log[i]
			ds := make([]admit.Decision, len(p.rs))
			var ok bool
			reply, err := fresh.run(context.Background(), testTakeScript, p.keys, append(append([]string(nil), p.args...), ph.at))
			if err == nil {
				ok, err = parseTake(reply, p.rs, ds, p.tokens)
			}
			if err != nil {
				err = fmt.Errorf("redisstore: take: %w", err)
			}
			if fmt.Sprint(err) != fmt.Sprint(p.err) || ok != p.ok {
				t.Fatalf("take %d (%+v): coalesced %v, %v; one call at a time %v, %v", i, p.rs, p.ok, p.err, ok, err)
			}
			if err != nil {
				continue
			}
			for j := range ds {
				if !sameDecision(p.rs[j], p.ds[j], ds[j], time.Since(t0)) {
					t.Fatalf("take %d policy %d (%+v): coalesced %+v; one call at a time %+v", i, j, p.rs[j], p.ds[j], ds[j])
				}
			}
		}
		from = ph.upTo
	}
	t.Logf("%d takes compared, %d of them in held batches", len(log), batched)
}

// sameDecision says whether a and b, r's Decisions, are the same: exactly, but for a fixed window
// from its first admission, whose expiry (its Token, ResetAfter and RetryAfter) Redis sets by its
// own clock, not the test assembly's: those may differ by the real time passed, at most slack.
func sameDecision(r admit.Request, a, b admit.Decision, slack time.Duration) bool {
	if r.Limit.Algorithm != admit.FixedWindow || r.Limit.Aligned {
		return a == b
	}
	near := func(x, y time.Duration) bool { return (x - y).Abs() <= slack+time.Second }
	tokens := near(time.Duration(a.Token)*time.Millisecond, time.Duration(b.Token)*time.Millisecond)
	if a.Token == 0 || b.Token == 0 {
		tokens = a.Token == b.Token
	}
	a.Token, b.Token = 0, 0
	ok := tokens && near(a.ResetAfter, b.ResetAfter) && near(a.RetryAfter, b.RetryAfter)
	a.ResetAfter, b.ResetAfter, a.RetryAfter, b.RetryAfter = 0, 0, 0, 0
	return ok && a == b
}

// On a cluster the takes of one slot go together, each slot's to its own node: two held lanes of
// keys on different slots send one batch each, and every decision is exact.
func TestCoalescedClusterBySlot(t *testing.T) {
	c := redistest.StartCluster(t)
	s := openMode(t, c.URL(), CoalescingOn)
	var keys []string
	for len(keys) < 2 {
		k := newKey(t)
		if len(keys) == 0 || c.MasterOfKey(t, k) != c.MasterOfKey(t, keys[0]) {
			keys = append(keys, k)
		}
	}
	if laneOf(t, s, keys[0]) == laneOf(t, s, keys[1]) {
		t.Fatal("two slots share a lane")
	}
	// Another key of the first key's slot: a TakeAll of both joins that slot's lane.
	other := keys[0] + ":other"
	rec := record(s)
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 5, Period: time.Minute}
	releases := []func(){hold(t, s, keys[0]), hold(t, s, keys[1])}
	const each = 12
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := map[string]int{}
	for _, k := range keys {
		for i := range each {
			wg.Go(func() {
				rs := []admit.Request{{Key: k, Limit: lim, Cost: 1}}
				if k == keys[0] && i%2 == 0 {
					rs = append(rs, admit.Request{Key: other, Limit: lim, Cost: 1})
				}
				allowed, err := s.TakeAll(context.Background(), rs, make([]admit.Decision, len(rs)))
				if err != nil {
					t.Error(err)
					return
				}
				if allowed {
					mu.Lock()
					admitted[k]++
					mu.Unlock()
				}
			})
		}
	}
	for _, k := range keys {
		waitQueued(t, s, k, each)
	}
	before := map[*redistest.Server]int64{}
	for _, k := range keys {
		loadScripts(t, c.MasterOfKey(t, k))
		before[c.MasterOfKey(t, k)] = evalshaCalls(t, c.MasterOfKey(t, k))
	}
	for _, r := range releases {
		r()
	}
	wg.Wait()
	for _, k := range keys {
		m := c.MasterOfKey(t, k)
		if calls := evalshaCalls(t, m) - before[m]; calls != 1 {
			t.Errorf("master of %s ran %d EVALSHA calls for its %d queued takes, want 1 batch", k, calls, each)
		}
		if admitted[k] != 5 {
			t.Errorf("%s: %d of %d admitted, want 5", k, admitted[k], each)
		}
	}
	for _, p := range rec.taken() {
		for _, key := range p.keys {
			if slot.Of(key) != slot.Of(p.keys[0]) {
				t.Fatalf("a take of keys %v in two slots", p.keys)
			}
		}
	}
}

// A take whose context ends while it is queued returns the context's error at once and is never
// sent: the key does not count it.
func TestCoalescedCancelledWhileQueued(t *testing.T) {
	srv := redistest.Start(t)
	s := openMode(t, srv.URL(), CoalescingOn)
	key := newKey(t)
	release := hold(t, s, key)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.Take(ctx, admit.Request{Key: key, Limit: threePerMinute, Cost: 1})
		errc <- err
	}()
	waitQueued(t, s, key, 1)
	cancel()
	err := <-errc
	if !errors.Is(err, admit.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled while queued: %v; want ErrUnavailable and context.Canceled", err)
	}
	loadScripts(t, srv)
	before := evalshaCalls(t, srv)
	release()
	if d := take(t, s, key, threePerMinute, 0); d.Remaining != 3 {
		t.Fatalf("after the cancelled take: %d left, want 3 (it was never sent)", d.Remaining)
	}
	if calls := evalshaCalls(t, srv) - before; calls != 1 {
		t.Fatalf("%d EVALSHA calls after the cancelled take, want 1 (the peek's)", calls)
	}
}

// A batch that meets a frozen server fails every take in it by its own deadline, as unavailable,
// as the one-call path fails; once the server is back the lane decides again.
func TestCoalescedBatchTimesOut(t *testing.T) {
	srv := redistest.Start(t)
	s, err := New(Config{URL: srv.URL(), CommandTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	key := newKey(t)
	take(t, s, key, threePerMinute, 0) // connected, the script loaded
	release := hold(t, s, key)
	const callers = 5
	errc := make(chan error, callers)
	for range callers {
		go func() {
			_, err := s.Take(context.Background(), admit.Request{Key: key, Limit: threePerMinute, Cost: 1})
			errc <- err
		}()
	}
	waitQueued(t, s, key, callers)
	srv.Freeze(t)
	start := time.Now()
	release()
	for range callers {
		if err := <-errc; !errors.Is(err, admit.ErrUnavailable) {
			t.Errorf("a take of a batch on a frozen server: %v; want ErrUnavailable", err)
		}
	}
	t.Logf("the batch failed after %v", time.Since(start))
	srv.Thaw(t)
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := s.Take(context.Background(), admit.Request{Key: newKey(t), Limit: threePerMinute, Cost: 1})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the thaw: %v", err)
		}
	}
}

// A batch after SCRIPT FLUSH loads the script and runs once: every take decided, none twice.
func TestCoalescedBatchReloadsScript(t *testing.T) {
	srv := redistest.Start(t)
	s := openMode(t, srv.URL(), CoalescingOn)
	key := newKey(t)
	loadScripts(t, srv)
	release := hold(t, s, key)
	const callers = 4
	errc := make(chan error, callers)
	for range callers {
		go func() {
			_, err := s.Take(context.Background(), admit.Request{Key: key, Limit: tenPerMinute, Cost: 1})
			errc <- err
		}()
	}
	waitQueued(t, s, key, callers)
	srv.Do(t, "SCRIPT", "FLUSH")
	release()
	for range callers {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := state(t, srv, key); v != "4" {
		t.Fatalf("the key counts %q after 4 takes in a reloaded batch, want 4", v)
	}
}

// One take's error in a batch (a request ID reused for another request, a concurrency key
// read as a fixed window) is its own: the other takes of the batch are decided, and the errors are the one-call
// path's.
func TestCoalescedErrorIsTheTakesOwn(t *testing.T) {
	srv := redistest.Start(t)
	s := openMode(t, srv.URL(), CoalescingOn)
	key := newKey(t)
	leases := admit.Limit{Algorithm: admit.Concurrency, Rate: 10, Period: time.Minute}
	if _, err := s.Take(context.Background(), admit.Request{Key: key + ":g", Limit: leases, Cost: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Take(context.Background(), admit.Request{Key: key, Limit: threePerMinute, Cost: 1, ID: "once"}); err != nil {
		t.Fatal(err)
	}
	release := hold(t, s, key)
	reqs := []admit.Request{
		{Key: key, Limit: threePerMinute, Cost: 1},
		{Key: key, Limit: threePerMinute, Cost: 2, ID: "once"},         // reused: invalid
		{Key: key + ":g", Limit: threePerMinute, Cost: 1},              // a concurrency key read as a fixed window: corrupt
		{Key: key, Limit: threePerMinute, Cost: 1, ID: "once"},         // a retry: replayed
		{Key: key + ":other", Limit: threePerMinute, Cost: 1, ID: "x"}, // another key: admitted
	}
	type answer struct {
		d   admit.Decision
		err error
	}
	answers := make([]answer, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() {
			d, err := s.Take(context.Background(), r)
			answers[i] = answer{d, err}
		})
		waitQueued(t, s, key, i+1) // in this order
	}
	release()
	wg.Wait()
	if a := answers[0]; a.err != nil || !a.d.Allowed || a.d.Remaining != 1 {
		t.Errorf("the plain take: %+v, %v; want allowed, 1 left", a.d, a.err)
	}
	if a := answers[1]; !errors.Is(a.err, admit.ErrInvalidRequest) {
		t.Errorf("an ID reused: %v; want ErrInvalidRequest", a.err)
	}
	if a := answers[2]; !errors.Is(a.err, admit.ErrCorruptState) {
		t.Errorf("a key of another algorithm: %v; want ErrCorruptState", a.err)
	}
	if a := answers[3]; a.err != nil || !a.d.Replayed {
		t.Errorf("a retry: %+v, %v; want a replay", a.d, a.err)
	}
	if a := answers[4]; a.err != nil || !a.d.Allowed || a.d.Remaining != 2 {
		t.Errorf("another key: %+v, %v; want allowed, 2 left", a.d, a.err)
	}
	// The one-call path's errors, word for word.
	for _, i := range []int{1, 2} {
		_, err := openMode(t, srv.URL(), CoalescingOff).Take(context.Background(), reqs[i])
		if fmt.Sprint(err) != fmt.Sprint(answers[i].err) {
			t.Errorf("take %d: coalesced %v; one call %v", i, answers[i].err, err)
		}
	}
}

// Config.Coalescing and the URL's coalesce option: each value honoured, a bad one refused, the two
// set to different values refused.
func TestCoalescingOption(t *testing.T) {
	for _, c := range []struct {
		url  string
		mode Coalescing
		on   bool
		bad  string
	}{
		{url: "redis://localhost:6379", on: true},
		{url: "redis://localhost:6379", mode: CoalescingOff},
		{url: "redis://localhost:6379", mode: CoalescingOn, on: true},
		{url: "redis://localhost:6379?coalesce=off"},
		{url: "redis://localhost:6379?coalesce=on", on: true},
		{url: "redis://localhost:6379?coalesce=off", mode: CoalescingOff},
		{url: "redis://localhost:6379?coalesce=on", mode: CoalescingOn, on: true},
		{url: "redis://localhost:6379?coalesce=yes", bad: `option coalesce="yes": want on or off`},
		{url: "redis://localhost:6379?coalesce=on", mode: CoalescingOff, bad: "coalescing given twice, off in Config and on in the URL"},
		{url: "redis://localhost:6379", mode: Coalescing(7), bad: "unknown Coalescing 7"},
	} {
		s, err := New(Config{URL: c.url, Coalescing: c.mode})
		if c.bad != "" {
			if err == nil || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("%s, %v: %v; want an error saying %q", c.url, c.mode, err, c.bad)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s, %v: %v", c.url, c.mode, err)
			continue
		}
		if on := s.co != nil; on != c.on {
			t.Errorf("%s, %v: coalescing %v, want %v", c.url, c.mode, on, c.on)
		}
		s.Close()
	}
}
