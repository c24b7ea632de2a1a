package memstore_test

import (
	"context"
	"hash/maphash"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/callers"
	"github.com/admit-dev/admit/memstore"
)

// benchLimit is never reached within a benchmark, so every call takes the admit path: a lookup
// and an increment on a live key.
var benchLimit = admit.Limit{Algorithm: admit.FixedWindow, Rate: admit.MaxRate, Period: time.Hour}

// benchKeys returns n keys whose entries already exist in s (nil s: just the keys).
func benchKeys(b *testing.B, s *memstore.Store, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "rl:bench:v1:{" + strconv.Itoa(i) + "}"
		if s != nil {
			if _, err := s.Take(context.Background(), keys[i], benchLimit, 1); err != nil {
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
		_, err := s.Take(ctx, keys[i%len(keys)], benchLimit, 1)
		return err
	})
}

// BenchmarkReferenceShardedMap is the reference for BenchmarkTake: a bare 64-shard map of counters
// behind one mutex per shard, with no validation, expiry or decision.
func BenchmarkReferenceShardedMap(b *testing.B) {
	type shard struct {
		mu sync.Mutex
		m  map[string]int64
		_  [64]byte
	}
	var shards [64]shard
	for i := range shards {
		shards[i].m = make(map[string]int64)
	}
	seed := maphash.MakeSeed()
	keys := benchKeys(b, nil, 16384)
	callers.Bench(b, func(i int) error {
		k := keys[i%len(keys)]
		sh := &shards[maphash.String(seed, k)&63]
		sh.mu.Lock()
		sh.m[k]++
		sh.mu.Unlock()
		return nil
	})
}
