package memstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/limittest"
)

// modelEntry is the reference model's state of one key: a fixed window's count and end, or a GCRA
// key's TAT (in microseconds since the Store's base, which is its end), under alg.
type modelEntry struct {
	alg   admit.Algorithm
	count int64
	end   time.Duration
}

// FuzzTableMatchesAModel drives a Store of one shard — a few keys of lengths 1 to 512, a cap of 1 to
// 4 entries, a clock that also goes back, sweeps — with random fixed-window and GCRA Takes, and
// compares every Decision and error with a reference model: a Go map of each key's state, decided
// by internal/algo's transitions as the kernels are. An ended entry is a missing key, whatever its
// algorithm; live state of another algorithm or of a longer window is corrupt; a new key is refused
// with ErrFull exactly when the live entries of other keys fill the shard (reclaim, with a budget
// larger than the shard, removes every ended one first). Settles of the last admission are checked
// the same way, against internal/algo's settle transitions and the tokens Take returned. Each input
// is a cap byte, then three bytes per step: what to do (0-3 a Take under one of four Limits, 4 a
// Settle, 5 and 6 the clock forward or back, 7 a sweep), a key, and a cost, an actual cost or a
// clock step.
func FuzzTableMatchesAModel(f *testing.F) {
	// settles: a refund, an overrun, one after the key's end
	f.Add([]byte{2, 0, 0, 2, 4, 0, 0, 0, 0, 1, 4, 0, 7, 2, 1, 1, 4, 0, 0, 5, 0, 150, 4, 0, 3})
	// a key's fixed window ends; GCRA starts it afresh
	f.Add([]byte{2, 0, 0, 1, 5, 0, 200, 2, 0, 1})
	f.Add([]byte{2, 0, 0, 1, 0, 1, 1, 0, 2, 1, 3, 0, 9, 4, 0, 40, 0, 3, 1})
	f.Add([]byte{1, 0, 0, 3, 4, 1, 1, 0, 1, 1, 3, 5, 200, 4, 1, 2, 5, 0, 0, 6, 0, 0, 2, 1, 0})
	f.Add([]byte{3, 2, 6, 1, 2, 7, 2, 3, 0, 9, 5, 0, 0, 2, 6, 1, 0, 6, 1, 3, 1, 130, 0, 7, 3})
	f.Add([]byte{4, 0, 1, 1, 0, 2, 1, 0, 3, 1, 0, 4, 1, 0, 5, 1, 3, 0, 250, 0, 6, 1, 6, 0, 0, 0, 7, 1})
	f.Fuzz(checkTableAgainstModel)
}

// checkTableAgainstModel runs one input of FuzzTableMatchesAModel.
func checkTableAgainstModel(t *testing.T, in []byte) {
	keys := []string{"a", "k123456", "k1234567", strings.Repeat("b", 15), strings.Repeat("c", 16),
		strings.Repeat("d", 17), strings.Repeat("e", 30), strings.Repeat("f", bound.MaxKeyLen)}
	limits := []admit.Limit{
		{Algorithm: admit.FixedWindow, Rate: 3, Period: 100 * time.Millisecond},
		{Algorithm: admit.FixedWindow, Rate: 5, Period: 300 * time.Millisecond}, // corrupt for the first
		{Algorithm: admit.GCRA, Rate: 20, Period: time.Second, Burst: 3},
		{Algorithm: admit.GCRA, Rate: 5, Period: time.Second, Burst: 2}, // more tolerance: corrupt for the other
	}
	if len(in) == 0 {
		return
	}
	in = in[:min(len(in), 1+3*400)] // 400 steps: longer inputs find nothing more, and minimize slowly
	capacity := 1 + int(in[0]%4)
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := limittest.NewClock(base)
	var last admit.Reservation // the last admission that consumed, to settle
	s := New(Options{Now: clock.Now, Shards: 1, SweepInterval: -1, SweepBudget: 64, MaxEntries: capacity})
	model := map[string]*modelEntry{}
	var read, latest time.Duration // the clock since the Store's base, and the shard's latest time
	liveOthers := func(key string) int {
		n := 0
		for k, e := range model {
			if k != key && e.end > latest {
				n++
			}
		}
		return n
	}
	for step, in := 0, in[1:]; len(in) >= 3; step, in = step+1, in[3:] {
		op, key, arg := in[0]%8, keys[int(in[1])%len(keys)], int64(in[2])
		switch op {
		case 5: // the clock goes forward, up to 255 ms
			clock.Advance(time.Duration(arg) * time.Millisecond)
			read += time.Duration(arg) * time.Millisecond
			continue
		case 6: // the clock goes back, up to 63 ms
			clock.Advance(-time.Duration(arg%64) * time.Millisecond)
			read -= time.Duration(arg%64) * time.Millisecond
			continue
		case 7:
			s.sweep()
			latest = max(latest, read)
			continue
		}
		if op == 4 {
			if last.Token != 0 {
				settleAgainstModel(t, s, model, last, arg%8, latestAfter(&latest, read), capacity, base, step)
			}
			continue
		}
		lim := limits[op%4]
		r := admit.Request{Key: key, Limit: lim, Cost: arg % (lim.Capacity() + 1)}
		got, gotErr := s.Take(context.Background(), r)
		latest = max(latest, read)

		// The model's decision.
		want, wantErr := admit.Decision{}, error(nil)
		e := model[key]
		if e != nil && e.end <= latest {
			delete(model, key) // ended: missing, whatever its algorithm
			e = nil
		}
		switch {
		case e != nil && e.alg != lim.Algorithm:
			wantErr = admit.ErrCorruptState
		case lim.Algorithm == admit.FixedWindow:
			var st *algo.FixedWindowState
			if e != nil {
				st = &algo.FixedWindowState{Count: e.count, TTL: e.end - latest}
				if algo.CheckFixedWindow(*st, lim.Period) != nil {
					wantErr = admit.ErrCorruptState
					break
				}
			}
			res := algo.FixedWindow(st, lim.Rate, lim.Period, r.Cost)
			want = admit.Decision{Allowed: res.Allowed, Limit: lim, Remaining: res.Remaining, RetryAfter: res.RetryAfter, ResetAfter: res.ResetAfter}
			switch {
			case res.Write == algo.WriteCreate && liveOthers(key) >= capacity:
				want, wantErr = admit.Decision{}, ErrFull
			case res.Write == algo.WriteCreate:
				model[key] = &modelEntry{alg: lim.Algorithm, count: r.Cost, end: latest + lim.Period}
			case res.Write == algo.WriteIncrement:
				e.count += r.Cost
			}
		default:
			g := algo.NewGCRAParams(lim)
			now := int64(latest / time.Microsecond)
			var tat int64
			if e != nil {
				tat = int64(e.end / time.Microsecond)
				if g.Check(algo.GCRAState{TAT: tat, TTL: e.end - latest}, now) != nil {
					wantErr = admit.ErrCorruptState
					break
				}
			}
			res := g.Decide(tat, now, r.Cost)
			want = admit.Decision{Allowed: res.Allowed, Limit: lim, Remaining: res.Remaining, RetryAfter: res.RetryAfter, ResetAfter: res.ResetAfter}
			switch {
			case res.Write && e == nil && liveOthers(key) >= capacity:
				want, wantErr = admit.Decision{}, ErrFull
			case res.Write && e == nil:
				model[key] = &modelEntry{alg: lim.Algorithm, end: time.Duration(res.TAT) * time.Microsecond}
			case res.Write:
				e.end = time.Duration(res.TAT) * time.Microsecond
			}
		}
		if got.Allowed && r.Cost > 0 && gotErr == nil {
			last = admit.Reservation{Request: r, Token: got.Token} // for a later Settle
		}
		got.Token = 0 // the fast path test and the conformance suite check tokens; Settle uses them
		if !errors.Is(gotErr, wantErr) || (gotErr == nil) != (wantErr == nil) || got != want {
			t.Fatalf("step %d, Take(%.20q, %v, cost %d) at %v: %+v, %v; the model: %+v, %v", step, key, lim, r.Cost, latest, got, gotErr, want, wantErr)
		}
		if n := s.Len(); n > capacity || n < len(model)-countEnded(model, latest) {
			t.Fatalf("step %d: the Store holds %d entries; the model %d live, cap %d", step, n, len(model)-countEnded(model, latest), capacity)
		}
	}
}

// countEnded returns how many of the model's entries have ended at now.
func countEnded(model map[string]*modelEntry, now time.Duration) int {
	n := 0
	for _, e := range model {
		if e.end <= now {
			n++
		}
	}
	return n
}

// latestAfter moves *latest, the shard's latest time, to read if that is later, and returns it.
func latestAfter(latest *time.Duration, read time.Duration) time.Duration {
	*latest = max(*latest, read)
	return *latest
}

// settleAgainstModel settles res at actual on s, and checks the Decision and error against the
// model's, whose state it then changes as the Store's settle transition does. now is the shard's
// time since the Store's base, which is the Unix time base.
func settleAgainstModel(t *testing.T, s *Store, model map[string]*modelEntry, res admit.Reservation, actual int64, now time.Duration, capacity int, base time.Time, step int) {
	t.Helper()
	got, gotErr := s.Settle(context.Background(), res, actual)
	lim, key, delta := res.Request.Limit, res.Request.Key, actual-res.Request.Cost
	want, wantErr := admit.Decision{}, error(nil)
	e := model[key]
	if e != nil && e.end <= now {
		delete(model, key) // ended: missing, whatever its algorithm
		e = nil
	}
	others := len(model) - countEnded(model, now)
	if e != nil {
		others--
	}
	baseNano := base.UnixNano()
	switch {
	case e != nil && e.alg != lim.Algorithm:
		wantErr = admit.ErrCorruptState
	case lim.Algorithm == admit.FixedWindow:
		var st *algo.FixedWindowState
		same := false
		if e != nil {
			st = &algo.FixedWindowState{Count: e.count, TTL: e.end - now}
			if algo.CheckFixedWindow(*st, lim.Period) != nil {
				wantErr = admit.ErrCorruptState
				break
			}
			same = uint64((baseNano+int64(e.end)+int64(time.Millisecond)-1)/int64(time.Millisecond)) == res.Token
		}
		r := algo.FixedWindowSettle(st, same, lim.Rate, lim.Period, delta)
		want = admit.Decision{Allowed: r.Allowed, Limit: lim, Remaining: r.Remaining, RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter}
		switch {
		case r.Write == algo.WriteNone:
		case r.Write == algo.WriteDelete:
			delete(model, key)
		case e == nil && others >= capacity:
			want, wantErr = admit.Decision{}, ErrFull
		case e == nil:
			model[key] = &modelEntry{alg: lim.Algorithm, count: r.Units, end: now + lim.Period}
		case r.Write == algo.WriteIncrement:
			e.count += r.Units
		case r.Write == algo.WriteDecrement:
			e.count -= r.Units
		}
	default:
		g := algo.NewGCRAParams(lim)
		micros := int64(now / time.Microsecond)
		var tat int64
		if e != nil {
			tat = int64(e.end / time.Microsecond)
			if g.Check(algo.GCRAState{TAT: tat, TTL: e.end - now}, micros) != nil {
				wantErr = admit.ErrCorruptState
				break
			}
		}
		r := algo.GCRASettle(tat, int64(res.Token)-baseNano/1000, micros, lim, delta)
		want = admit.Decision{Allowed: r.Allowed, Limit: lim, Remaining: r.Remaining, RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter}
		switch {
		case r.Delete:
			delete(model, key)
		case !r.Write:
		case e == nil && others >= capacity:
			want, wantErr = admit.Decision{}, ErrFull
		case e == nil:
			model[key] = &modelEntry{alg: lim.Algorithm, end: time.Duration(r.TAT) * time.Microsecond}
		default:
			e.end = time.Duration(r.TAT) * time.Microsecond
		}
	}
	if !errors.Is(gotErr, wantErr) || (gotErr == nil) != (wantErr == nil) || got != want {
		t.Fatalf("step %d, Settle(%.20q, %v, cost %d, token %d) at %d, at %v: %+v, %v; the model: %+v, %v",
			step, key, lim, res.Request.Cost, res.Token, actual, now, got, gotErr, want, wantErr)
	}
}
