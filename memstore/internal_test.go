package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/admit-dev/admit"
)

// clock returns a goroutine-safe fake clock and a function that advances it.
func clock() (now func() time.Time, advance func(time.Duration)) {
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var off atomic.Int64
	return func() time.Time { return base.Add(time.Duration(off.Load())) },
		func(d time.Duration) { off.Add(int64(d)) }
}

func mustTake(t *testing.T, s *Store, key string, lim admit.Limit, n int64) admit.Decision {
	t.Helper()
	d, err := s.Take(context.Background(), key, lim, n)
	if err != nil {
		t.Fatalf("Take(%q, n=%d): %v", key, n, err)
	}
	return d
}

var (
	second = admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Second}
	hour   = admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Hour}
)

func TestSweepBudget(t *testing.T) {
	now, advance := clock()
	s := New(Options{Now: now, Shards: 1, SweepInterval: -1, SweepBudget: 5})
	for i := range 20 {
		mustTake(t, s, fmt.Sprint("short", i), second, 1)
	}
	for i := range 5 {
		mustTake(t, s, fmt.Sprint("long", i), hour, 2)
	}
	if e, r := s.sweep(); r != 0 || e != 5 {
		t.Fatalf("sweep() before any window ended examined %d, removed %d; want 5, 0", e, r)
	}
	advance(time.Second)
	total := 0
	for pass := 1; s.Len() > 5; pass++ {
		if pass > 20 {
			t.Fatalf("20 sweeps left %d entries; want 5", s.Len())
		}
		e, r := s.sweep()
		if e > 5 || r > e {
			t.Fatalf("sweep() examined %d, removed %d; want at most the budget, 5", e, r)
		}
		total += r
	}
	if total != 20 {
		t.Fatalf("sweeps removed %d entries; want the 20 expired ones", total)
	}
	// The live entries are intact.
	for i := range 5 {
		if d := mustTake(t, s, fmt.Sprint("long", i), hour, 0); d.Remaining != 1 {
			t.Fatalf("peek of a live key after the sweeps: remaining %d; want 1", d.Remaining)
		}
	}
}

func TestSweepBudgetPerShard(t *testing.T) {
	now, advance := clock()
	s := New(Options{Now: now, Shards: 4, SweepInterval: -1, SweepBudget: 1})
	for i := range 100 {
		mustTake(t, s, fmt.Sprint("k", i), second, 1)
	}
	advance(time.Second)
	if e, r := s.sweep(); e != 4 || r != 4 {
		t.Fatalf("sweep() of 4 shards with budget 1 examined %d, removed %d; want 4, 4", e, r)
	}
	if s.Len() != 96 {
		t.Fatalf("Len() = %d; want 96", s.Len())
	}
}

func TestSweepVisitsEveryEntry(t *testing.T) {
	now, advance := clock()
	s := New(Options{Now: now, Shards: 1, SweepInterval: -1, SweepBudget: 7})
	// Interleave keys that expire at different times, so the cursor must walk past live ones.
	for i := range 100 {
		lim := hour
		if i%3 == 0 {
			lim = second
		}
		mustTake(t, s, fmt.Sprint("k", i), lim, 1)
	}
	advance(time.Second)
	// Every entry is examined within two rounds of the cursor.
	for range 2 * (100/7 + 1) {
		s.sweep()
	}
	if got := s.Len(); got != 66 {
		t.Fatalf("Len() = %d after sweeping; want the 66 live entries", got)
	}
}

func TestSweepRebuildsShrunkShard(t *testing.T) {
	now, advance := clock()
	s := New(Options{Now: now, Shards: 1, SweepInterval: -1, SweepBudget: 1000})
	for i := range 4000 {
		lim := second
		if i < 10 {
			lim = hour
		}
		mustTake(t, s, fmt.Sprint("k", i), lim, 1)
	}
	advance(time.Second)
	for s.Len() > 10 {
		s.sweep()
	}
	sh := &s.tab.shards[0]
	if cap(sh.entries) > 100 || sh.peak != 10 {
		t.Fatalf("after 3990 of 4000 entries expired: cap(entries) = %d, peak = %d; want storage rebuilt for 10", cap(sh.entries), sh.peak)
	}
	for i := range 10 {
		if d := mustTake(t, s, fmt.Sprint("k", i), hour, 0); d.Remaining != 2 {
			t.Fatalf("peek of a live key after the rebuild: remaining %d; want 2", d.Remaining)
		}
	}
}

func shardIndex(s *Store, key string) uint64 { return maphash.String(s.tab.seed, key) & s.tab.mask }

func TestShards(t *testing.T) {
	for _, tt := range []struct{ in, want int }{
		{0, 64}, {-1, 64}, {1, 1}, {3, 4}, {64, 64}, {100, 128}, {1 << 30, 1 << 16},
	} {
		s := New(Options{Shards: tt.in, SweepInterval: -1})
		if got := len(s.tab.shards); got != tt.want {
			t.Errorf("New(Options{Shards: %d}) has %d shards; want %d", tt.in, got, tt.want)
		}
	}
}

func TestShardingSpreadsKeys(t *testing.T) {
	s := New(Options{SweepInterval: -1})
	const perShard = 100
	n := len(s.tab.shards) * perShard
	for i := range n {
		mustTake(t, s, fmt.Sprintf("rl:api:v1:{%08x}", i), hour, 1)
	}
	for i := range s.tab.shards {
		if got := len(s.tab.shards[i].entries); got < perShard/2 || got > 2*perShard {
			t.Errorf("shard %d holds %d of %d keys; want about %d", i, got, n, perShard)
		}
	}
	// Another Store has another seed: no set of keys lands in one shard of every Store.
	other := New(Options{SweepInterval: -1})
	moved := 0
	for i := range 100 {
		key := fmt.Sprint("k", i)
		if shardIndex(s, key) != shardIndex(other, key) {
			moved++
		}
	}
	if moved < 50 {
		t.Errorf("two Stores place %d of 100 keys in different shards; want most (per-Store seeds)", moved)
	}
}

func TestSweeperRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Options{SweepInterval: time.Second}) // time.Now is the bubble's fake clock
		for i := range 10 {
			mustTake(t, s, fmt.Sprint("k", i), admit.Limit{Algorithm: admit.FixedWindow, Rate: 1, Period: 100 * time.Millisecond}, 1)
		}
		mustTake(t, s, "live", hour, 1)
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		if got := s.Len(); got != 11 {
			t.Fatalf("Len() = %d before the first sweep; want 11", got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := s.Len(); got != 1 {
			t.Fatalf("Len() = %d after a sweep; want 1", got)
		}
		s.Close()
		// The bubble fails the test if the sweeper goroutine is still there.
	})
}

func TestCloseStopsSweeper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Options{})
		done := s.sw.done
		s.Close()
		select {
		case <-done:
		default:
			t.Fatal("the sweeper goroutine is still running after Close")
		}
		s.Close()
	})
}

func TestCleanupStopsSweeper(t *testing.T) {
	done := New(Options{SweepInterval: time.Hour}).sw.done
	for range 100 {
		runtime.GC()
		select {
		case <-done:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("the sweeper goroutine of an unreachable Store is still running")
}
