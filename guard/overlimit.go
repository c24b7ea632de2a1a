package guard

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/admit-dev/admit"
)

// DefaultMaxEntries is the most entries an [OverLimitCache] holds when its options do not say.
const DefaultMaxEntries = 10_000

// OverLimitOptions configures an [OverLimitCache]. The zero value is ready to use.
type OverLimitOptions struct {
	// MaxEntries is the most rejections the cache remembers, expired ones not yet reclaimed
	// included; 0 or less means DefaultMaxEntries. When it is full, expired entries are reclaimed
	// first, and if none has expired a new rejection is not remembered: the table never grows.
	MaxEntries int
	// Now is the clock; nil means time.Now. It must be safe for concurrent use.
	Now func() time.Time
}

// OverLimitCache is an admit.Store that remembers the rejections of another, so that a client
// hammering a full key costs no round trip to the backend. It is safe for concurrent use. Make one
// with [NewOverLimitCache].
//
// When the next Store rejects a Request with a RetryAfter t, the cache remembers the key, the
// Limit, the cost and the Decision until t from the moment the Request was sent. Until then, a
// Take of that key under the same Limit with the same cost — or, under a FixedWindow Limit, at
// least that cost — is rejected locally: a Decision with Allowed false, the Limit, the Remaining
// of the remembered rejection, RetryAfter the time left, and ResetAfter the remembered one less the
// time passed. RetryAfter is the earliest the backend could admit the same request if no one else
// consumed, and consuming moves it only later, so the local answer is the one the backend would
// give — except that Remaining is as of the remembered rejection (for GCRA, computed from the
// ResetAfter, as its backlog drains): others may have consumed since.
// (A larger cost is rejected too, but under GCRA and the sliding windows it waits longer than the
// remembered RetryAfter, so it goes to the backend for its exact RetryAfter.)
//
// Only what cannot be admitted earlier is cached, so the cache is correct by construction; these
// always go to the next Store:
//   - a Request under a Concurrency Limit (a release frees capacity early), or a shadow Limit
//     (Limit.Shadow: its rejection rejects nothing);
//   - a peek (cost 0), a Request with another cost than the remembered one (but a larger one under
//     a FixedWindow Limit), a Request with an ID (a replay must return the recorded Decision), a
//     Request whose ctx is done;
//   - a key after a refund: a Settle below the units reserved, or a Release, through this cache
//     forgets the key, and a rejection that raced with it is not remembered.
//
// An admission that consumes forgets the key's entry too. A refund made through another process
// is not seen: its key stays rejected here until the remembered RetryAfter at the latest. So does
// a key whose backend state was lost. The cache can therefore reject more than the backend would,
// never admit more: it makes no admission at all.
//
// A TakeAll is rejected locally only when every one of its Requests would be: the Decisions of the
// others could not be known without the backend. Each rejection the backend reports in a TakeAll
// is remembered.
//
// A key has one entry, for the last Limit it was rejected under.
type OverLimitCache struct {
	next   admit.Store
	now    func() time.Time
	seed   maphash.Seed
	shards []overShard
	hits   atomic.Uint64
}

// An overShard is one independently locked part of an OverLimitCache's table.
type overShard struct {
	mu      sync.RWMutex
	entries map[string]overEntry
	max     int
	// epoch counts the refunds of the shard's keys. A rejection is remembered only if no refund
	// happened between the Request being sent and the answer arriving.
	epoch atomic.Uint64
}

// An overEntry is one remembered rejection.
type overEntry struct {
	limit     admit.Limit
	cost      int64
	remaining int64
	until     time.Time // the end of the RetryAfter
	reset     time.Time // the end of the ResetAfter
}

// overShards is the number of shards of a large table.
const overShards = 16

// overEvictBudget is the most entries one insert into a full shard examines for expiry.
const overEvictBudget = 64

var _ admit.Store = (*OverLimitCache)(nil)

// NewOverLimitCache returns an OverLimitCache over next, configured by opts.
func NewOverLimitCache(next admit.Store, opts OverLimitOptions) *OverLimitCache {
	capacity := opts.MaxEntries
	if capacity <= 0 {
		capacity = DefaultMaxEntries
	}
	n := overShards
	for n > capacity {
		n /= 2
	}
	c := &OverLimitCache{next: next, now: opts.Now, seed: maphash.MakeSeed(), shards: make([]overShard, n)}
	if c.now == nil {
		c.now = time.Now
	}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.max = capacity / n
		if i < capacity%n {
			sh.max++ // the shards' caps add up to capacity exactly
		}
		sh.entries = make(map[string]overEntry)
	}
	return c
}

// Hits returns the number of Take and TakeAll calls answered locally, without the next Store.
func (c *OverLimitCache) Hits() uint64 { return c.hits.Load() }

// Len returns the number of entries the cache holds, expired ones not yet reclaimed included. It
// is never more than the MaxEntries of its options.
func (c *OverLimitCache) Len() int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.RLock()
		n += len(sh.entries)
		sh.mu.RUnlock()
	}
	return n
}

// Take rejects r locally if a remembered rejection covers it, and otherwise forwards it to the next
// Store and remembers a rejection.
func (c *OverLimitCache) Take(ctx context.Context, r admit.Request) (admit.Decision, error) {
	sh := c.shard(r.Key)
	if cacheable(&r) && ctx.Err() == nil {
		if e, ok := c.remembered(sh, &r); ok {
			// The clock is read after the entry: a rejection learnt since an earlier reading
			// would otherwise wait beyond its RetryAfter.
			if d, ok := answer(&e, &r, c.now()); ok && r.Validate() == nil {
				c.hits.Add(1)
				return d, nil
			}
		}
	}
	epoch := sh.epoch.Load()
	sent := c.now()
	d, err := c.next.Take(ctx, r)
	if err == nil {
		c.learn(sh, epoch, sent, &r, &d, d.Allowed)
	}
	return d, err
}

// TakeAll rejects rs locally if remembered rejections cover every one of them, and otherwise
// forwards them to the next Store and remembers each rejection.
func (c *OverLimitCache) TakeAll(ctx context.Context, rs []admit.Request, ds []admit.Decision) (bool, error) {
	if len(rs) > admit.MaxRequests || len(ds) != len(rs) {
		return c.next.TakeAll(ctx, rs, ds) // invalid: the next Store says why
	}
	if c.localAll(ctx, rs, ds) {
		c.hits.Add(1)
		return false, nil
	}
	var epochs [admit.MaxRequests]uint64
	for i := range rs {
		epochs[i] = c.shard(rs[i].Key).epoch.Load()
	}
	sent := c.now()
	allowed, err := c.next.TakeAll(ctx, rs, ds)
	if err == nil {
		for i := range rs {
			c.learn(c.shard(rs[i].Key), epochs[i], sent, &rs[i], &ds[i], allowed)
		}
	}
	return allowed, err
}

// localAll fills ds with local rejections and reports true if remembered rejections cover every
// one of rs; otherwise it leaves ds alone.
func (c *OverLimitCache) localAll(ctx context.Context, rs []admit.Request, ds []admit.Decision) bool {
	if ctx.Err() != nil {
		return false
	}
	for i := range rs {
		if !cacheable(&rs[i]) {
			return false
		}
	}
	var entries [admit.MaxRequests]overEntry
	for i := range rs {
		e, ok := c.remembered(c.shard(rs[i].Key), &rs[i])
		if !ok {
			return false
		}
		entries[i] = e
	}
	now := c.now() // after the entries, as in Take
	var local [admit.MaxRequests]admit.Decision
	for i := range rs {
		d, ok := answer(&entries[i], &rs[i], now)
		if !ok {
			return false
		}
		local[i] = d
	}
	if admit.ValidateAll(rs, ds) != nil {
		return false
	}
	copy(ds, local[:len(rs)])
	return true
}

// Release forwards l to the next Store, and forgets l.Key: a release frees capacity.
func (c *OverLimitCache) Release(ctx context.Context, l admit.Lease) error {
	err := c.next.Release(ctx, l)
	c.forget(l.Key)
	return err
}

// Settle forwards res to the next Store; a refund (actual below the units reserved) forgets
// res.Request.Key, whatever the outcome.
func (c *OverLimitCache) Settle(ctx context.Context, res admit.Reservation, actual int64) (admit.Decision, error) {
	d, err := c.next.Settle(ctx, res, actual)
	if actual < res.Request.Cost {
		c.forget(res.Request.Key)
	}
	return d, err
}

// cacheable reports whether a remembered rejection may answer r: it consumes, has no ID, and is
// under an enforced Limit that no release can free early.
func cacheable(r *admit.Request) bool {
	return r.Cost > 0 && r.ID == "" && !r.Limit.Shadow && r.Limit.Algorithm != admit.Concurrency
}

// covers reports whether a rejection of cost under r.Limit tells r's Decision: the same cost, or,
// under a FixedWindow Limit, whose RetryAfter is the end of the window whatever the cost, a larger
// one. Under the other algorithms a larger cost waits longer than the remembered RetryAfter.
func covers(cost int64, r *admit.Request) bool {
	return r.Cost == cost || r.Cost > cost && r.Limit.Algorithm == admit.FixedWindow
}

// shard returns the shard of key.
func (c *OverLimitCache) shard(key string) *overShard {
	if len(c.shards) == 1 {
		return &c.shards[0]
	}
	return &c.shards[maphash.String(c.seed, key)%uint64(len(c.shards))]
}

// remembered returns the remembered rejection of r's key, if there is one of r's Limit that covers
// r's cost.
func (c *OverLimitCache) remembered(sh *overShard, r *admit.Request) (overEntry, bool) {
	sh.mu.RLock()
	e, ok := sh.entries[r.Key]
	sh.mu.RUnlock()
	return e, ok && e.limit == r.Limit && covers(e.cost, r)
}

// answer returns the local rejection of r at now by the remembered rejection e, if e still covers
// it. now must be read after e: e.until may be later than now + RetryAfter for an older now.
func answer(e *overEntry, r *admit.Request, now time.Time) (admit.Decision, bool) {
	if !now.Before(e.until) {
		return admit.Decision{}, false
	}
	retry := e.until.Sub(now)
	d := admit.Decision{
		Limit:      r.Limit,
		Remaining:  e.remaining,
		RetryAfter: retry,
		ResetAfter: max(e.reset.Sub(now), retry),
	}
	if r.Limit.Algorithm == admit.GCRA {
		// A GCRA key's Remaining grows as its backlog drains; once the request fits, the
		// remembered RetryAfter (rounded up to the millisecond by the backend) is too late: ask.
		if d.Remaining = gcraRemaining(r.Limit, d.ResetAfter, e.remaining); d.Remaining >= r.Cost {
			return admit.Decision{}, false
		}
	}
	return d, true
}

// gcraRemaining returns the Remaining of a GCRA key under lim whose ResetAfter is reset: the units
// that fit within the tolerance beyond the backlog, floor((Capacity × T − reset) / T), as the
// backend reports it, and at least the remembered one.
func gcraRemaining(lim admit.Limit, reset time.Duration, remembered int64) int64 {
	t := lim.EmissionInterval()
	tolerance := time.Duration(lim.Capacity()) * t
	if t <= 0 || reset >= tolerance {
		return remembered
	}
	return max(int64((tolerance-reset)/t), remembered)
}

// learn updates the table with d, the Decision of r sent at sent while the shard's epoch was
// epoch; consumed reports whether the call consumed (a TakeAll that was allowed).
func (c *OverLimitCache) learn(sh *overShard, epoch uint64, sent time.Time, r *admit.Request, d *admit.Decision, consumed bool) {
	switch {
	case d.Replayed || r.Cost == 0:
		return
	case d.Allowed:
		if consumed {
			sh.mu.Lock()
			delete(sh.entries, r.Key) // its counts moved: the entry would be stale
			sh.mu.Unlock()
		}
		return
	case !cacheable(&admit.Request{Cost: r.Cost, Limit: r.Limit}) || d.RetryAfter <= 0:
		return
	}
	e := overEntry{limit: r.Limit, cost: r.Cost, remaining: d.Remaining, until: sent.Add(d.RetryAfter), reset: sent.Add(d.ResetAfter)}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.epoch.Load() != epoch {
		return // a refund raced with the request: the rejection may be stale
	}
	if _, ok := sh.entries[r.Key]; !ok && len(sh.entries) >= sh.max && !sh.evictLocked(c.now()) {
		return // full of live entries: do not grow
	}
	sh.entries[r.Key] = e
}

// evictLocked deletes expired entries, examining at most overEvictBudget of them, and reports
// whether any was deleted. sh.mu must be held.
func (sh *overShard) evictLocked(now time.Time) bool {
	n, freed := 0, false
	for k, e := range sh.entries { // map order is random: a fresh sample each time
		if !now.Before(e.until) {
			delete(sh.entries, k)
			freed = true
		}
		if n++; n >= overEvictBudget {
			break
		}
	}
	return freed
}

// forget deletes key's entry, and makes a rejection of key in flight not remembered.
func (c *OverLimitCache) forget(key string) {
	sh := c.shard(key)
	sh.mu.Lock()
	delete(sh.entries, key)
	sh.epoch.Add(1)
	sh.mu.Unlock()
}
