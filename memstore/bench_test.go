package memstore_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/callers"
	"github.com/admit-dev/admit/internal/shardedmap"
	"github.com/admit-dev/admit/limittest"
	"github.com/admit-dev/admit/memstore"
)

// benchLimit is never reached within a benchmark, so every call takes the admit path: a lookup
// and an increment on a live key.
var benchLimit = admit.Limit{Algorithm: admit.FixedWindow, Rate: bound.MaxRate, Period: time.Hour}

// benchKeys returns n keys whose entries already exist in s (nil s: just the keys).
func benchKeys(b *testing.B, s *memstore.Store, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "rl:bench:v1:{" + strconv.Itoa(i) + "}"
		if s != nil {
			if _, err := s.Take(context.Background(), admit.Request{Key: keys[i], Limit: benchLimit, Cost: 1}); err != nil {
				b.Fatal(err)
			}
		}
	}
	return keys
}

// BenchmarkTake measures Take over 16384 live keys spread over the shards.
func BenchmarkTake(b *testing.B) {
	benchmarkTake(b, 16384)
}

// BenchmarkTakeHotKey measures Take when every caller hits one key: one shard's lock, contended.
func BenchmarkTakeHotKey(b *testing.B) {
	benchmarkTake(b, 1)
}

func benchmarkTake(b *testing.B, nkeys int) {
	s := memstore.New(memstore.Options{})
	defer s.Close()
	keys := benchKeys(b, s, nkeys)
	ctx := context.Background()
	callers.Bench(b, func(i int) error {
		_, err := s.Take(ctx, admit.Request{Key: keys[i%len(keys)], Limit: benchLimit, Cost: 1})
		return err
	})
}

// BenchmarkReferenceShardedMap is the reference for BenchmarkTake: internal/shardedmap, a bare 64-shard map of counters
// behind one mutex per shard, with no validation, expiry or decision.
func BenchmarkReferenceShardedMap(b *testing.B) {
	counters := shardedmap.New()
	keys := benchKeys(b, nil, 16384)
	callers.Bench(b, func(i int) error {
		counters.Inc(keys[i%len(keys)])
		return nil
	})
}

// BenchmarkKeyFlood measures the memory a flood of new keys costs: each op is a Take of a key never
// seen before, under a 100 ms window, on a fake clock that moves 20 µs per op — 50,000 new keys per
// second of fake time, 5,000 of them live at any moment — and the sweeper runs once per fake second,
// as its ticker would. It reports the most entries the Store held (peak-entries, sampled every
// 1,000 ops) and the most live heap above the start (peak-heap-MiB, after a GC, every fake second).
// -benchtime 1000000x is 20 seconds of fake time:
//
//	go test -run '^$' -bench KeyFlood -benchtime 1000000x ./memstore
func BenchmarkKeyFlood(b *testing.B) {
	const (
		keysPerSecond = 50_000
		step          = time.Second / keysPerSecond
		sampleEvery   = 1_000
	)
	clock := limittest.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	defer s.Close()
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 1, Period: 100 * time.Millisecond}
	ctx := context.Background()
	start := liveHeapMiB()
	var peakEntries int
	var peakHeap float64
	b.ResetTimer()
	for i := range b.N {
		clock.Advance(step)
		if _, err := s.Take(ctx, admit.Request{Key: "rl:flood:v1:{" + strconv.Itoa(i) + "}", Limit: lim, Cost: 1}); err != nil {
			b.Fatal(err)
		}
		if (i+1)%sampleEvery == 0 {
			peakEntries = max(peakEntries, s.Len())
		}
		if (i+1)%keysPerSecond == 0 {
			b.StopTimer()
			peakHeap = max(peakHeap, liveHeapMiB()-start)
			memstore.Sweep(s)
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(peakEntries), "peak-entries")
	b.ReportMetric(peakHeap, "peak-heap-MiB")
}

// liveHeapMiB returns the heap in use after a garbage collection, in MiB.
func liveHeapMiB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

// BenchmarkKeyMemory reports the heap a key takes under each algorithm: bytes/key is the live heap,
// after a GC, of a Store holding 2^20 keys of 20 bytes, each after one Take of one unit, divided by
// 2^20 — the key, its entry, its share of the shards' maps and slices, and any state an entry points
// to. ns/op is the time to fill the Store. docs/sliding-window.md and docs/sliding-log.md quote it:
//
//	go test -run '^$' -bench KeyMemory -benchtime 1x ./memstore
func BenchmarkKeyMemory(b *testing.B) {
	const keys = 1 << 20
	for _, alg := range []admit.Algorithm{admit.FixedWindow, admit.SlidingWindow, admit.SlidingLog} {
		b.Run(alg.String(), func(b *testing.B) {
			lim := admit.Limit{Algorithm: alg, Rate: 3, Period: time.Hour}
			var perKey float64
			for b.Loop() {
				start := liveHeapMiB()
				clock := limittest.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
				s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1, MaxEntries: 2 * keys})
				for i := range keys {
					key := "rl:k:" + strconv.FormatInt(1e14+int64(i), 10) // 20 bytes
					if _, err := s.Take(context.Background(), admit.Request{Key: key, Limit: lim, Cost: 1}); err != nil {
						b.Fatal(err)
					}
				}
				perKey = (liveHeapMiB() - start) * (1 << 20) / keys
				runtime.KeepAlive(s)
			}
			b.ReportMetric(perKey, "bytes/key")
		})
	}
}
