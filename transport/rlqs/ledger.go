package rlqs

import (
	"context"
	"sync"
	"time"
)

// A Ledger records the demand of every client of a bucket, each entry expiring on its own, so
// that the admit instances serving parts of one fleet see the same demands and split one budget.
// redisstore.Store implements it on Redis (its ReportDemand and LeaveDemand); [MemoryLedger] in
// one process. Its methods are safe for concurrent use.
type Ledger interface {
	// ReportDemand records demand (requests per second) of client for bucket until now+ttl, drops
	// the entries expired at now, and returns every live client's demand, client's included, and
	// the time the bucket's ledger was born: when an entry was written while none was live (a new
	// fleet, a ledger emptied), kept while one lives. All in one atomic step.
	ReportDemand(ctx context.Context, bucket, client string, demand float64, now time.Time, ttl time.Duration) (map[string]float64, time.Time, error)
	// LeaveDemand removes client's entry of bucket: its stream ended.
	LeaveDemand(ctx context.Context, bucket, client string) error
}

// A MemoryLedger is a [Ledger] in one process: for admit serve on the memory backend, where one
// instance serves the whole fleet. The zero value is ready to use.
type MemoryLedger struct {
	mu      sync.Mutex
	buckets map[string]*memoryBucket
}

type memoryBucket struct {
	born    time.Time
	entries map[string]memoryEntry
}

type memoryEntry struct {
	demand  float64
	expires time.Time
}

// ReportDemand implements [Ledger].
func (l *MemoryLedger) ReportDemand(_ context.Context, bucket, client string, demand float64, now time.Time, ttl time.Duration) (map[string]float64, time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = make(map[string]*memoryBucket)
	}
	b := l.buckets[bucket]
	if b == nil {
		b = &memoryBucket{entries: make(map[string]memoryEntry)}
		l.buckets[bucket] = b
	}
	out := make(map[string]float64, len(b.entries)+1)
	for c, e := range b.entries {
		if !e.expires.After(now) {
			delete(b.entries, c)
			continue
		}
		out[c] = e.demand
	}
	if len(out) == 0 {
		b.born = now
	}
	b.entries[client] = memoryEntry{demand: demand, expires: now.Add(ttl)}
	out[client] = demand
	return out, b.born, nil
}

// LeaveDemand implements [Ledger].
func (l *MemoryLedger) LeaveDemand(_ context.Context, bucket, client string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.buckets[bucket]; b != nil {
		delete(b.entries, client)
		if len(b.entries) == 0 {
			delete(l.buckets, bucket)
		}
	}
	return nil
}
