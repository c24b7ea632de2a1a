package bench

// In-process limiters side by side: admit's memstore against sethvargo/go-limiter's memorystore,
// golang.org/x/time/rate as users wire it per key, and a bare sharded map of counters (the reference
// of each group), on many keys and on one hot key, at 1, 16 and 256 callers, in one run:
//
//	cd bench && go test -run '^$' -bench 'Memstore' -benchmem .
//
// Every series takes the allowed path on every call (its limit is never reached within a run), so
// each call is a lookup, a decision and a write. The policies are the closest match each library has
// to a token bucket: memstore's GCRA (and its fixed window, which has no peer here), go-limiter's
// token bucket, x/time/rate's token bucket.

import (
	"context"
	"hash/maphash"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sethvargo/go-limiter/memorystore"
	"golang.org/x/time/rate"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/callers"
	"github.com/admit-dev/admit/internal/shardedmap"
	"github.com/admit-dev/admit/memstore"
)

// manyKeys is the number of keys of the many-keys groups.
const manyKeys = 10_000

// memLimits are the memstore policies measured: GCRA at one unit per second with a burst of 4·10^9
// (never exhausted within a run), and a fixed window of bound.MaxRate per hour. The GCRA rate is low
// on purpose: a GCRA key whose bucket is full again is as a missing key, and memstore drops it, so at
// a high rate every call on one of 10,000 keys would find its bucket refilled and create the entry
// anew (16 B and one allocation for the key) — the path of a new key, not of a live one.
var memLimits = []admit.Limit{
	{Algorithm: admit.GCRA, Rate: 1, Period: time.Second, Burst: peerBurst},
	{Algorithm: admit.FixedWindow, Rate: bound.MaxRate, Period: time.Hour},
}

// The peers' token buckets, the same as memstore's GCRA: peerRate units per second, peerBurst at
// once.
const (
	peerRate  = 1
	peerBurst = 4_000_000_000
)

// memKeys returns n keys of the in-process groups, each with its own hash tag.
func memKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "rl:mem:v1:{" + strconv.Itoa(i) + "}"
	}
	return keys
}

// An inProcess is one series of the in-process groups: how to build it, and one call on a key.
type inProcess struct {
	name string
	// build returns the take function of a fresh limiter, and a function that releases it.
	build func(b *testing.B) (take func(key string) error, done func())
}

// inProcessSeries are the series of the in-process groups, the reference first.
var inProcessSeries = func() []inProcess {
	series := []inProcess{
		{"ReferenceShardedMap", buildShardedMap},
		{"SethvargoMemorystore", buildSethvargo},
		{"XTimeRate", buildXTimeRate},
	}
	for _, lim := range memLimits {
		series = append(series, inProcess{"Memstore/alg=" + lim.Algorithm.String(), buildMemstore(lim)})
	}
	return series
}()

// buildShardedMap is the reference, internal/shardedmap: a bare map of counters in 64 shards, each behind a mutex, chosen
// by maphash of the key — no clock, no decision, no expiry.
func buildShardedMap(b *testing.B) (func(string) error, func()) {
	counters := shardedmap.New()
	return func(key string) error {
		counters.Inc(key)
		return nil
	}, func() {}
}

// buildSethvargo is go-limiter's memorystore: one map behind an RWMutex, a token bucket per key,
// each with its own mutex.
func buildSethvargo(b *testing.B) (func(string) error, func()) {
	store, err := memorystore.New(&memorystore.Config{Tokens: peerBurst, Interval: peerBurst / peerRate * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	return func(key string) error {
		_, _, _, ok, err := store.Take(ctx, key)
		if err == nil && !ok {
			err = errLimited
		}
		return err
	}, func() { _ = store.Close(ctx) }
}

// xTimeRateStore is golang.org/x/time/rate the way users key it: a map of *rate.Limiter in 64
// shards, each behind a mutex, chosen by maphash of the key; a missing key gets a new Limiter under
// the shard's lock, and the call to Allow is made after the lock is released (each Limiter has its
// own mutex and reads the clock itself).
type xTimeRateStore struct {
	seed   maphash.Seed
	shards [64]struct {
		mu sync.Mutex
		m  map[string]*rate.Limiter
		_  [64]byte
	}
}

func newXTimeRateStore() *xTimeRateStore {
	s := &xTimeRateStore{seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].m = make(map[string]*rate.Limiter)
	}
	return s
}

func (s *xTimeRateStore) limiter(key string) *rate.Limiter {
	sh := &s.shards[maphash.String(s.seed, key)&63]
	sh.mu.Lock()
	l, ok := sh.m[key]
	if !ok {
		l = rate.NewLimiter(peerRate, peerBurst)
		sh.m[key] = l
	}
	sh.mu.Unlock()
	return l
}

func buildXTimeRate(b *testing.B) (func(string) error, func()) {
	s := newXTimeRateStore()
	return func(key string) error {
		if !s.limiter(key).Allow() {
			return errLimited
		}
		return nil
	}, func() {}
}

// buildMemstore returns the builder of memstore under lim, with its defaults (64 shards) but for
// MaxEntries, which allocates nothing ahead.
func buildMemstore(lim admit.Limit) func(b *testing.B) (func(string) error, func()) {
	return func(b *testing.B) (func(string) error, func()) {
		s := memstore.New(memstore.Options{MaxEntries: 1 << 21}) // room for BenchmarkMemstoreKeyMemory's keys in every shard
		ctx := context.Background()
		return func(key string) error {
			d, err := s.Take(ctx, admit.Request{Key: key, Limit: lim, Cost: 1})
			if err == nil && !d.Allowed {
				err = errLimited
			}
			return err
		}, func() { _ = s.Close() }
	}
}

// errLimited fails a benchmark whose limiter limited a call: the limits are set never to be reached.
var errLimited = limitedError{}

type limitedError struct{}

func (limitedError) Error() string { return "limited: the benchmark's limit was reached" }

// BenchmarkMemstoreManyKeys_ReferenceShardedMap and the rest of the group: 10,000 keys, called in
// turn by every caller.
func BenchmarkMemstoreManyKeys_ReferenceShardedMap(b *testing.B) {
	benchInProcess(b, "ReferenceShardedMap", manyKeys)
}

// BenchmarkMemstoreManyKeys_SethvargoMemorystore: go-limiter's memorystore over 10,000 keys.
func BenchmarkMemstoreManyKeys_SethvargoMemorystore(b *testing.B) {
	benchInProcess(b, "SethvargoMemorystore", manyKeys)
}

// BenchmarkMemstoreManyKeys_XTimeRate: x/time/rate in a sharded map over 10,000 keys.
func BenchmarkMemstoreManyKeys_XTimeRate(b *testing.B) { benchInProcess(b, "XTimeRate", manyKeys) }

// BenchmarkMemstoreManyKeys_Admit: memstore, per algorithm, over 10,000 keys.
func BenchmarkMemstoreManyKeys_Admit(b *testing.B) { benchInProcess(b, "Memstore", manyKeys) }

// BenchmarkMemstoreHotKey_ReferenceShardedMap and the rest of the group: one key, every caller.
func BenchmarkMemstoreHotKey_ReferenceShardedMap(b *testing.B) {
	benchInProcess(b, "ReferenceShardedMap", 1)
}

// BenchmarkMemstoreHotKey_SethvargoMemorystore: go-limiter's memorystore on one key.
func BenchmarkMemstoreHotKey_SethvargoMemorystore(b *testing.B) {
	benchInProcess(b, "SethvargoMemorystore", 1)
}

// BenchmarkMemstoreHotKey_XTimeRate: x/time/rate on one key.
func BenchmarkMemstoreHotKey_XTimeRate(b *testing.B) { benchInProcess(b, "XTimeRate", 1) }

// BenchmarkMemstoreHotKey_Admit: memstore, per algorithm, on one key.
func BenchmarkMemstoreHotKey_Admit(b *testing.B) { benchInProcess(b, "Memstore", 1) }

// benchInProcess runs the series whose name starts with prefix over nkeys keys at each callers
// count: as Benchmark…/callers=N for one series, Benchmark…/alg=…/callers=N for memstore's. Every key
// has been used once before the timer starts.
func benchInProcess(b *testing.B, prefix string, nkeys int) {
	keys := memKeys(nkeys)
	eachSeries(b, inProcessSeries, prefix, func(b *testing.B, s inProcess) {
		take, done := s.build(b)
		defer done()
		for _, k := range keys {
			if err := take(k); err != nil {
				b.Fatal(err)
			}
		}
		benchCallers(b, func(i int) error { return take(keys[i%len(keys)]) })
	})
}

// benchCallers is callers.Bench, and reports also the CPU time the process spent per call
// (cpu-ns/op, user and system, from getrusage): on a machine shared with other work it varies much
// less than the wall time, which counts the time the benchmark waited for a processor.
func benchCallers(b *testing.B, op func(i int) error) {
	for _, n := range callers.Counts {
		b.Run(callers.Name(n), func(b *testing.B) {
			b.ReportAllocs()
			start := cpuTime()
			callers.Run(b, n, op)
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime returns the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// eachSeries calls run for the series of series whose name is prefix, or each whose name starts with prefix
// and a slash, in a sub-benchmark named by the rest.
func eachSeries(b *testing.B, series []inProcess, prefix string, run func(b *testing.B, s inProcess)) {
	for _, s := range series {
		name, ok := cutPrefix(s.name, prefix)
		switch {
		case !ok:
		case name == "":
			run(b, s)
		default:
			b.Run(name, func(b *testing.B) { run(b, s) })
		}
	}
}

// BenchmarkMemstoreHotKeyLatency_ReferenceShardedMap and the rest of the group: the latency of each
// call on one key at 256 callers, from just before the call to just after it, as p50-us and p99-us
// (and max-us); two clock reads per call are added to every series alike.
func BenchmarkMemstoreHotKeyLatency_ReferenceShardedMap(b *testing.B) {
	benchLatency(b, "ReferenceShardedMap")
}

// BenchmarkMemstoreHotKeyLatency_SethvargoMemorystore: go-limiter's memorystore on one key.
func BenchmarkMemstoreHotKeyLatency_SethvargoMemorystore(b *testing.B) {
	benchLatency(b, "SethvargoMemorystore")
}

// BenchmarkMemstoreHotKeyLatency_XTimeRate: x/time/rate on one key.
func BenchmarkMemstoreHotKeyLatency_XTimeRate(b *testing.B) { benchLatency(b, "XTimeRate") }

// BenchmarkMemstoreHotKeyLatency_Admit: memstore, per algorithm, on one key.
func BenchmarkMemstoreHotKeyLatency_Admit(b *testing.B) { benchLatency(b, "Memstore") }

// latencyCallers is the number of callers of the latency group.
const latencyCallers = 256

func benchLatency(b *testing.B, prefix string) {
	const key = "rl:mem:v1:{hot}"
	eachSeries(b, inProcessSeries, prefix, func(b *testing.B, s inProcess) {
		b.Run(callers.Name(latencyCallers), func(b *testing.B) {
			take, done := s.build(b)
			defer done()
			if err := take(key); err != nil {
				b.Fatal(err)
			}
			lat := make([]time.Duration, b.N)
			b.ReportAllocs()
			start := cpuTime()
			callers.Run(b, latencyCallers, func(i int) error {
				start := time.Now()
				err := take(key)
				lat[i] = time.Since(start)
				return err
			})
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
			slices.Sort(lat)
			us := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / float64(time.Microsecond) }
			b.ReportMetric(us(0.5), "p50-us")
			b.ReportMetric(us(0.99), "p99-us")
			b.ReportMetric(us(1), "max-us")
		})
	})
}

// memoryKeys is the number of keys of the memory group, each of memoryKeyLen bytes.
const (
	memoryKeys   = 1_000_000
	memoryKeyLen = 30
)

// memoryMemstoreSeries are memstore's series of the memory group: the GCRA of memLimits would let a
// key's entry end a second after its one call, before the heap is measured; at one unit per hour
// (burst 10^6) it lives for an hour, as the fixed window does.
var memoryMemstoreSeries = []inProcess{
	{"Memstore/alg=gcra", buildMemstore(admit.Limit{Algorithm: admit.GCRA, Rate: 1, Period: time.Hour, Burst: 1_000_000})},
	{"Memstore/alg=fixed_window", buildMemstore(admit.Limit{Algorithm: admit.FixedWindow, Rate: bound.MaxRate, Period: time.Hour})},
}

// BenchmarkMemstoreKeyMemory_ReferenceShardedMap and the rest of the group: the live heap per idle
// key (B/key) after one call on each of 10^6 keys of 30 bytes, measured with runtime.ReadMemStats
// after a GC, above the heap before the limiter was made: the key, its state, and its share of the
// maps. The keys passed in are made afresh for each call, so a limiter that keeps the caller's
// string pays for it as one that copies it. ns/op is the time to fill the limiter.
func BenchmarkMemstoreKeyMemory_ReferenceShardedMap(b *testing.B) {
	benchKeyMemory(b, "ReferenceShardedMap")
}

// BenchmarkMemstoreKeyMemory_SethvargoMemorystore: go-limiter's memorystore.
func BenchmarkMemstoreKeyMemory_SethvargoMemorystore(b *testing.B) {
	benchKeyMemory(b, "SethvargoMemorystore")
}

// BenchmarkMemstoreKeyMemory_XTimeRate: x/time/rate in a sharded map, a *rate.Limiter per key.
func BenchmarkMemstoreKeyMemory_XTimeRate(b *testing.B) { benchKeyMemory(b, "XTimeRate") }

// BenchmarkMemstoreKeyMemory_Admit: memstore, per algorithm.
func BenchmarkMemstoreKeyMemory_Admit(b *testing.B) { benchKeyMemory(b, "Memstore") }

func benchKeyMemory(b *testing.B, prefix string) {
	series := inProcessSeries
	if prefix == "Memstore" {
		series = memoryMemstoreSeries
	}
	eachSeries(b, series, prefix, func(b *testing.B, s inProcess) {
		var perKey float64
		for b.Loop() {
			start := liveHeap()
			take, done := s.build(b)
			for i := range memoryKeys {
				key := "rl:mem:v01:" + strconv.FormatInt(1e18+int64(i), 10)
				if len(key) != memoryKeyLen {
					b.Fatalf("key %q is not %d bytes", key, memoryKeyLen)
				}
				if err := take(key); err != nil {
					b.Fatal(err)
				}
			}
			perKey = float64(liveHeap()-start) / memoryKeys
			runtime.KeepAlive(take)
			done()
		}
		b.ReportMetric(perKey, "B/key")
	})
}

// liveHeap returns the bytes of heap in use after a garbage collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// cutPrefix reports whether name is prefix or prefix followed by "/…", and returns the rest after
// the slash.
func cutPrefix(name, prefix string) (string, bool) {
	switch {
	case name == prefix:
		return "", true
	case len(name) > len(prefix) && name[:len(prefix)] == prefix && name[len(prefix)] == '/':
		return name[len(prefix)+1:], true
	}
	return "", false
}
