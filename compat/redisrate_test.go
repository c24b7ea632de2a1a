package compat

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/redisstore"
)

// admit's GCRA must decide as go-redis/redis_rate (v10) does, on the same request sequences
// (docs/gcra.md). Both run on one harness-started Redis, each through its own public API and its own script:
// admit's redisstore.Store.Take, redis_rate's Limiter.AllowN. Neither can be given a clock — both
// scripts read Redis's TIME — so the two calls of a step run at instants a few hundred microseconds
// apart. The test makes that harmless instead of hoping: GCRA's decisions change only when now
// crosses anchor + k·T (the anchor being when the bucket was last found empty, T the emission
// interval), so every step is scheduled half an interval away from any such instant, and the test
// checks, from the real times around each step, that it ran there. A step that ran too near a
// crossing (the machine stalled) is not compared; the sequence starts again on fresh keys. So is a
// step after the wall clock was stepped (NTP on a freshly booted machine): Redis's TIME reads the
// wall clock, the schedule the monotonic one, and once they part the model is no longer the
// stores' time.
//
// What must agree, on every compared step:
//
//   - allowed, exactly;
//   - remaining, exactly, where redis_rate reports what fits. On a rejection redis_rate reports 0 by
//     design; admit reports what fits at once, so a redis_rate peek (cost 0) right after gives the
//     figure to compare. One exception, redis_rate's own rounding: on a bucket found empty, the exact
//     remaining is an integer, burst − cost, which redis_rate computes as a float quotient of times in
//     seconds since 2017 (about 3·10^8 s, so errors of about 10^-7 s) and then truncates: it reports
//     burst − cost − 1 about half the time. There admit must report burst − cost and redis_rate either.
//   - retry_after (on rejections) and reset_after, within 1 ms (admit rounds up to the millisecond,
//     redis_rate reports float seconds) plus the real time between the two scripts of the step and of
//     the step that anchored the bucket (each read TIME at its own instant), plus a microsecond per
//     interval admitted since (admit rounds the interval up to the microsecond).
//
// Every step is also checked against the test's own model of the bucket, in whole intervals.
func TestAgreesWithRedisRate(t *testing.T) {
	srv := redistest.Start(t)
	// A patient command timeout: the test compares decisions, not deadlines, and twelve sequences
	// at once on a loaded machine may wait longer than the default 200 ms for a CPU.
	store, err := redisstore.New(redisstore.Config{URL: srv.URL(), CommandTimeout: 5 * time.Second, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	limiter := redis_rate.NewLimiter(rdb)

	const sequences, steps, rounds = 12, 50, 4
	var total seqStats
	// Steps that ran too near a crossing are skipped; on a loaded machine (the race detector, other
	// packages' tests) many more do. Half of a round's steps compared is still hundreds of exact
	// comparisons: a machine too loaded for that runs another round (new keys, new sequences), up
	// to rounds.
	for round := range rounds {
		stats := make([]seqStats, sequences)
		var wg sync.WaitGroup
		for i := range sequences {
			wg.Go(func() {
				seed := uint64(round*sequences + i)
				s := &sequence{t: t, store: store, limiter: limiter, r: rand.New(rand.NewPCG(seed, 2017)), stats: &stats[i]}
				s.run(steps)
			})
		}
		wg.Wait()
		for _, s := range stats {
			total.add(s)
		}
		t.Logf("after round %d: %+v", round+1, total)
		if total.compared >= sequences*steps/2 {
			break
		}
	}
	if total.compared < sequences*steps/2 {
		t.Errorf("compared %d of %d steps in %d rounds (%d ran too near a crossing); want at least %d", total.compared, rounds*sequences*steps, rounds, total.unclean, sequences*steps/2)
	}
	if total.allowed < 100 || total.rejected < 50 || total.emptied < 50 || total.peeks < 20 {
		t.Errorf("steps by kind %+v; want many admissions, rejections, empty buckets and peeks", total)
	}
}

// seqStats counts the steps of sequences by kind.
type seqStats struct {
	compared, unclean, allowed, rejected, emptied, peeks, truncated int
	maxSkew                                                         time.Duration // the largest |admit − redis_rate| of a duration
}

func (s *seqStats) add(o seqStats) {
	s.compared += o.compared
	s.unclean += o.unclean
	s.allowed += o.allowed
	s.rejected += o.rejected
	s.emptied += o.emptied
	s.peeks += o.peeks
	s.truncated += o.truncated
	s.maxSkew = max(s.maxSkew, o.maxSkew)
}

// A sequence is one random limit and the requests made under it, with a model of the bucket: its TAT
// is anchor + m·T, and the step in slot j runs at anchor + (j + ½)·T.
type sequence struct {
	t       *testing.T
	store   *redisstore.Store
	limiter *redis_rate.Limiter
	r       *rand.Rand
	stats   *seqStats

	lim    admit.Limit
	rl     redis_rate.Limit
	key    string
	T      time.Duration // admit's emission interval
	burst  int64
	empty  bool          // the bucket is full: no anchor
	anchor time.Time     // when the bucket was last found empty, within skew
	wall   time.Time     // the anchor on the wall clock alone, which Redis's TIME reads
	skew   time.Duration // the real time around the anchoring step
	m      int64         // the TAT is anchor + m·T
	slot   int64
}

// restart draws a new limit and fresh keys.
func (s *sequence) restart() {
	rate := 1 + s.r.Int64N(20)
	interval := time.Duration(40+s.r.IntN(40)) * time.Millisecond
	period := (time.Duration(rate) * interval).Round(time.Millisecond) // rarely a multiple of rate: T is rounded
	var burst int64
	switch s.r.IntN(4) {
	case 0: // the rate
	case 1:
		burst = 1
	default:
		burst = 1 + s.r.Int64N(12)
	}
	s.lim = admit.Limit{Name: "compat", Algorithm: admit.GCRA, Rate: rate, Period: period, Burst: burst}
	if err := s.lim.Validate(); err != nil {
		s.t.Fatalf("%v: %v", s.lim, err)
	}
	s.burst = s.lim.Capacity()
	s.rl = redis_rate.Limit{Rate: int(rate), Period: period, Burst: int(s.burst)}
	var b [8]byte
	for i := range b {
		b[i] = byte(s.r.Uint32())
	}
	s.key = "rl:compat:" + hex.EncodeToString(b[:])
	s.T = s.lim.EmissionInterval()
	s.empty, s.m, s.slot = true, 0, 0
}

func (s *sequence) run(steps int) {
	s.restart()
	for range steps {
		if !s.step() {
			s.stats.unclean++
			s.restart()
		}
	}
}

// center returns the instant of slot j: half an interval after anchor + j·T.
func (s *sequence) center(j int64) time.Time {
	return s.anchor.Add(time.Duration(j)*s.T + s.T/2)
}

// step makes one request at the next slot and checks it, and reports whether it ran where it was
// scheduled, so that its decisions could be compared.
func (s *sequence) step() bool {
	t := s.t
	if !s.empty {
		switch p := s.r.IntN(20); {
		case p < 8: // the same slot, if it is not over
		case p < 17:
			s.slot += 1 + s.r.Int64N(2)
		default: // long enough for the bucket to empty
			s.slot = max(s.slot, s.m) + s.r.Int64N(2)
		}
		for s.center(s.slot).Before(time.Now()) {
			s.slot++
		}
		time.Sleep(time.Until(s.center(s.slot)))
	}
	var n int64
	switch p := s.r.IntN(10); {
	case p < 1:
		n = 0
	case p < 4:
		n = 1
	case p < 5:
		n = s.burst
	default:
		n = s.r.Int64N(s.burst + 1)
	}

	ctx := context.Background()
	before := time.Now()
	d, err := s.store.Take(ctx, admit.Request{Key: s.key, Limit: s.lim, Cost: n})
	if err != nil {
		t.Errorf("admit: %v", err)
		return false
	}
	rr, err := s.limiter.AllowN(ctx, s.key, s.rl, int(n))
	if err != nil {
		t.Errorf("redis_rate: %v", err)
		return false
	}
	peek, err := s.limiter.AllowN(ctx, s.key, s.rl, 0)
	if err != nil {
		t.Errorf("redis_rate peek: %v", err)
		return false
	}
	after := time.Now()
	spread := after.Sub(before)

	// The model, in whole intervals: was the step where it was meant to be?
	wasEmpty := s.empty || s.m <= s.slot
	if !s.empty {
		lo, hi := s.center(s.slot).Add(-s.T/2+s.T/5), s.center(s.slot).Add(s.T/2-s.T/5)
		if before.Add(-s.skew).Before(lo) || after.Add(s.skew).After(hi) {
			return false // too near anchor + k·T for the stores to be compared
		}
	}
	if !s.empty && clockStepped(s.anchor, s.wall, before, s.T/20) {
		return false // the wall clock was stepped (NTP): Redis's TIME no longer keeps the model's time
	}
	if wasEmpty && n > 0 && spread > s.T/20 {
		return false // the new anchor would be too uncertain
	}
	var allowed bool
	var remaining int64
	switch {
	case wasEmpty:
		allowed, remaining = true, s.burst-n
	case s.m-s.slot+n <= s.burst: // backlog m − slot − ½ intervals, plus n, within the burst
		allowed, remaining = true, s.burst-(s.m-s.slot)-n
	default:
		allowed, remaining = false, s.burst-(s.m-s.slot)
	}

	desc := fmt.Sprintf("%v (T %v), slot %d, TAT anchor + %d·T, cost %d", s.lim, s.T, s.slot, s.m, n)
	rrAllowed := rr.RetryAfter == -1 // redis_rate's mark of an admission (its Allowed counts units: 0 for a peek)
	rrRemaining := rr.Remaining
	if !rrAllowed {
		rrRemaining = peek.Remaining // what fits, which redis_rate reports as 0 on a rejection
		if rr.Remaining != 0 || rr.Allowed != 0 {
			t.Errorf("%s: redis_rate rejected with allowed %d, remaining %d; want 0 and 0", desc, rr.Allowed, rr.Remaining)
		}
	} else if rr.Allowed != int(n) {
		t.Errorf("%s: redis_rate admitted %d units; want %d", desc, rr.Allowed, n)
	}
	if d.Allowed != allowed || d.Remaining != remaining {
		t.Errorf("%s: admit allowed %v, remaining %d; the model: %v, %d", desc, d.Allowed, d.Remaining, allowed, remaining)
	}
	switch {
	case d.Allowed != rrAllowed:
		t.Errorf("%s: admit allowed %v, redis_rate %v (%+v)", desc, d.Allowed, rrAllowed, rr)
	case int64(rrRemaining) == d.Remaining:
	case wasEmpty && int64(rrRemaining) == d.Remaining-1:
		s.stats.truncated++ // redis_rate's float quotient of an exact integer, truncated
	default:
		t.Errorf("%s: admit remaining %d, redis_rate %d (%+v, peek %+v)", desc, d.Remaining, rrRemaining, rr, peek)
	}
	tolerance := time.Millisecond + spread + s.skew + time.Duration(s.m)*time.Microsecond
	check := func(what string, a, b time.Duration) {
		skew := (a - b).Abs()
		s.stats.maxSkew = max(s.stats.maxSkew, skew)
		if skew > tolerance {
			t.Errorf("%s: %s admit %v, redis_rate %v; want them within %v", desc, what, a, b, tolerance)
		}
	}
	check("reset_after", d.ResetAfter, rr.ResetAfter)
	if !d.Allowed {
		check("retry_after", d.RetryAfter, rr.RetryAfter)
	}

	s.stats.compared++
	switch {
	case n == 0:
		s.stats.peeks++
	case allowed:
		s.stats.allowed++
	default:
		s.stats.rejected++
	}
	if wasEmpty {
		s.stats.emptied++
	}
	// The bucket after the step.
	switch {
	case !allowed || n == 0:
		s.empty = s.empty || wasEmpty
	case wasEmpty:
		s.empty, s.anchor, s.skew, s.m, s.slot = false, before.Add(spread/2), spread, n, 0
		s.wall = s.anchor.Round(0)
	default:
		s.m += n
	}
	return true
}

// clockStepped reports whether the wall clock, which both scripts read through Redis's TIME, moved
// more than by from the monotonic clock, which schedules the steps, between anchor and now: a step
// or a fast slew of the system clock (NTP on a freshly booted machine), not a decision to compare.
// wall is anchor without its monotonic reading.
func clockStepped(anchor, wall, now time.Time, by time.Duration) bool {
	return (now.Round(0).Sub(wall) - now.Sub(anchor)).Abs() > by
}

func TestClockStepped(t *testing.T) {
	anchor := time.Now()
	now := anchor.Add(100 * time.Millisecond)
	if clockStepped(anchor, anchor.Round(0), now, time.Millisecond) {
		t.Error("a wall clock that kept time reported as stepped")
	}
	if !clockStepped(anchor, anchor.Round(0).Add(-400*time.Millisecond), now, time.Millisecond) {
		t.Error("a wall clock stepped 400 ms forward since the anchor not reported")
	}
	if !clockStepped(anchor, anchor.Round(0).Add(5*time.Millisecond), now, time.Millisecond) {
		t.Error("a wall clock stepped 5 ms back since the anchor not reported")
	}
}
