package limittest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
)

// concurrency returns the concurrency algorithm, leases (docs/concurrency.md), and the cases only it passes.
// A Request costs 0 or 1 (unitCost); a lease not released expires one Period, the lease TTL, after it
// was acquired, so a key filled by one admission is full again exactly one TTL later (exactWindow),
// and its ResetAfter runs from its last admission, not its first.
func concurrency() *algorithm {
	return &algorithm{alg: admit.Concurrency, maxRate: bound.MaxConcurrency, refill: exactWindow, unitCost: true,
		largest: cc(bound.MaxConcurrency, time.Minute), cases: []algorithmCase{
			{"AcquireUpToTheLimit", testAcquireUpToTheLimit},
			{"ReleaseFreesASlot", testReleaseFreesASlot},
			{"DoubleReleaseIsHarmless", testDoubleRelease},
			{"ReleaseOfUnknownOrExpiredLease", testReleaseUnknownOrExpired},
			{"ExpiryReturnsCapacity", testExpiryReturnsCapacity},
			{"PeekAcquiresNothing", testPeekAcquiresNothing},
			{"ReleaseInvalid", testReleaseInvalid},
			{"CostAboveOneIsInvalid", testConcurrencyCostInvalid},
			{"InFlightNeverAboveTheLimit", testInFlightNeverAboveTheLimit},
			{"MultiPolicy", testConcurrencyMultiPolicy},
			{"Idempotency", testConcurrencyReplay},
			{"KilledHolder", testKilledHolder},
			{"NewLimitKeepsLeases", testNewLimitKeepsLeases},
			{"ShortLeaseKeepsLongerLeases", testShortLeaseKeepsLongerLeases},
			{"Reset/Leases", testResetLeases},
		}}
}

// cc returns a concurrency Limit of rate leases in flight, each expiring ttl after it is acquired.
func cc(rate int64, ttl time.Duration) admit.Limit {
	return admit.Limit{Name: "limittest", Algorithm: admit.Concurrency, Rate: rate, Period: ttl}
}

// checkConcurrency reports, with t.Errorf, what d breaks of a concurrency limit's own invariants: an
// acquired lease has a token and expires one TTL from now, so an admission's ResetAfter is the TTL;
// a peek and a rejection acquire nothing, so their Token is 0; a rejection waits for a lease to
// expire, no later than the last one does.
func checkConcurrency(t *testing.T, d admit.Decision, lim admit.Limit, n int64) {
	t.Helper()
	switch {
	case d.Allowed && n > 0 && d.ResetAfter != lim.Period:
		t.Errorf("acquired a lease with ResetAfter = %v; want exactly the lease TTL %v", d.ResetAfter, lim.Period)
	case d.Allowed && n > 0 && d.Token == 0 && !d.Replayed:
		t.Errorf("acquired a lease with Token 0; want a token to release it with")
	case (!d.Allowed || n == 0) && d.Token != 0:
		t.Errorf("Take(n=%d), allowed %v: Token = %d; want 0, no lease acquired", n, d.Allowed, d.Token)
	case !d.Allowed && d.RetryAfter > d.ResetAfter:
		t.Errorf("rejected with RetryAfter = %v after ResetAfter = %v; want it no later", d.RetryAfter, d.ResetAfter)
	}
}

// release calls s.Release and fails the test on an error.
func release(t *testing.T, s admit.Store, key string, lim admit.Limit, token uint64) {
	t.Helper()
	if err := s.Release(t.Context(), admit.Lease{Key: key, Limit: lim, Token: token}); err != nil {
		t.Fatalf("Release(token %d) under %v: unexpected error: %v", token, lim, err)
	}
}

// fillConcurrently acquires n leases of key under lim from 4 goroutines, and checks that every one
// was admitted and the key is then full.
func fillConcurrently(t *testing.T, s admit.Store, key string, lim admit.Limit, n int64) {
	t.Helper()
	var next, rejected atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for next.Add(1) <= n {
				d, err := s.Take(t.Context(), admit.Request{Key: key, Limit: lim, Cost: 1})
				if err != nil {
					t.Errorf("Take: %v", err)
					return
				}
				if !d.Allowed {
					rejected.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() || rejected.Load() != 0 {
		t.Fatalf("%d leases of %v acquired at once: %d rejected; want none", n, lim, rejected.Load())
	}
	run(t, nil, s, key, lim, []step{
		{n: 0, allowed: true, remaining: 0},
		{n: 1, allowed: false, remaining: 0},
	})
}

func testAcquireUpToTheLimit(t *testing.T, b Backend) {
	lim := cc(3, time.Minute)
	s := b.Open(t)
	ds := run(t, b, s, newKey(), lim, []step{
		{n: 0, allowed: true, remaining: 3},
		{n: 1, allowed: true, remaining: 2, fresh: true},
		{n: 1, allowed: true, remaining: 1},
		{n: 1, allowed: true, remaining: 0},
		{n: 1, allowed: false, remaining: 0},
		{n: 0, allowed: true, remaining: 0},
	})
	seen := map[uint64]bool{}
	for _, d := range ds[1:4] {
		seen[d.Token] = true
	}
	if len(seen) != 3 {
		t.Errorf("three leases of one key have tokens %d, %d and %d; want three distinct", ds[1].Token, ds[2].Token, ds[3].Token)
	}
	// The first lease expires first: the rejection waits for it, the peek reports the last one's end.
	if r := ds[4].RetryAfter; r > ds[1].ResetAfter || r <= ds[1].ResetAfter-slack(lim.Period) {
		t.Errorf("a rejection of a full key: RetryAfter %v; want when the first lease expires, %v", r, ds[1].ResetAfter)
	}
}

func testReleaseFreesASlot(t *testing.T, b Backend) {
	lim := cc(3, time.Minute)
	s1, s2 := b.Open(t), b.Open(t)
	key := newKey()
	ds := run(t, b, s1, key, lim, []step{
		{n: 1, allowed: true, remaining: 2, fresh: true},
		{n: 1, allowed: true, remaining: 1},
		{n: 1, allowed: true, remaining: 0},
		{n: 1, allowed: false, remaining: 0},
	})
	release(t, s2, key, lim, ds[1].Token) // any Store of the backend releases
	d := run(t, b, s1, key, lim, []step{
		{n: 0, allowed: true, remaining: 1},
		{n: 1, allowed: true, remaining: 0},
		{n: 1, allowed: false, remaining: 0},
	})[1]
	for _, tok := range []uint64{ds[0].Token, ds[2].Token, d.Token} {
		release(t, s2, key, lim, tok)
	}
	run(t, b, s1, key, lim, []step{{n: 0, allowed: true, remaining: 3}})
	if p := take(t, s1, key, lim, 0); p.ResetAfter != 0 {
		t.Errorf("a peek with every lease released: ResetAfter %v; want 0", p.ResetAfter)
	}
}

func testDoubleRelease(t *testing.T, b Backend) {
	lim := cc(2, time.Minute)
	s := b.Open(t)
	key := newKey()
	ds := run(t, b, s, key, lim, []step{
		{n: 1, allowed: true, remaining: 1, fresh: true},
		{n: 1, allowed: true, remaining: 0},
	})
	for range 3 {
		release(t, s, key, lim, ds[0].Token)
	}
	// Only the one lease was freed: the other still holds its unit.
	run(t, b, s, key, lim, []step{
		{n: 0, allowed: true, remaining: 1},
		{n: 1, allowed: true, remaining: 0},
		{n: 1, allowed: false, remaining: 0},
	})
}

func testReleaseUnknownOrExpired(t *testing.T, b Backend) {
	const ttl = 300 * time.Millisecond
	lim := cc(2, ttl)
	s := b.Open(t)
	// A missing key: nothing to release, and nothing written.
	missing := newKey()
	release(t, s, missing, lim, 12345)
	run(t, b, s, missing, lim, []step{{n: 0, allowed: true, remaining: 2}})
	// The leases are still live at the rejection, and so are the new ones at the last.
	timed(t, b, ttl/5, func(tm *timing) {
		// A token the key never held: the key is unchanged.
		key := newKey()
		ds := tm.run(s, key, lim, []step{
			{n: 1, allowed: true, remaining: 1, fresh: true},
			{n: 1, allowed: true, remaining: 0},
		})
		release(t, s, key, lim, ds[0].Token^ds[1].Token|1<<63)
		tm.run(s, key, lim, []step{{n: 1, allowed: false, remaining: 0}})
		// An expired lease: releasing it frees nothing more than its expiry did.
		tm.sleep(ttl)
		release(t, s, key, lim, ds[0].Token)
		tm.run(s, key, lim, []step{
			{n: 1, allowed: true, remaining: 1, fresh: true},
			{n: 1, allowed: true, remaining: 0},
			{n: 1, allowed: false, remaining: 0},
		})
	})
}

// testExpiryReturnsCapacity checks the lease TTL: leases acquired half a TTL apart expire half a TTL
// apart, each returning its own unit, and a rejection waits for the first to expire.
//
// On a real clock a sleep may overrun by as much as the machine is loaded; the second lease outlives
// the first by half a TTL, so the TTL is long enough (a second) that only an overrun of half a second
// could expire both.
func testExpiryReturnsCapacity(t *testing.T, b Backend) {
	const ttl = time.Second
	lim := cc(2, ttl)
	s := b.Open(t)
	// The second lease is still live when the first has expired and the two Takes after it are made.
	timed(t, b, ttl/5, func(tm *timing) {
		key := newKey()
		tm.run(s, key, lim, []step{
			{n: 1, allowed: true, remaining: 1, fresh: true},
			{sleep: ttl / 2, n: 1, allowed: true, remaining: 0},
		})
		d := tm.take(s, key, lim, 1)
		if d.Allowed || d.RetryAfter > ttl/2+time.Millisecond {
			t.Fatalf("a full key whose first lease is half a TTL old: %+v; want rejected until it expires, at most %v from now", d, ttl/2)
		}
		tm.sleep(d.RetryAfter)
		tm.run(s, key, lim, []step{
			{n: 1, allowed: true, remaining: 0}, // only the first has expired
			{n: 1, allowed: false, remaining: 0},
		})
		tm.sleep(ttl)
		if p := tm.take(s, key, lim, 0); p.Remaining != 2 || p.ResetAfter != 0 {
			t.Fatalf("a peek one TTL after the last lease: %+v; want every unit back, ResetAfter 0", p)
		}
	})
}

// testPeekAcquiresNothing checks that peeks of a key with leases, full or not, take no lease.
func testPeekAcquiresNothing(t *testing.T, b Backend) {
	lim := cc(2, time.Minute)
	s := b.Open(t)
	key := newKey()
	steps := []step{{n: 1, allowed: true, remaining: 1, fresh: true}}
	for range 10 {
		steps = append(steps, step{n: 0, allowed: true, remaining: 1})
	}
	steps = append(steps, step{n: 1, allowed: true, remaining: 0})
	for range 10 {
		steps = append(steps, step{n: 0, allowed: true, remaining: 0})
	}
	run(t, b, s, key, lim, steps)
}

func testReleaseInvalid(t *testing.T, b Backend) {
	s := b.Open(t)
	lim := cc(1, time.Minute)
	key := newKey()
	d := run(t, b, s, key, lim, []step{{n: 1, allowed: true, remaining: 0, fresh: true}})[0]
	other := lim
	other.Algorithm = admit.FixedWindow
	bad := lim
	bad.Rate = 0
	for _, tc := range []struct {
		name string
		l    admit.Lease
		want error
	}{
		{"fixed_window_limit", admit.Lease{Key: key, Limit: other, Token: d.Token}, admit.ErrInvalidRequest},
		{"token_0", admit.Lease{Key: key, Limit: lim, Token: 0}, admit.ErrInvalidRequest},
		{"empty_key", admit.Lease{Key: "", Limit: lim, Token: d.Token}, admit.ErrInvalidRequest},
		{"invalid_limit", admit.Lease{Key: key, Limit: bad, Token: d.Token}, admit.ErrInvalidLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Release(t.Context(), tc.l)
			if !errors.Is(err, tc.want) || errors.Is(err, admit.ErrUnavailable) {
				t.Fatalf("Release(%+v) = %v; want an error matching %v only", tc.l, err, tc.want)
			}
		})
	}
	// None released the lease.
	run(t, b, s, key, lim, []step{{n: 1, allowed: false, remaining: 0}})
}

func testConcurrencyCostInvalid(t *testing.T, b Backend) {
	s := b.Open(t)
	lim := cc(3, time.Minute)
	key := newKey()
	if d, err := s.Take(t.Context(), admit.Request{Key: key, Limit: lim, Cost: 2}); !errors.Is(err, admit.ErrInvalidRequest) || d.Allowed {
		t.Fatalf("Take(n=2) under %v = %+v, %v; want ErrInvalidRequest: a lease is one request in flight", lim, d, err)
	}
	run(t, b, s, key, lim, []step{{n: 0, allowed: true, remaining: 3}})
}

// testInFlightNeverAboveTheLimit has goroutines on two Stores acquire a lease, hold it a little,
// and release it, over and over, while a count of the holders is checked against the limit.
func testInFlightNeverAboveTheLimit(t *testing.T, b Backend) {
	const limit, workers, rounds = 3, 12, 40
	lim := cc(limit, time.Minute)
	key := newKey()
	stores := [2]admit.Store{b.Open(t), b.Open(t)}
	var holders, most, admitted atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			s := stores[w%2]
			for range rounds {
				d, err := s.Take(t.Context(), admit.Request{Key: key, Limit: lim, Cost: 1})
				if err != nil {
					t.Errorf("Take: %v", err)
					return
				}
				checkDecision(t, d, lim, 1)
				if !d.Allowed {
					time.Sleep(50 * time.Microsecond)
					continue
				}
				admitted.Add(1)
				h := holders.Add(1)
				for m := most.Load(); h > m && !most.CompareAndSwap(m, h); m = most.Load() {
				}
				time.Sleep(100 * time.Microsecond) // hold it
				holders.Add(-1)                    // before the release: the slot may be taken at once
				if err := s.Release(t.Context(), admit.Lease{Key: key, Limit: lim, Token: d.Token}); err != nil {
					t.Errorf("Release: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > limit {
		t.Fatalf("%d holders of one key at once; want at most %d", m, limit)
	}
	if admitted.Load() < limit {
		t.Fatalf("%d leases acquired in all; want many (released leases must be acquired again)", admitted.Load())
	}
	run(t, b, stores[0], key, lim, []step{{n: 0, allowed: true, remaining: limit}})
}

// testConcurrencyMultiPolicy decides a concurrency limit with the other algorithms, all-or-nothing:
// a rejection by any acquires no lease, and a rejection by the concurrency limit consumes nothing
// from the others.
func testConcurrencyMultiPolicy(t *testing.T, b Backend) {
	s := b.Open(t)
	slot := newSlot()
	lims := []admit.Limit{
		{Name: "rate", Algorithm: admit.GCRA, Rate: 10, Period: time.Second, Burst: 10},
		{Name: "daily", Algorithm: admit.FixedWindow, Rate: 3, Period: 24 * time.Hour},
		{Name: "inflight", Algorithm: admit.Concurrency, Rate: 2, Period: time.Minute},
	}
	keys := []string{"rl:limittest:" + slot + ":rate", "rl:limittest:" + slot + ":daily", "rl:limittest:" + slot + ":inflight"}
	var tokens []uint64
	for i := range 2 {
		allowed, ds := takeAll(t, s, requests(lims, keys, 1, ""))
		if !allowed || ds[2].Token == 0 || ds[2].Remaining != int64(1-i) {
			t.Fatalf("take %d of 3 policies with room: %+v; want allowed, a lease", i, ds)
		}
		tokens = append(tokens, ds[2].Token)
	}
	// The concurrency limit is full: rejected, and nothing consumed from the others.
	allowed, ds := takeAllUnchecked(t, s, requests(lims, keys, 1, ""))
	if allowed || ds[2].Allowed || ds[2].Token != 0 || !ds[1].Allowed || ds[1].Remaining != 1 {
		t.Fatalf("take with the leases all held: %+v; want rejected by inflight only, daily still at 1 left", ds)
	}
	release(t, s, keys[2], lims[2], tokens[0])
	// daily has 1 left: admitted, with a lease; then daily is full and rejects, and acquires no lease.
	allowed, ds = takeAll(t, s, requests(lims, keys, 1, ""))
	if !allowed || ds[2].Token == 0 {
		t.Fatalf("take after a release: %+v; want allowed, a lease", ds)
	}
	release(t, s, keys[2], lims[2], ds[2].Token)
	allowed, ds = takeAllUnchecked(t, s, requests(lims, keys, 1, ""))
	if allowed || ds[1].Allowed || !ds[2].Allowed || ds[2].Token != 0 || ds[2].Remaining != 1 {
		t.Fatalf("take with daily full: %+v; want rejected by daily, inflight reported as it is (1 left), no lease", ds)
	}
	if got := remaining(t, s, lims, keys); got[2] != 1 {
		t.Fatalf("after a rejection by daily: inflight has %d left; want 1 (the rejection acquired nothing)", got[2])
	}
}

// testConcurrencyReplay checks idempotent retries of an acquire: the retry returns the first
// Decision, with its lease's token, and acquires nothing; releasing that token frees the lease.
func testConcurrencyReplay(t *testing.T, b Backend) {
	s1, s2 := b.Open(t), b.Open(t)
	slot := newSlot()
	lims := []admit.Limit{cc(2, time.Minute)}
	keys := []string{"rl:limittest:" + slot + ":inflight"}
	rs := requests(lims, keys, 1, newID())
	allowed, first := takeAll(t, s1, rs)
	if !allowed || first[0].Token == 0 || first[0].Replayed {
		t.Fatalf("first acquire with an ID: %+v; want a lease", first[0])
	}
	_, again := takeAll(t, s2, rs)
	checkReplay(t, first, again)
	// Another request with another ID gets a lease of its own.
	_, other := takeAll(t, s1, requests(lims, keys, 1, newID()))
	if !other[0].Allowed || other[0].Token == first[0].Token || other[0].Remaining != 0 {
		t.Fatalf("an acquire with another ID: %+v; want a lease of its own, the last", other[0])
	}
	release(t, s2, keys[0], lims[0], again[0].Token)
	run(t, b, s1, keys[0], lims[0], []step{{n: 0, allowed: true, remaining: 1}})
}

// testNewLimitKeepsLeases checks that a key's leases count under a new rate or lease TTL (a
// concurrency key's shape does not change with them: "cc", docs/keys.md), never answering an error: a
// lease acquired under a longer TTL keeps its expiry, and is reported as ending within the new one.
func testNewLimitKeepsLeases(t *testing.T, b Backend) {
	s := b.Open(t)
	key := newKey()
	long, short := cc(2, time.Minute), cc(3, time.Second)
	ds := run(t, b, s, key, long, []step{
		{n: 1, allowed: true, remaining: 1, fresh: true},
		{n: 1, allowed: true, remaining: 0},
	})
	d := run(t, b, s, key, short, []step{
		{n: 1, allowed: true, remaining: 0},
		{n: 1, allowed: false, remaining: 0},
		{n: 0, allowed: true, remaining: 0},
	})[1]
	if d.RetryAfter > short.Period || d.ResetAfter > short.Period {
		t.Fatalf("a rejection under a TTL of %v of leases acquired under %v: %+v; want its waits at most the new TTL", short.Period, long.Period, d)
	}
	release(t, s, key, short, ds[0].Token) // a lease is released under either Limit
	run(t, b, s, key, long, []step{{n: 0, allowed: true, remaining: 0}, {n: 0, allowed: true, remaining: 0}})
	run(t, b, s, key, short, []step{{n: 0, allowed: true, remaining: 1}})
}

// testShortLeaseKeepsLongerLeases checks that a lease acquired under a shorter lease TTL never
// shortens the life of a key whose longer leases are still in flight: a key holding a lease of a
// minute, then one of a fifth of a second, still holds the first once the second has expired. It
// acquires the short lease both alone and with a request ID (in Redis, two paths of the script).
//
// On a real clock Backend.Sleep lets at least the time asked pass, so the short lease has expired
// after it however loaded the machine; the long one outlives it by most of a minute.
func testShortLeaseKeepsLongerLeases(t *testing.T, b Backend) {
	const shortTTL = 200 * time.Millisecond
	long, short := cc(2, time.Minute), cc(3, shortTTL)
	s := b.Open(t)
	var keys [2]string
	for i, id := range []string{"", newID()} {
		keys[i] = "rl:limittest:" + newSlot() + ":inflight"
		run(t, b, s, keys[i], long, []step{{n: 1, allowed: true, remaining: 1, fresh: true}})
		if _, ds := takeAll(t, s, requests([]admit.Limit{short}, keys[i:i+1], 1, id)); !ds[0].Allowed || ds[0].Remaining != 1 {
			t.Fatalf("a lease under a TTL of %v (ID %q) of a key holding one of %v: %+v; want admitted, 1 left", short.Period, id, long.Period, ds[0])
		}
	}
	b.Sleep(t, 2*shortTTL)
	for i, key := range keys {
		if p := take(t, s, key, long, 0); p.Remaining != 1 {
			t.Fatalf("key %d, %v after a lease of %v joined one of %v: a peek under %v reports %d left; want 1, the longer lease still in flight",
				i, 2*shortTTL, short.Period, long.Period, long, p.Remaining)
		}
		run(t, b, s, key, long, []step{
			{n: 1, allowed: true, remaining: 0},
			{n: 1, allowed: false, remaining: 0},
		})
	}
}
