package redisstore

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
)

// Issue 11: a Sentinel primary replaced under load, forced (SENTINEL FAILOVER, the old primary still
// running and taking writes until the sentinels demote it) and by a kill -9. Each run measures what
// docs/running-redis.md records: the writes the old primary admitted that the new one lacks, the
// window of failed decisions, and when the store's writes reach the new primary. It fails on
// behaviour only:
//   - a decision fails before the fault, or with an error that is not admit.ErrUnavailable;
//   - READONLY, or any failure, once the store writes to the new primary (after a grace of one
//     sentinelRefreshInterval for calls already in flight);
//   - a new primary's counter above the decisions that may have counted on it (a double count), or
//     lacking more than the decisions admitted from a second before the fault until the switch
//     (writes that had long replicated were lost);
//   - a key admitting more than G6's one extra window.

// lostWritesRun is one scenario of TestSentinelFailoverLostWrites: fault replaces the primary old
// and returns the new one, as the sentinels name it.
type lostWritesRun struct {
	name  string
	fault func(t *testing.T, st *redistest.Sentinel, old *redistest.Server) *redistest.Server
}

func TestSentinelFailoverLostWrites(t *testing.T) {
	for _, run := range []lostWritesRun{
		{"SentinelFailover", func(t *testing.T, st *redistest.Sentinel, _ *redistest.Server) *redistest.Server {
			return st.Failover(t)
		}},
		{"PrimaryKilled", func(t *testing.T, st *redistest.Sentinel, old *redistest.Server) *redistest.Server {
			old.Kill(t)
			return st.Primary(t)
		}},
	} {
		t.Run(run.name, func(t *testing.T) { testLostWrites(t, run) })
	}
}

func testLostWrites(t *testing.T, run lostWritesRun) {
	st := redistest.StartSentinel(t)
	s := open(t, st.URL())
	// Exhausted keys spend a small limit long before the fault; tight keys spend theirs about when
	// it comes, so that writes the old primary loses show as extra admissions; counted keys, under a
	// limit never reached, count every admitted decision.
	exhausted, tight, counted := loadKeys(t, 2), loadKeys(t, 2), loadKeys(t, 3)
	small := admit.Limit{Algorithm: admit.FixedWindow, Rate: 30, Period: time.Hour}
	medium := admit.Limit{Algorithm: admit.FixedWindow, Rate: 1500, Period: time.Hour}
	big := admit.Limit{Algorithm: admit.FixedWindow, Rate: 1_000_000, Period: time.Hour}
	le := startLoad(t, s, exhausted, small, 1)
	lt := startLoad(t, s, tight, medium, 2)
	lc := startLoad(t, s, counted, big, 3)

	time.Sleep(500 * time.Millisecond) // the exhausted keys spend their limit
	lc.mu.Lock()
	before := maps.Clone(lc.admitted) // decisions that have had a second to replicate by the fault
	lc.mu.Unlock()
	time.Sleep(time.Second)
	if n := le.failures() + lt.failures() + lc.failures(); n != 0 {
		t.Fatalf("%d decisions failed before the fault", n)
	}
	old := st.Primary(t)
	fault := time.Now()
	p := run.fault(t, st, old)
	named := time.Now()

	// The switch is over when the store's writes land on the new primary: a fresh key's counter
	// is there.
	var switched time.Time
	for {
		key := newKey(t)
		if _, err := s.Take(context.Background(), admit.Request{Key: key, Limit: big, Cost: 1}); err == nil && counter(t, p, key) == 1 {
			switched = time.Now()
			break
		}
		if time.Since(fault) > recoveryGuard {
			t.Fatalf("%v after the fault, the store's writes do not reach the new primary %s", recoveryGuard, p.Addr())
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // load on the new primary
	le.halt()
	lt.halt()
	lc.halt()
	requireSteady(t, s, append(append(append([]string(nil), exhausted...), tight...), counted...), big, 20)

	grace := switched.Add(sentinelRefreshInterval)
	for _, l := range []*loadRun{le, lt, lc} {
		l.checkErrors(t, switched) // READONLY only before the switch; nothing but ErrUnavailable
		l.mu.Lock()
		if !l.firstFail.IsZero() && l.firstFail.Before(fault) {
			t.Errorf("a decision failed %v before the fault: %v", fault.Sub(l.firstFail).Round(time.Millisecond), l.firstErr)
		}
		if l.lastFail.After(grace) {
			t.Errorf("a decision failed %v after the store's writes reached the new primary: %v",
				l.lastFail.Sub(switched).Round(time.Millisecond), l.lastErr)
		}
		l.mu.Unlock()
	}
	t.Logf("%s: old primary %s, new %s named %v after the fault; the store's writes on the new primary %v after; "+
		"exhausted keys: %s; tight keys: %s; counted keys: %s",
		run.name, old.Addr(), p.Addr(), named.Sub(fault).Round(time.Millisecond), switched.Sub(fault).Round(time.Millisecond),
		le.window(fault), lt.window(fault), lc.window(fault))

	for _, g := range []struct {
		what string
		l    *loadRun
		lim  admit.Limit
	}{{"exhausted", le, small}, {"tight", lt, medium}} {
		g.l.mu.Lock()
		for _, k := range g.l.keys {
			got := g.l.admitted[k]
			t.Logf("%s key %s: %d admitted, limit %d: %d extra", g.what, k, got, g.lim.Rate, got-int(g.lim.Rate))
			if got > 2*int(g.lim.Rate) {
				t.Errorf("%s key %s: %d admitted; G6 allows at most %d (the limit and one lost window)", g.what, k, got, 2*g.lim.Rate)
			}
		}
		g.l.mu.Unlock()
	}

	lc.mu.Lock()
	defer lc.mu.Unlock()
	lost, admitted := int64(0), 0
	for _, k := range counted {
		n := counter(t, p, k)
		mayLose := int64(lc.admitted[k] - before[k])
		t.Logf("counted key %s: %d admitted (%d in the last second before the fault and after it), %d failed; "+
			"counter on the new primary %d: %d admitted decisions lost",
			k, lc.admitted[k], mayLose, lc.failed[k], n, int64(lc.admitted[k])-n)
		if n > int64(lc.admitted[k]+lc.failed[k]) {
			t.Errorf("counted key %s: counter %d above the %d admitted and %d failed decisions (a double count)",
				k, n, lc.admitted[k], lc.failed[k])
		}
		if int64(lc.admitted[k])-n > mayLose {
			t.Errorf("counted key %s: %d admitted decisions lost, more than the %d admitted from a second before the fault on",
				k, int64(lc.admitted[k])-n, mayLose)
		}
		lost += max(0, int64(lc.admitted[k])-n)
		admitted += lc.admitted[k]
	}
	t.Logf("%s: %d of %d admitted decisions on the counted keys lost with the old primary", run.name, lost, admitted)
}
