package memstore_test

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/memstore"
)

// A flood inserts new keys at a steady rate on a fake clock, as an attacker who picks the keys
// (one per request, under a per-IP limit) would.
type flood struct {
	t        *testing.T
	clock    interface{ Advance(time.Duration) }
	store    *memstore.Store
	lim      admit.Limit
	perStep  int           // new keys per step
	step     time.Duration // fake time per step
	inserted int
}

// run inserts keys for d of fake time, calling each after every step.
func (f *flood) run(d time.Duration, each func()) {
	f.t.Helper()
	for elapsed := time.Duration(0); elapsed < d; elapsed += f.step {
		f.clock.Advance(f.step)
		for range f.perStep {
			take(f.t, f.store, f.key(f.inserted), f.lim, 1)
			f.inserted++
		}
		each()
	}
}

func (f *flood) key(i int) string { return "rl:flood:v1:{" + strconv.Itoa(i) + "}" }

// live returns how many of the keys inserted so far are in their window now: those of the last
// Period, if the flood has run that long.
func (f *flood) live() int {
	return min(f.inserted, f.perStep*int(f.lim.Period/f.step))
}

// TestKeyFloodStaysBounded floods a Store with 50,000 new keys per second for 20 seconds of fake
// time, under 100 ms windows: 5,000 keys are live at any moment. The Store must hold at most about
// twice that at every step (2 × live + one entry per shard) and keep every live count. Before reclaim
// paid per insert, a sweeper examining 256 entries per shard per second fell behind above about
// 16,000 new keys per second, and this flood reached about 780,000 entries.
func TestKeyFloodStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts 1,000,000 keys")
	}
	for _, tt := range []struct {
		name    string
		sweeper bool // run a sweeper pass every fake second, as its ticker would
	}{
		{"sweeper every second", true},
		{"no sweeper", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := newFakeClock()
			s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
			defer s.Close()
			f := &flood{
				t: t, clock: clock, store: s,
				lim:     admit.Limit{Algorithm: admit.FixedWindow, Rate: 1, Period: 100 * time.Millisecond},
				perStep: 50, step: time.Millisecond, // 50,000 keys per second
			}
			const slack = 64 // one entry per shard
			peak, steps := 0, 0
			f.run(20*time.Second, func() {
				steps++
				if tt.sweeper && steps%1000 == 0 {
					memstore.Sweep(s)
				}
				n := s.Len()
				if bound := 2*f.live() + slack; n > bound {
					t.Fatalf("after %d keys, %d of them live: Len() = %d; want at most %d", f.inserted, f.live(), n, bound)
				}
				peak = max(peak, n)
			})
			t.Logf("%d keys inserted, %d live at the end; peak Len() %d", f.inserted, f.live(), peak)
			// Reclaim removed no live entry: every key of the last window still holds its count.
			for i := f.inserted - f.live(); i < f.inserted; i++ {
				if d := take(t, s, f.key(i), f.lim, 0); d.Remaining != 0 {
					t.Fatalf("peek of live key %d = %+v; want its count kept (remaining 0)", i, d)
				}
			}
		})
	}
}

// TestExpiredFloodIsReclaimed floods a Store with 200,000 keys in one second of fake time, then lets
// them all expire: the entries must go back to the live ones after one sweeper pass (the ticker's
// next tick), or, with no sweeper at all, as other keys are inserted.
func TestExpiredFloodIsReclaimed(t *testing.T) {
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 1, Period: 100 * time.Millisecond}
	setup := func(t *testing.T) (*memstore.Store, *flood) {
		clock := newFakeClock()
		s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
		t.Cleanup(func() { s.Close() })
		f := &flood{t: t, clock: clock, store: s, lim: lim, perStep: 200, step: time.Millisecond}
		f.run(time.Second, func() {})
		take(t, s, "long-lived", perMinute3, 1)
		clock.Advance(lim.Period) // every flood key's window has ended
		return s, f
	}

	t.Run("one sweeper pass", func(t *testing.T) {
		s, _ := setup(t)
		if e, r := memstore.Sweep(s); s.Len() != 1 {
			t.Fatalf("Len() = %d after one sweep (examined %d, removed %d); want the 1 live entry", s.Len(), e, r)
		}
		if d := take(t, s, "long-lived", perMinute3, 0); d.Remaining != 2 {
			t.Fatalf("peek of the live key after the sweep = %+v; want remaining 2", d)
		}
	})

	t.Run("inserts of other keys", func(t *testing.T) {
		s, f := setup(t)
		before := s.Len()
		// Traffic goes on at a tenth of the flood's rate: 20,000 keys per second, for a few windows.
		f.perStep = 20
		f.run(5*lim.Period, func() {})
		want := 2*f.perStep*int(lim.Period/f.step) + 64 + 1 // twice the live keys, one per shard, long-lived
		t.Logf("Len() = %d after the flood expired, %d after %v of other keys", before, s.Len(), 5*lim.Period)
		if got := s.Len(); got > want {
			t.Fatalf("Len() = %d (from %d) after %v of 20,000 new keys per second; want at most %d",
				got, before, 5*lim.Period, want)
		}
		if d := take(t, s, "long-lived", perMinute3, 0); d.Remaining != 2 {
			t.Fatalf("peek of the live key after the inserts = %+v; want remaining 2", d)
		}
	})
}

// TestMaxEntries fills a Store to its cap. A new key is refused with ErrFull at once, never by
// evicting a live count; keys that hold an entry go on being decided exactly; a peek of a missing
// key answers; and new keys are admitted again once entries expire.
func TestMaxEntries(t *testing.T) {
	// The bubble's clock moves only if a goroutine waits on time: it shows that Take never waits.
	synctest.Test(t, func(t *testing.T) {
		clock := newFakeClock()
		s := memstore.New(memstore.Options{Now: clock.Now, Shards: 1, MaxEntries: 100, SweepInterval: -1})
		defer s.Close()
		lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Minute}
		short := admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Second}
		take(t, s, "full-key", lim, 3) // at its limit
		take(t, s, "some-key", lim, 1)
		for i := range 48 {
			take(t, s, fmt.Sprint("long", i), lim, 1)
		}
		for i := range 50 {
			take(t, s, fmt.Sprint("short", i), short, 1)
		}
		if got := s.Len(); got != 100 {
			t.Fatalf("Len() = %d; want 100, the cap", got)
		}
		started := time.Now()

		for i := range 1000 {
			d, err := s.Take(t.Context(), admit.Request{Key: fmt.Sprint("new", i), Limit: lim, Cost: 1})
			if !errors.Is(err, memstore.ErrFull) || !errors.Is(err, admit.ErrUnavailable) || d != (admit.Decision{}) {
				t.Fatalf("Take of a new key in a full Store = %+v, %v; want an error matching ErrFull and ErrUnavailable", d, err)
			}
			// The key at its limit stays rejected: its count was not evicted to make room.
			if d := take(t, s, "full-key", lim, 1); d.Allowed || d.Remaining != 0 || d.RetryAfter != time.Minute {
				t.Fatalf("Take of a key at its limit while full = %+v; want rejected, RetryAfter 1m", d)
			}
		}
		if !errors.Is(memstore.ErrFull, admit.ErrUnavailable) {
			t.Fatal("ErrFull does not match admit.ErrUnavailable")
		}
		// A peek of a missing key needs no entry.
		if d := take(t, s, "new0", lim, 0); !d.Allowed || d.Remaining != 3 || d.ResetAfter != 0 {
			t.Fatalf("peek of a missing key while full = %+v; want allowed, remaining 3", d)
		}
		// A key with an entry counts exactly.
		for _, want := range []admit.Decision{
			{Allowed: true, Remaining: 1, ResetAfter: time.Minute},
			{Allowed: true, Remaining: 0, ResetAfter: time.Minute},
			{Allowed: false, Remaining: 0, RetryAfter: time.Minute, ResetAfter: time.Minute},
		} {
			want.Limit = lim
			d := take(t, s, "some-key", lim, 1)
			if d.Allowed != (d.Token != 0) {
				t.Fatalf("Take of a held key while full = %+v; want a token exactly when allowed", d)
			}
			if d.Token = 0; d != want {
				t.Fatalf("Take of a held key while full = %+v; want %+v", d, want)
			}
		}
		if time.Since(started) != 0 {
			t.Fatalf("Takes in a full Store waited %v; want no wait at all", time.Since(started))
		}

		// Once the 50 short windows end, 50 new keys fit, and no more: the live entries stay.
		clock.Advance(time.Second)
		for i := range 50 {
			if d := take(t, s, fmt.Sprint("after", i), lim, 1); !d.Allowed || d.Remaining != 2 {
				t.Fatalf("Take of new key %d after 50 entries expired = %+v; want allowed, remaining 2", i, d)
			}
		}
		if _, err := s.Take(t.Context(), admit.Request{Key: "one-more", Limit: lim, Cost: 1}); !errors.Is(err, memstore.ErrFull) {
			t.Fatalf("Take of a 51st new key = %v; want ErrFull", err)
		}
		if d := take(t, s, "full-key", lim, 1); d.Allowed {
			t.Fatalf("Take of a key at its limit = %+v; want rejected", d)
		}

		// Once every window has ended, the Store admits new keys, and the old ones start afresh.
		clock.Advance(time.Minute)
		if d := take(t, s, "one-more", lim, 1); !d.Allowed || d.Remaining != 2 {
			t.Fatalf("Take of a new key after every window ended = %+v; want allowed, remaining 2", d)
		}
		if d := take(t, s, "full-key", lim, 1); !d.Allowed || d.Remaining != 2 {
			t.Fatalf("Take of the old full key in a new window = %+v; want allowed, remaining 2", d)
		}
	})
}

// TestMaxEntriesConcurrent runs many goroutines against a Store far smaller than their keys, for the
// race detector: a Take either decides or answers ErrFull, and no key is ever admitted beyond its
// limit.
func TestMaxEntriesConcurrent(t *testing.T) {
	clock := newFakeClock()
	s := memstore.New(memstore.Options{Now: clock.Now, Shards: 4, MaxEntries: 64, SweepInterval: -1})
	defer s.Close()
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 5, Period: time.Hour}
	const keys = 500
	var (
		mu       sync.Mutex
		admitted = make(map[string]int64)
		full     int
	)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				key := fmt.Sprint("k", (g*31+i*7)%keys)
				d, err := s.Take(t.Context(), admit.Request{Key: key, Limit: lim, Cost: 1})
				mu.Lock()
				switch {
				case errors.Is(err, memstore.ErrFull):
					full++
				case err != nil:
					t.Errorf("Take(%q) = %v; want a decision or ErrFull", key, err)
				case d.Allowed:
					admitted[key]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if full == 0 {
		t.Fatal("no Take answered ErrFull; the test does not fill the Store")
	}
	for key, n := range admitted {
		if n > lim.Rate {
			t.Errorf("key %q admitted %d times under a limit of %d", key, n, lim.Rate)
		}
	}
	if got := s.Len(); got > 64 {
		t.Errorf("Len() = %d; want at most MaxEntries, 64", got)
	}
}
