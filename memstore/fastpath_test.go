package memstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-dev/admit"
)

// TestFastPathDecidesAsTheGeneralPath runs one random sequence of single Requests on two Stores on
// one clock, Take on one (its fast path wherever it applies) and TakeAll of one Request on the other
// (always the general path), and checks that every Decision, token and error is the same: fixed
// windows, aligned ones, GCRA, peeks, costs over the limit, shadow policies, keys switched to
// another algorithm, state a longer Period left (corrupt for the shorter), and Requests under
// Overrides set and deleted meanwhile (GCRA's clamp among them, and numbers a cost does not fit).
func TestFastPathDecidesAsTheGeneralPath(t *testing.T) {
	clock := newClock()
	fast := New(Options{Now: clock.Now, SweepInterval: -1})
	general := New(Options{Now: clock.Now, SweepInterval: -1})
	limits := []admit.Limit{
		{Algorithm: admit.FixedWindow, Rate: 5, Period: time.Second},
		{Algorithm: admit.FixedWindow, Rate: 5, Period: 3 * time.Second}, // a longer window: corrupt for the first
		{Algorithm: admit.FixedWindow, Rate: 4, Period: time.Second, Aligned: true},
		{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Second, Shadow: true},
		{Algorithm: admit.GCRA, Rate: 10, Period: time.Second, Burst: 4},
		{Algorithm: admit.GCRA, Rate: 1, Period: time.Second, Burst: 3}, // a longer tolerance: corrupt for the first
		{Algorithm: admit.GCRA, Rate: 2, Period: time.Second, Shadow: true},
		{Algorithm: admit.SlidingWindow, Rate: 3, Period: time.Second},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	fastCases, overriddenCases := 0, 0
	for step := range 20_000 {
		clock.Advance(time.Duration(rng.IntN(40_000)) * time.Microsecond)
		lim := limits[rng.IntN(len(limits))]
		if rng.IntN(4) > 0 { // most steps under the two plain Limits, so keys stay live
			lim = limits[[]int{0, 4}[rng.IntN(2)]]
		}
		r := admit.Request{Key: fmt.Sprint("k", rng.IntN(6)), Limit: lim, Cost: rng.Int64N(lim.Capacity() + 1)}
		if rng.IntN(2) == 0 { // under the subject's Override, when one is set
			r.OverrideKey = "rl:p:o:{" + r.Key + "}"
		}
		if rng.IntN(50) == 0 { // an Override set or deleted, on both Stores alike
			o := admit.Override{Key: "rl:p:o:{" + fmt.Sprint("k", rng.IntN(6)) + "}", Rate: 1 + rng.Int64N(12), Burst: rng.Int64N(7)}
			del := rng.IntN(3) == 0
			for _, s := range []*Store{fast, general} {
				if del {
					s.DeleteOverride(context.Background(), o.Key)
				} else if err := s.SetOverride(context.Background(), o); err != nil {
					t.Fatal(err)
				}
			}
		}
		if sh := fast.tab.shard(r.Key); sh.live(r.Key) != nil && sh.live(r.Key).alg == lim.Algorithm {
			fastCases++
			if sh.override(r.OverrideKey, fast.tab.now()) != nil {
				overriddenCases++
			}
		}
		got, gotErr := fast.Take(context.Background(), r)
		var want [1]admit.Decision
		_, wantErr := general.TakeAll(context.Background(), []admit.Request{r}, want[:])
		if got != want[0] || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("step %d, %+v: Take = %+v, %v; the general path %+v, %v", step, r, got, gotErr, want[0], wantErr)
		}
	}
	if fastCases < 5_000 || overriddenCases < 1_000 {
		t.Fatalf("only %d of the steps found live state of their algorithm, %d of them under an Override: the test misses the fast path", fastCases, overriddenCases)
	}
}

// TestFastPathAdmitsExactlyTheCapacityUnderContention has goroutines take one unit at a time from one
// live key at a frozen clock, most through Take's fast path (a compare-and-swap under the shard's read
// lock) and some through TakeAll (the general path, under its write lock), until the key is
// exhausted: exactly its capacity must be admitted, each admission seeing a Remaining of its own.
func TestFastPathAdmitsExactlyTheCapacityUnderContention(t *testing.T) {
	for _, lim := range []admit.Limit{
		{Algorithm: admit.FixedWindow, Rate: 5000, Period: time.Hour},
		{Algorithm: admit.FixedWindow, Rate: 5000, Period: time.Hour, Aligned: true},
		{Algorithm: admit.GCRA, Rate: 1, Period: time.Hour, Burst: 5000},
	} {
		t.Run(fmt.Sprintf("%v/aligned=%v", lim.Algorithm, lim.Aligned), func(t *testing.T) {
			s := New(Options{Now: newClock().Now, SweepInterval: -1})
			defer s.Close()
			const goroutines, calls = 8, 1000 // 8,000 calls for 5,000 units
			r := admit.Request{Key: "hot", Limit: lim, Cost: 1}
			first := mustTake(t, s, r.Key, lim, 1)  // the general path creates the key
			admitted := make([][]int64, goroutines) // the Remaining of each admission, per goroutine
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for range calls {
						var d admit.Decision
						var err error
						if g%4 == 3 {
							ds := make([]admit.Decision, 1)
							_, err = s.TakeAll(context.Background(), []admit.Request{r}, ds)
							d = ds[0]
						} else {
							d, err = s.Take(context.Background(), r)
						}
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							admitted[g] = append(admitted[g], d.Remaining)
						}
					}
				})
			}
			wg.Wait()
			seen := map[int64]bool{first.Remaining: true}
			for _, rs := range admitted {
				for _, rem := range rs {
					if seen[rem] {
						t.Fatalf("two admissions saw Remaining %d", rem)
					}
					seen[rem] = true
				}
			}
			if int64(len(seen)) != lim.Capacity() {
				t.Fatalf("%d units admitted under %v; want exactly its capacity, %d", len(seen), lim, lim.Capacity())
			}
		})
	}
}

// TestFastPathWaitsForNoReader holds a shard's lock for reading, as a caller preempted on the fast
// path would, and checks that Take still decides on a live key of the shard: callers of a hot key
// do not queue behind one another (while no writer of the shard waits).
func TestFastPathWaitsForNoReader(t *testing.T) {
	for _, lim := range []admit.Limit{
		{Algorithm: admit.FixedWindow, Rate: 10, Period: time.Hour},
		{Algorithm: admit.FixedWindow, Rate: 10, Period: time.Hour, Aligned: true},
		{Algorithm: admit.GCRA, Rate: 10, Period: time.Hour},
	} {
		s := New(Options{Now: newClock().Now, SweepInterval: -1})
		mustTake(t, s, "hot", lim, 1)
		sh := s.tab.shard("hot")
		sh.mu.RLock()
		done := make(chan admit.Decision)
		go func() {
			d, err := s.Take(context.Background(), admit.Request{Key: "hot", Limit: lim, Cost: 1})
			if err != nil {
				t.Error(err)
			}
			done <- d
		}()
		select {
		case d := <-done:
			if !d.Allowed || d.Remaining != 8 {
				t.Errorf("%v: the second Take = %+v; want allowed with 8 remaining", lim, d)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%v: Take waited for a caller that holds the shard for reading", lim)
		}
		sh.mu.RUnlock()
		s.Close()
	}
}

// TestFastPathAndSettleLoseNoUpdate reserves 300 units of one key at a frozen clock, then settles
// each at 0 (a refund, under the shard's write lock) while goroutines take one unit at a time from
// the key through Take's fast path until it is exhausted and every refund is in: the key must have
// admitted exactly its capacity plus one unit per refund. A refund written over a fast path's
// compare-and-swap, or a compare-and-swap over a refund, admits one unit more or fewer.
func TestFastPathAndSettleLoseNoUpdate(t *testing.T) {
	for _, lim := range []admit.Limit{
		{Algorithm: admit.FixedWindow, Rate: 3000, Period: time.Hour},
		{Algorithm: admit.GCRA, Rate: 1, Period: time.Hour, Burst: 3000},
	} {
		t.Run(lim.Algorithm.String(), func(t *testing.T) {
			s := New(Options{Now: newClock().Now, SweepInterval: -1})
			defer s.Close()
			ctx := context.Background()
			r := admit.Request{Key: "hot", Limit: lim, Cost: 1}
			const refunds = 300
			var reserved []admit.Reservation
			for range refunds {
				d := mustTake(t, s, r.Key, lim, 1)
				reserved = append(reserved, admit.Reservation{Request: r, Token: d.Token})
			}
			var admitted atomic.Int64
			admitted.Add(refunds)
			settled := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				defer close(settled)
				for _, res := range reserved {
					last := admitted.Load()
					if _, err := s.Settle(ctx, res, 0); err != nil {
						t.Error(err)
						return
					}
					// The next refund once a taker has admitted a unit since this one: each
					// lands among the takers' compare-and-swaps.
					for admitted.Load() == last && !t.Failed() {
						runtime.Gosched()
					}
				}
			})
			for range 4 {
				wg.Go(func() {
					for done := false; ; {
						d, err := s.Take(ctx, r)
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							admitted.Add(1)
							continue
						}
						if done {
							return // exhausted after the last refund
						}
						select {
						case <-settled:
							done = true
						default:
							runtime.Gosched() // let the settler refund
						}
					}
				})
			}
			wg.Wait()
			if got, want := admitted.Load(), lim.Capacity()+refunds; got != want {
				t.Fatalf("%d units admitted under %v with %d refunded; want exactly %d", got, lim, refunds, want)
			}
			if d := mustTake(t, s, r.Key, lim, 0); d.Remaining != 0 {
				t.Fatalf("the exhausted key has %d remaining; want 0", d.Remaining)
			}
		})
	}
}

// TestFastPathUnderChurn has goroutines take from hot keys of one shard, fixed windows of 5 ms and
// GCRA buckets, through the fast path, while a fake clock moves by fractions of a window (so windows
// end and buckets empty under callers in flight) and another goroutine churns the shard's storage
// under its write lock: new keys (reclaim on insert, index growth, arena compaction), a sweep
// (removal, and the rebuild of a shrunk shard), Len, TakeAll of two hot keys, and keys switched
// between the two algorithms. No call may fail but a Take of a key live under the other algorithm,
// no fixed window may admit more than its Rate nor two of its admissions see the same Remaining, no
// two GCRA admissions of a key may leave the same TAT (their tokens), and no bucket may admit more
// than its burst and what the clock's moves refilled.
func TestFastPathUnderChurn(t *testing.T) {
	clock := newClock()
	s := New(Options{Now: clock.Now, Shards: 1, SweepInterval: -1, SweepBudget: 16})
	defer s.Close()
	ctx := context.Background()
	fixed := admit.Limit{Algorithm: admit.FixedWindow, Rate: 40, Period: 5 * time.Millisecond}
	gcra := admit.Limit{Algorithm: admit.GCRA, Rate: 10_000, Period: time.Second, Burst: 30} // T = 100 µs
	cold := admit.Limit{Algorithm: admit.FixedWindow, Rate: 1, Period: 10 * time.Millisecond}
	const hot = 3
	fixedKey := func(i int) string { return fmt.Sprint("{hot}f", i) }
	gcraKey := func(i int) string { return fmt.Sprint("{hot}g", i) }

	type admission struct {
		key       string
		token     uint64
		remaining int64
	}
	var mu sync.Mutex
	var admissions []admission
	record := func(d admit.Decision, key string) {
		if d.Allowed {
			mu.Lock()
			admissions = append(admissions, admission{key, d.Token, d.Remaining})
			mu.Unlock()
		}
	}
	var elapsed atomic.Int64 // the fake time the clock has moved
	stop := make(chan struct{})
	var stopOnce sync.Once
	var wg sync.WaitGroup
	// The takers move the clock, by up to 300 µs every 8 calls, for a fake second in all.
	advance := func(rng *rand.Rand) {
		d := time.Duration(rng.IntN(300)) * time.Microsecond
		clock.Advance(d)
		if elapsed.Add(int64(d)) >= int64(time.Second) {
			stopOnce.Do(func() { close(stop) })
		}
	}
	wg.Go(func() { // the churn
		rng := rand.New(rand.NewPCG(5, 6))
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			switch n % 8 {
			case 0, 1, 2:
				// New keys: bursts that take the shard past the size it rebuilds at once swept.
				for i := range 1 + rng.IntN(1500) {
					if _, err := s.Take(ctx, admit.Request{Key: fmt.Sprint("cold", n, "-", i), Limit: cold, Cost: 1}); err != nil {
						t.Error(err)
						return
					}
				}
			case 3:
				s.sweep()
			case 4:
				s.Len()
			case 5:
				i := rng.IntN(hot)
				rs := []admit.Request{{Key: fixedKey(i), Limit: fixed, Cost: 1}, {Key: gcraKey(i), Limit: gcra, Cost: 1}}
				ds := make([]admit.Decision, 2)
				allowed, err := s.TakeAll(ctx, rs, ds)
				if err != nil {
					t.Error(err)
					return
				}
				if allowed { // else each Decision is a peek of its key
					record(ds[0], rs[0].Key)
					record(ds[1], rs[1].Key)
				}
			case 6, 7:
				// A key taken under both algorithms: live state of the other is corrupt, ended
				// state is a missing key.
				lim := []admit.Limit{fixed, gcra}[rng.IntN(2)]
				if _, err := s.Take(ctx, admit.Request{Key: "{hot}switch", Limit: lim, Cost: 1}); err != nil && !errors.Is(err, admit.ErrCorruptState) {
					t.Error(err)
					return
				}
			}
		}
	})
	for g := range 4 {
		wg.Go(func() { // the takers
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if n%8 == 7 {
					advance(rng)
				}
				i := rng.IntN(hot)
				key, lim := fixedKey(i), fixed
				if rng.IntN(2) == 0 {
					key, lim = gcraKey(i), gcra
				}
				if g == 3 && rng.IntN(8) == 0 { // the switching key, on the fast path too
					key = "{hot}switch"
				}
				d, err := s.Take(ctx, admit.Request{Key: key, Limit: lim, Cost: 1})
				if err != nil {
					if key != "{hot}switch" || !errors.Is(err, admit.ErrCorruptState) {
						t.Error(err)
						return
					}
					continue
				}
				if key != "{hot}switch" {
					record(d, key)
				}
			}
		})
	}
	wg.Wait()

	type window struct {
		key   string
		token uint64
	}
	perWindow := map[window]map[int64]bool{}  // a fixed window's admissions by Remaining
	perBucket := map[string]map[uint64]bool{} // a GCRA key's admissions by token
	for _, a := range admissions {
		if a.token == 0 {
			t.Fatalf("an admission of %s has no token", a.key)
		}
		if a.key[5] == 'f' {
			w := window{a.key, a.token}
			if perWindow[w] == nil {
				perWindow[w] = map[int64]bool{}
			}
			if perWindow[w][a.remaining] {
				t.Fatalf("two admissions of %s in its window %d saw Remaining %d", a.key, a.token, a.remaining)
			}
			perWindow[w][a.remaining] = true
			continue
		}
		if perBucket[a.key] == nil {
			perBucket[a.key] = map[uint64]bool{}
		}
		if perBucket[a.key][a.token] {
			t.Fatalf("two admissions of %s left the same TAT (token %d): one was lost", a.key, a.token)
		}
		perBucket[a.key][a.token] = true
	}
	for w, rems := range perWindow {
		if int64(len(rems)) > fixed.Rate {
			t.Fatalf("%s admitted %d units in its window %d; its Rate is %d", w.key, len(rems), w.token, fixed.Rate)
		}
	}
	most := gcra.Capacity() + elapsed.Load()/int64(gcra.EmissionInterval()) + 1
	for key, tokens := range perBucket {
		if int64(len(tokens)) > most {
			t.Fatalf("%s admitted %d units; a bucket of %d refilled for %v holds at most %d", key, len(tokens), gcra.Capacity(), time.Duration(elapsed.Load()), most)
		}
	}
	if len(perWindow) < 100 || len(admissions) < 2000 {
		t.Fatalf("%d windows and %d admissions: the test misses its case", len(perWindow), len(admissions))
	}
}

// TestFastPathMeetsNoFalseCorruptState has goroutines take from keys of one shard on the real clock
// under Limits whose state is only just valid — a fixed window of 1 ms, and a GCRA bucket of 5 units
// that empties in 0.5 ms — so that a caller deciding at a time before another's commit would find the
// key's window or TAT further ahead than its Limit allows. No call may fail: each decides at the
// shard's latest time once it falls back to the general path.
func TestFastPathMeetsNoFalseCorruptState(t *testing.T) {
	s := New(Options{Shards: 1})
	defer s.Close()
	ctx := context.Background()
	limits := []admit.Limit{
		{Algorithm: admit.FixedWindow, Rate: 1_000_000, Period: time.Millisecond},
		{Algorithm: admit.GCRA, Rate: 10_000, Period: time.Second, Burst: 5},
	}
	deadline := time.Now().Add(300 * time.Millisecond)
	var calls atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for n := 0; time.Now().Before(deadline); n++ {
				lim := limits[(g+n)%2]
				key := fmt.Sprint("{k}", lim.Algorithm, n%2)
				if _, err := s.Take(ctx, admit.Request{Key: key, Limit: lim, Cost: 1}); err != nil {
					t.Error(err)
					return
				}
				calls.Add(1)
			}
		})
	}
	wg.Wait()
	if calls.Load() < 1000 {
		t.Fatalf("only %d calls: the test misses its case", calls.Load())
	}
}
