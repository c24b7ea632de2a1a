package memstore

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/limittest"
)

// newClock returns a fake clock that moves only when told.
func newClock() *limittest.Clock {
	return limittest.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
}

func mustTake(t *testing.T, s *Store, key string, lim admit.Limit, n int64) admit.Decision {
	t.Helper()
	d, err := s.Take(context.Background(), admit.Request{Key: key, Limit: lim, Cost: n})
	if err != nil {
		t.Fatalf("Take(%q, n=%d): %v", key, n, err)
	}
	return d
}

var (
	second = admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Second}
	hour   = admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Hour}
)

func TestSweepExaminesEveryEntry(t *testing.T) {
	clock := newClock()
	s := New(Options{Now: clock.Now, Shards: 1, SweepInterval: -1, SweepBudget: 5})
	for i := range 20 {
		mustTake(t, s, fmt.Sprint("short", i), second, 1)
	}
	for i := range 5 {
		mustTake(t, s, fmt.Sprint("long", i), hour, 2)
	}
	if e, r := s.sweep(); e != 25 || r != 0 {
		t.Fatalf("sweep() before any window ended examined %d, removed %d; want 25, 0", e, r)
	}
	clock.Advance(time.Second)
	if e, r := s.sweep(); e != 25 || r != 20 {
		t.Fatalf("sweep() after 20 windows ended examined %d, removed %d; want 25, 20", e, r)
	}
	if got := s.Len(); got != 5 {
		t.Fatalf("Len() = %d after one sweep; want the 5 live entries", got)
	}
	// The live entries are intact.
	for i := range 5 {
		if d := mustTake(t, s, fmt.Sprint("long", i), hour, 0); d.Remaining != 1 {
			t.Fatalf("peek of a live key after the sweep: remaining %d; want 1", d.Remaining)
		}
	}
}

func TestSweepStepIsBounded(t *testing.T) {
	clock := newClock()
	s := New(Options{Now: clock.Now, Shards: 1, SweepInterval: -1})
	for i := range 30 {
		lim := hour
		if i%2 == 0 {
			lim = second
		}
		mustTake(t, s, fmt.Sprint("k", i), lim, 1)
	}
	clock.Advance(time.Second)
	sh := &s.tab.shards[0]
	// One step, under one hold of the lock, examines at most its budget.
	examined, removed := 0, 0
	for pos, steps := 0, 0; pos < len(sh.entries); steps++ {
		if steps > 10 {
			t.Fatalf("10 steps of 7 did not cover 30 entries")
		}
		var e, r int
		pos, e, r = sh.sweepFrom(pos, len(sh.entries), s.tab.now(), 7)
		if e > 7 {
			t.Fatalf("sweepFrom with budget 7 examined %d entries", e)
		}
		examined, removed = examined+e, removed+r
	}
	if examined != 30 || removed != 15 || len(sh.entries) != 15 {
		t.Fatalf("steps examined %d, removed %d, left %d; want 30, 15, 15", examined, removed, len(sh.entries))
	}
}

func TestSweepCoversEveryShard(t *testing.T) {
	clock := newClock()
	s := New(Options{Now: clock.Now, Shards: 4, SweepInterval: -1, SweepBudget: 1})
	for i := range 100 {
		mustTake(t, s, fmt.Sprint("k", i), second, 1)
	}
	clock.Advance(time.Second)
	if e, r := s.sweep(); e != 100 || r != 100 {
		t.Fatalf("sweep() of 4 shards with budget 1 examined %d, removed %d; want 100, 100", e, r)
	}
	if s.Len() != 0 {
		t.Fatalf("Len() = %d; want 0", s.Len())
	}
}

func TestSweepVisitsEveryEntry(t *testing.T) {
	clock := newClock()
	s := New(Options{Now: clock.Now, Shards: 1, SweepInterval: -1, SweepBudget: 7})
	// Interleave keys that expire at different times, so the sweep must step past live ones.
	for i := range 100 {
		lim := hour
		if i%3 == 0 {
			lim = second
		}
		mustTake(t, s, fmt.Sprint("k", i), lim, 1)
	}
	clock.Advance(time.Second)
	s.sweep()
	if got := s.Len(); got != 66 {
		t.Fatalf("Len() = %d after one sweep; want the 66 live entries", got)
	}
}

func TestSweepRebuildsShrunkShard(t *testing.T) {
	clock := newClock()
	s := New(Options{Now: clock.Now, Shards: 1, SweepInterval: -1})
	for i := range 4000 {
		lim := second
		if i < 10 {
			lim = hour
		}
		mustTake(t, s, fmt.Sprint("k", i), lim, 1)
	}
	clock.Advance(time.Second)
	s.sweep()
	sh := &s.tab.shards[0]
	if len(sh.entries) != 10 || cap(sh.entries) > 100 || sh.peak != 10 {
		t.Fatalf("after 3990 of 4000 entries expired: len %d, cap(entries) = %d, peak = %d; want storage rebuilt for 10",
			len(sh.entries), cap(sh.entries), sh.peak)
	}
	for i := range 10 {
		if d := mustTake(t, s, fmt.Sprint("k", i), hour, 0); d.Remaining != 2 {
			t.Fatalf("peek of a live key after the rebuild: remaining %d; want 2", d.Remaining)
		}
	}
}

// TestFloodMemoryReturns floods a Store with keys that all expire: one pass of the sweeper leaves
// every shard with storage for its live entries only, so the memory goes back to the runtime.
func TestFloodMemoryReturns(t *testing.T) {
	clock := newClock()
	s := New(Options{Now: clock.Now, SweepInterval: -1})
	short := admit.Limit{Algorithm: admit.FixedWindow, Rate: 1, Period: 100 * time.Millisecond}
	for i := range 200_000 {
		if i%200 == 0 {
			clock.Advance(time.Millisecond) // 200,000 keys per second, for one second
		}
		mustTake(t, s, fmt.Sprint("flood", i), short, 1)
	}
	mustTake(t, s, "live", hour, 1)
	clock.Advance(100 * time.Millisecond)
	s.sweep()
	for i := range s.tab.shards {
		sh := &s.tab.shards[i]
		if cap(sh.entries) > minRebuild || len(sh.slots) > slotsFor(minRebuild) || cap(sh.keys) > minRebuild*len("flood199999") || len(sh.exts) > 0 {
			t.Fatalf("shard %d after the flood expired and one sweep: %d entries, cap(entries) = %d, %d slots, %d bytes of keys; want storage rebuilt",
				i, len(sh.entries), cap(sh.entries), len(sh.slots), cap(sh.keys))
		}
	}
	if got := s.Len(); got != 1 {
		t.Fatalf("Len() = %d; want the 1 live entry", got)
	}
}

func TestInsertReclaimsAtCursor(t *testing.T) {
	for _, tt := range []struct {
		name          string
		budget        int
		expired, live int
		wantLenAfter  int
	}{
		// With no live entry to step past, an insert removes expired ones up to the budget.
		{name: "all expired", budget: 256, expired: 10, wantLenAfter: 1},
		{name: "budget", budget: 3, expired: 10, wantLenAfter: 10 - 3 + 1},
		// It stops after stepping past 2 live entries, and never removes them.
		{name: "live first", budget: 256, live: 2, expired: 10, wantLenAfter: 2 + 10 + 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := newClock()
			s := New(Options{Now: clock.Now, Shards: 1, SweepInterval: -1, SweepBudget: tt.budget})
			for i := range tt.live {
				mustTake(t, s, fmt.Sprint("live", i), hour, 1)
			}
			for i := range tt.expired {
				mustTake(t, s, fmt.Sprint("short", i), second, 1)
			}
			clock.Advance(time.Second)
			s.tab.shards[0].cursor = 0 // at the first live entry, if any
			mustTake(t, s, "new", hour, 1)
			if got := s.Len(); got != tt.wantLenAfter {
				t.Fatalf("Len() = %d after one insert; want %d", got, tt.wantLenAfter)
			}
			for i := range tt.live {
				if d := mustTake(t, s, fmt.Sprint("live", i), hour, 0); d.Remaining != 2 {
					t.Fatalf("peek of a live key after an insert: remaining %d; want 2", d.Remaining)
				}
			}
		})
	}
}

func TestMaxEntriesPerShard(t *testing.T) {
	for _, tt := range []struct{ maxEntries, shards, want int }{
		{0, 0, 1 << 20 / 64}, {-5, 0, 1 << 20 / 64}, {100, 1, 100}, {10, 4, 3}, {1, 64, 1}, {1 << 20, 1 << 16, 64},
	} {
		s := New(Options{MaxEntries: tt.maxEntries, Shards: tt.shards, SweepInterval: -1})
		for i := range s.tab.shards {
			if got := s.tab.shards[i].capacity; got != tt.want {
				t.Fatalf("New(Options{MaxEntries: %d, Shards: %d}): shard %d holds at most %d; want %d",
					tt.maxEntries, tt.shards, i, got, tt.want)
			}
		}
	}
}

func TestShards(t *testing.T) {
	for _, tt := range []struct{ in, want int }{
		{0, 64}, {-1, 64}, {1, 1}, {3, 4}, {64, 64}, {100, 128}, {1 << 30, bound.SlotCount},
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
	// The keys of one hash slot share a shard, whatever else they hold: TakeAll takes one lock.
	for i := range 100 {
		a, b := fmt.Sprintf("rl:a:{t%d}", i), fmt.Sprintf("rl:b:v2:{t%d}:user", i)
		if s.tab.shard(a) != s.tab.shard(b) {
			t.Fatalf("%q and %q share a slot but not a shard", a, b)
		}
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

// The cleanup of an unreachable Store runs on the runtime's cleanup goroutine some time after a
// collection finds it, later still on a loaded machine: the test waits for the sweeper's exit with a
// generous deadline, collecting again meanwhile, and asserts no timing.
func TestCleanupStopsSweeper(t *testing.T) {
	done := New(Options{SweepInterval: time.Hour}).sw.done
	deadline := time.After(time.Minute)
	for {
		runtime.GC()
		select {
		case <-done:
			return
		case <-deadline:
			t.Fatal("the sweeper goroutine of an unreachable Store is still running a minute after it became unreachable")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// A sliding log keeps only the entries of its window: each admission trims those that left, so a
// key's log never outgrows its rate however long it is used.
func TestSlidingLogTrimsOnAdmission(t *testing.T) {
	clock := newClock()
	s := New(Options{Now: clock.Now, SweepInterval: -1})
	lim := admit.Limit{Algorithm: admit.SlidingLog, Rate: 3, Period: 3 * time.Second}
	for i := range 1000 {
		if d := mustTake(t, s, "k", lim, 1); !d.Allowed {
			t.Fatalf("take %d, a second after the last: %+v", i, d)
		}
		sh := s.tab.shard("k")
		if n := len(sh.ext(sh.live("k")).log); n > 3 {
			t.Fatalf("after %d admissions a second apart under 3 per 3s: %d entries; want at most 3", i+1, n)
		}
		clock.Advance(time.Second)
	}
}

// decided sets every field of the Decision, whatever it held: a field added to admit.Decision and
// not to decided fails here.
func TestDecidedSetsEveryField(t *testing.T) {
	var d admit.Decision
	v := reflect.ValueOf(&d).Elem()
	for i := range v.NumField() { // every field something other than decided's
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int64:
			f.SetInt(-1)
		case reflect.Uint64:
			f.SetUint(1)
		case reflect.Struct:
			f.Set(reflect.ValueOf(admit.Limit{Name: "old", Rate: 9}))
		default:
			t.Fatalf("admit.Decision.%s is a %v: teach this test and decided about it", v.Type().Field(i).Name, f.Kind())
		}
	}
	lim := admit.Limit{Algorithm: admit.GCRA, Rate: 2, Period: time.Second}
	decided(&d, &lim, false, 3, time.Second, 2*time.Second)
	want := admit.Decision{Limit: lim, Remaining: 3, RetryAfter: time.Second, ResetAfter: 2 * time.Second}
	if d != want {
		t.Fatalf("decided left %+v; want %+v", d, want)
	}
}
