// Package shardedmap is the bare reference admit's in-process benchmarks measure limiters against:
// a map of counters in 64 shards, each behind its own mutex, chosen by maphash of the key — with no
// clock, no validation, no decision and no expiry. memstore's own benchmarks and the bench module's
// comparison with other in-process limiters use this one type, so their reference rows measure the
// same thing.
package shardedmap

import (
	"hash/maphash"
	"sync"
)

// shardCount is the number of shards, a power of two.
const shardCount = 64

// Counters counts calls per key. The zero value is not usable; call [New].
type Counters struct {
	seed   maphash.Seed
	shards [shardCount]shard
}

type shard struct {
	mu sync.Mutex
	m  map[string]int64
	_  [64]byte // keeps neighbouring shards' locks off one cache line
}

// New returns empty Counters.
func New() *Counters {
	c := &Counters{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = make(map[string]int64)
	}
	return c
}

// Inc adds one to key's counter. It is safe for concurrent use.
func (c *Counters) Inc(key string) {
	sh := &c.shards[maphash.String(c.seed, key)&(shardCount-1)]
	sh.mu.Lock()
	sh.m[key]++
	sh.mu.Unlock()
}

// Count returns key's counter.
func (c *Counters) Count(key string) int64 {
	sh := &c.shards[maphash.String(c.seed, key)&(shardCount-1)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.m[key]
}
