package guard_test

import (
	"cmp"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/guard"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/limittest"
	"github.com/admit-dev/admit/memstore"
)

// An OverLimitCache over a correct store decides exactly as the store does.
func TestOverLimitConformance(t *testing.T) {
	limittest.TestStore(t, func(t *testing.T) limittest.Backend {
		clock := newClock()
		s := memstore.New(memstore.Options{Now: clock.Now})
		t.Cleanup(func() { s.Close() })
		return &memBackend{clock: clock, store: guard.NewOverLimitCache(s, guard.OverLimitOptions{Now: clock.Now})}
	})
}

// newMem returns a memstore on clock, closed at cleanup.
func newMem(t testing.TB, clock *limittest.Clock) *memstore.Store {
	s := memstore.New(memstore.Options{Now: clock.Now})
	t.Cleanup(func() { s.Close() })
	return s
}

// take calls s.Take and fails t on an error.
func take(t *testing.T, s admit.Store, r admit.Request) admit.Decision {
	t.Helper()
	d, err := s.Take(t.Context(), r)
	if err != nil {
		t.Fatalf("Take(%q, cost %d): %v", r.Key, r.Cost, err)
	}
	return d
}

// A client hammering a full key costs one backend call per MaxAge (a second by default) until its
// RetryAfter, and gets the Decisions an uncached store gives.
func TestOverLimitHammerMemstore(t *testing.T) {
	clock := newClock()
	backend := &counting{next: newMem(t, clock)}
	cache := guard.NewOverLimitCache(backend, guard.OverLimitOptions{Now: clock.Now})
	plain := newMem(t, clock) // the same requests, uncached

	for step := range 60 {
		for range 50 {
			got, want := take(t, cache, req("k")), take(t, plain, req("k"))
			if got != want {
				t.Fatalf("step %d: cached Decision %+v, uncached %+v", step, got, want)
			}
		}
		clock.Advance(time.Second) // the window of a minute ends at step 59
	}
	// 3 admissions and one rejection reach the backend; the other 46 rejections of the first
	// step are local; each of the next 59 steps asks the backend once, the rejection learnt being
	// a second old, and answers its other 49 locally.
	if got, want := backend.calls.Load(), int64(4+59); got != want {
		t.Fatalf("%d backend calls, want %d", got, want)
	}
	if got, want := cache.Hits(), uint64(60*50-4-59); got != want {
		t.Fatalf("Hits() = %d, want %d", got, want)
	}
	// The window is over: the next Take goes to the backend and is admitted.
	if d := take(t, cache, req("k")); !d.Allowed {
		t.Fatalf("Take after the window: %+v, want allowed", d)
	}
	if got := backend.calls.Load(); got != 4+59+1 {
		t.Fatalf("%d backend calls, want %d", got, 4+59+1)
	}
}

func TestOverLimitHammerRedis(t *testing.T) {
	srv := redistest.Start(t)
	backend := &counting{next: newRedisStore(t, srv.URL(), time.Second)}
	// An hour of age: the 1000 local answers must not depend on the machine's speed.
	cache := guard.NewOverLimitCache(backend, guard.OverLimitOptions{MaxAge: time.Hour})
	for range 3 {
		if d := take(t, cache, req("k")); !d.Allowed {
			t.Fatalf("Take of a fresh key: %+v", d)
		}
	}
	first := take(t, cache, req("k"))
	evalsha := evalshaCalls(t, srv)
	if first.Allowed || first.RetryAfter <= 0 {
		t.Fatalf("fourth Take: %+v, want rejected with a RetryAfter", first)
	}
	for range 1000 {
		d := take(t, cache, req("k"))
		if d.Allowed || d.Limit != perMinute || d.Remaining != first.Remaining || d.RetryAfter <= 0 || d.RetryAfter > first.RetryAfter ||
			d.ResetAfter < d.RetryAfter || d.ResetAfter > first.ResetAfter || d.Token != 0 || d.Replayed {
			t.Fatalf("local Decision %+v, after the backend's %+v", d, first)
		}
	}
	if got := backend.calls.Load(); got != 4 {
		t.Fatalf("%d backend calls, want 4", got)
	}
	// Redis agrees: the key still holds 3, and the cached requests issued no EVALSHA.
	if got, err := srv.Do(t, "GET", "rl:k").ToString(); err != nil || got != "3" {
		t.Fatalf("GET rl:k = %q, %v; want 3", got, err)
	}
	if got := evalshaCalls(t, srv); got != evalsha {
		t.Fatalf("Redis counted %d EVALSHA calls during the hammering, want 0", got-evalsha)
	}
}

// evalshaCalls returns the number of EVALSHA calls srv has served.
func evalshaCalls(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	stats, err := srv.Do(t, "INFO", "commandstats").ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range splitLines(stats) {
		var calls int
		if n, _ := fmt.Sscanf(line, "cmdstat_evalsha:calls=%d", &calls); n == 1 {
			return calls
		}
	}
	t.Fatal("no cmdstat_evalsha in INFO commandstats")
	return 0
}

func splitLines(s string) []string {
	var lines []string
	start := 0
	for i := range len(s) {
		if s[i] == '\n' {
			lines = append(lines, s[start:i])
			start = i + 1
		}
	}
	return append(lines, s[start:])
}

// Only a request with at least the cached cost, no ID, and consuming, is answered locally.
func TestOverLimitWhatGoesToTheBackend(t *testing.T) {
	clock := newClock()
	backend := &counting{next: newMem(t, clock)}
	cache := guard.NewOverLimitCache(backend, guard.OverLimitOptions{Now: clock.Now})
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 10, Period: time.Minute}
	r := func(cost int64, id string) admit.Request {
		return admit.Request{Key: "{k}", Limit: lim, Cost: cost, ID: id}
	}
	take(t, cache, r(8, ""))
	if d := take(t, cache, r(5, "")); d.Allowed || d.Remaining != 2 {
		t.Fatalf("Take of 5 with 2 left: %+v", d)
	}
	calls := backend.calls.Load()
	for _, c := range []struct {
		name    string
		r       admit.Request
		backend bool
	}{
		{"same cost", r(5, ""), false},
		{"larger cost", r(9, ""), false},
		{"smaller cost", r(4, ""), true},
		{"peek", r(0, ""), true},
		{"with an ID", r(5, "id-1"), true},
		{"another limit", admit.Request{Key: "{k}", Limit: admit.Limit{Algorithm: admit.FixedWindow, Rate: 10, Period: time.Hour}, Cost: 5}, true},
		{"invalid cost", r(11, ""), true},
	} {
		_, _ = cache.Take(t.Context(), c.r)
		now := backend.calls.Load()
		if went := now != calls; went != c.backend {
			t.Errorf("%s: went to the backend = %v, want %v", c.name, went, c.backend)
		}
		calls = now
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := cache.Take(cancelled, r(5, "")); err == nil {
		t.Error("Take with a cancelled context answered locally")
	}
}

func TestOverLimitNeverConcurrencyOrShadow(t *testing.T) {
	clock := newClock()
	backend := &counting{next: newMem(t, clock)}
	cache := guard.NewOverLimitCache(backend, guard.OverLimitOptions{Now: clock.Now})
	conc := admit.Limit{Algorithm: admit.Concurrency, Rate: 1, Period: time.Minute}
	shadow := perMinute
	shadow.Shadow = true
	for _, lim := range []admit.Limit{conc, shadow} {
		calls := backend.calls.Load()
		for i := range 10 {
			d := take(t, cache, admit.Request{Key: "k-" + lim.Algorithm.String(), Limit: lim, Cost: 1})
			if i >= int(lim.Rate) && d.Allowed {
				t.Fatalf("%v: Take %d allowed", lim, i)
			}
		}
		if got := backend.calls.Load() - calls; got != 10 {
			t.Errorf("%v: %d backend calls for 10 Takes, want 10", lim, got)
		}
	}
	if got := cache.Hits(); got != 0 {
		t.Fatalf("Hits() = %d, want 0", got)
	}
}

func TestOverLimitRefundClears(t *testing.T) {
	clock := newClock()
	backend := &counting{next: newMem(t, clock)}
	cache := guard.NewOverLimitCache(backend, guard.OverLimitOptions{Now: clock.Now})
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 10, Period: time.Minute}
	reserved := admit.Request{Key: "k", Limit: lim, Cost: 10}
	d := take(t, cache, reserved)
	if !d.Allowed {
		t.Fatalf("reserve: %+v", d)
	}
	one := admit.Request{Key: "k", Limit: lim, Cost: 1}
	take(t, cache, one)
	take(t, cache, one)
	if cache.Hits() != 1 {
		t.Fatalf("Hits() = %d, want 1: the key is cached", cache.Hits())
	}
	if _, err := cache.Settle(t.Context(), admit.Reservation{Request: reserved, Token: d.Token}, 4); err != nil {
		t.Fatal(err)
	}
	if d := take(t, cache, one); !d.Allowed {
		t.Fatalf("Take after a refund of 6: %+v, want allowed", d)
	}
	if cache.Hits() != 1 {
		t.Fatalf("Hits() = %d after the refund, want 1", cache.Hits())
	}
}

func TestOverLimitTakeAll(t *testing.T) {
	clock := newClock()
	backend := &counting{next: newMem(t, clock)}
	cache := guard.NewOverLimitCache(backend, guard.OverLimitOptions{Now: clock.Now})
	plain := newMem(t, clock)
	perHour := admit.Limit{Name: "per-hour", Algorithm: admit.FixedWindow, Rate: 5, Period: time.Hour}
	rs := []admit.Request{
		{Key: "{s}:a", Limit: perMinute, Cost: 1},
		{Key: "{s}:b", Limit: perHour, Cost: 1},
	}
	var got, want [2]admit.Decision
	for i := range 12 {
		gotOK, err := cache.TakeAll(t.Context(), rs, got[:])
		if err != nil {
			t.Fatal(err)
		}
		wantOK, err := plain.TakeAll(t.Context(), rs, want[:])
		if err != nil {
			t.Fatal(err)
		}
		if gotOK != wantOK || got != want {
			t.Fatalf("TakeAll %d: cached %v %+v, uncached %v %+v", i, gotOK, got, wantOK, want)
		}
		if i == 7 {
			// Fill per-hour too, through the cache: now both keys are known rejected.
			for range 2 {
				take(t, cache, rs[1])
				take(t, plain, rs[1])
			}
		}
	}
	// One rejected, one not: TakeAll went to the backend; once both were cached it answered locally
	// from then on.
	if cache.Hits() == 0 {
		t.Fatal("no TakeAll answered locally once both keys were known rejected")
	}
}

// However many keys are rejected, the table holds at most MaxEntries; once entries expire, new
// rejections take their place.
func TestOverLimitBounded(t *testing.T) {
	clock := newClock()
	backend := newMem(t, clock)
	cache := guard.NewOverLimitCache(backend, guard.OverLimitOptions{MaxEntries: 100, Now: clock.Now})
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 1, Period: time.Minute}
	fill := func(prefix string) {
		for i := range 5000 {
			r := admit.Request{Key: fmt.Sprintf("%s-%d", prefix, i), Limit: lim, Cost: 1}
			take(t, cache, r)
			take(t, cache, r) // rejected: remembered if there is room
			if n := cache.Len(); n > 100 {
				t.Fatalf("Len() = %d after %d keys, want at most 100", n, i+1)
			}
		}
	}
	fill("a")
	if n := cache.Len(); n == 0 {
		t.Fatal("nothing cached")
	}
	clock.Advance(time.Minute)
	hits := cache.Hits()
	fill("b")
	// The keys of "b" that were remembered answer locally: expired "a" entries made room.
	for i := range 5000 {
		take(t, cache, admit.Request{Key: fmt.Sprintf("b-%d", i), Limit: lim, Cost: 1})
	}
	if cache.Hits() == hits {
		t.Fatal("no new key was remembered after the old entries expired")
	}
}

// BenchmarkOverLimitHotKey floods one full key from 8 clients per CPU, through the cache and without
// it, and reports the backend calls each Take cost (backend-calls/op) and the backend calls a second
// (backend-calls/s): the round trips the cache saves under a hot-key flood. Through the cache, a
// rejection is asked again once it is MaxAge old (a second by default, 250 ms in cached-250ms), so
// the key costs at most one backend call per MaxAge however many clients hammer it; the benchmark
// fails if it costs more. Run it for a few seconds to see the bound:
//
//	go test -run XXX -bench OverLimitHotKey -benchtime 3s ./guard
func BenchmarkOverLimitHotKey(b *testing.B) {
	srv := redistest.Start(b)
	hot := admit.Request{Key: "rl:hot", Limit: admit.Limit{Name: "hot", Algorithm: admit.FixedWindow, Rate: 100, Period: time.Hour}, Cost: 1}
	for _, bc := range []struct {
		name   string
		cached bool
		maxAge time.Duration // 0: the default
	}{{"redis/uncached", false, 0}, {"redis/cached", true, 0}, {"redis/cached-250ms", true, 250 * time.Millisecond}} {
		b.Run(bc.name, func(b *testing.B) {
			srv.Do(b, "FLUSHALL")
			backend := &counting{next: newRedisStore(b, srv.URL(), time.Second)}
			var store admit.Store = backend
			if bc.cached {
				store = guard.NewOverLimitCache(backend, guard.OverLimitOptions{MaxAge: bc.maxAge})
			}
			ctx := context.Background()
			for range hot.Limit.Rate + 1 { // fill the key; the last Take is rejected
				if _, err := store.Take(ctx, hot); err != nil {
					b.Fatal(err)
				}
			}
			backend.calls.Store(0)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					d, err := store.Take(ctx, hot)
					if err != nil || d.Allowed {
						b.Fatalf("Take of the full key: %+v, %v", d, err)
					}
				}
			})
			elapsed := time.Since(start)
			calls := backend.calls.Load()
			b.ReportMetric(float64(calls)/float64(b.N), "backend-calls/op")
			b.ReportMetric(float64(calls)/elapsed.Seconds(), "backend-calls/s")
			if bc.cached {
				// One refresh per MaxAge of the run, and the one a run's last moment may start.
				bound := cmp.Or(bc.maxAge, guard.DefaultMaxAge)
				if most := int64(elapsed/bound) + 1; calls > most {
					b.Errorf("%d backend calls in %v, want at most %d: one per %v", calls, elapsed, most, bound)
				}
			}
		})
	}
}

// A Take whose clock reading is older than a rejection learnt meanwhile (another goroutine ran
// between the two) answers no longer a RetryAfter than the backend gave: the cache reads its clock
// after the remembered rejection, never before.
func TestOverLimitStaleClockReading(t *testing.T) {
	clock := newClock()
	limit := admit.Limit{Algorithm: admit.FixedWindow, Rate: 1, Period: 2 * time.Millisecond}
	key := "rl:test:stale"
	var c *guard.OverLimitCache
	var learnt admit.Decision
	interleave := false
	now := func() time.Time {
		t0 := clock.Now()
		if interleave {
			// Another goroutine, 250µs later, fills the key and learns its rejection; then this
			// reading, taken before it, is returned.
			interleave = false
			clock.Advance(250 * time.Microsecond)
			take(t, c, admit.Request{Key: key, Limit: limit, Cost: 1})
			learnt = take(t, c, admit.Request{Key: key, Limit: limit, Cost: 1})
		}
		return t0
	}
	c = guard.NewOverLimitCache(newMem(t, clock), guard.OverLimitOptions{Now: now})
	interleave = true
	d := take(t, c, admit.Request{Key: key, Limit: limit, Cost: 1})
	if learnt.Allowed || learnt.RetryAfter != limit.Period {
		t.Fatalf("the interleaved rejection: %+v; want RetryAfter %v", learnt, limit.Period)
	}
	if d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > limit.MaxWait() {
		t.Fatalf("Take: %+v; want rejected with a RetryAfter in (0, %v]", d, limit.MaxWait())
	}
}
