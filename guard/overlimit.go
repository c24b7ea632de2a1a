package guard

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/slot"
	"github.com/admit-dev/admit/internal/validate"
)

// DefaultMaxEntries is the most entries an [OverLimitCache] holds when its options do not say.
const DefaultMaxEntries = 10_000

// DefaultMaxAge is the longest an [OverLimitCache] answers from a rejection when its options do not
// say: a change made in the backend (a key deleted to give a quota back, corrupt state, a flush) is
// seen within it.
const DefaultMaxAge = time.Second

// OverLimitOptions configures an [OverLimitCache]. The zero value is ready to use.
type OverLimitOptions struct {
	// MaxEntries is the most rejections the cache remembers, expired ones not yet reclaimed
	// included; 0 or less means DefaultMaxEntries. When it is full, expired entries are reclaimed
	// first, and if none has expired a new rejection is not remembered: the table never grows.
	MaxEntries int
	// MaxAge bounds how long a remembered rejection answers: at most MaxAge after the Request
	// that learnt it was sent, however long its RetryAfter. 0 means DefaultMaxAge; a negative
	// MaxAge turns the cache off, so that every call goes to the next Store and nothing is
	// remembered.
	MaxAge time.Duration
	// Now is the clock; nil means time.Now. It must be safe for concurrent use.
	Now func() time.Time
}

// OverLimitCache is an admit.Store that remembers the rejections of another, so that a client
// hammering a full key costs at most one round trip to the backend per MaxAge
// ([OverLimitOptions.MaxAge], a second by default). It is safe for concurrent use. Make one with
// [NewOverLimitCache].
//
// A rejection with a RetryAfter t is remembered until t, or for MaxAge if that is sooner; until
// then a Take of the key under the same Limit and cost (or, under a FixedWindow Limit, at least
// that cost) is rejected locally, as the backend would reject it. Only what cannot be admitted
// earlier is cached: not Concurrency or shadow Limits, peeks, Requests with an ID, nor a key after
// a refund. A remembered rejection answers only a Request of the same OverrideKey, with the
// Decision's own Limit and Overridden, and is forgotten when that Override is set or deleted through
// the cache, or named to [OverLimitCache.Forget] (an Override changed through another instance).
// The cache can reject more than the backend would for at most MaxAge, and never admits.
// What it remembers, what it answers and what always goes to the backend, in full:
// docs/failure-modes.md#guardoverlimitcache-in-the-library.
type OverLimitCache struct {
	next   admit.Store
	maxAge time.Duration // negative: off
	now    func() time.Time
	seed   maphash.Seed
	shards []overShard
	hits   atomic.Uint64
}

// An overShard is one independently locked part of an OverLimitCache's table.
type overShard struct {
	mu      sync.RWMutex
	entries map[string]*overEntry // an entry's fields are immutable but refresh, which mu guards
	max     int
	// epoch counts the refunds of the shard's keys. A rejection is remembered only if no refund
	// happened between the Request being sent and the answer arriving.
	epoch atomic.Uint64
}

// An overEntry is one remembered rejection.
type overEntry struct {
	limit admit.Limit // the Request's
	// overrideKey is the Request's OverrideKey: forgetting it (Forget, SetOverride, DeleteOverride)
	// forgets the entry.
	overrideKey string
	// decided is the Limit that decided, the Decision's (an Override's numbers, when overridden).
	decided    admit.Limit
	overridden bool
	cost       int64
	remaining  int64
	until      time.Time // the end of the RetryAfter
	reset      time.Time // the end of the ResetAfter
	expires    time.Time // the end of its answers: until, or MaxAge after it was learnt if earlier
	// refresh, while a call asks the backend in place of this aged entry, is closed when the
	// answer has been learnt; nil otherwise. The shard's mu guards it.
	refresh chan struct{}
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
	maxAge := opts.MaxAge
	if maxAge == 0 {
		maxAge = DefaultMaxAge
	}
	c := &OverLimitCache{next: next, maxAge: maxAge, now: opts.Now, seed: maphash.MakeSeed(), shards: make([]overShard, n)}
	if c.now == nil {
		c.now = time.Now
	}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.max = capacity / n
		if i < capacity%n {
			sh.max++ // the shards' caps add up to capacity exactly
		}
		sh.entries = make(map[string]*overEntry)
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
	var refresh chan struct{} // closed once this call's answer is learnt, if it refreshes an entry
	if c.maxAge >= 0 && cacheable(&r) {
		// Each turn ends in a local answer, a backend call, or a wait for a refresh of the entry
		// that ends; the entry a turn sees aged is never one refreshed since.
	lookup:
		for {
			if ctx.Err() != nil {
				break
			}
			p, e, ok := c.remembered(sh, &r)
			if !ok {
				break
			}
			// The clock is read after the entry: a rejection learnt since an earlier reading
			// would otherwise wait beyond its RetryAfter.
			now := c.now()
			d, ok := answer(&e, &r, now)
			if !ok || r.Validate() != nil {
				break
			}
			if now.Before(e.expires) {
				c.hits.Add(1)
				return d, nil
			}
			// Aged: one call asks the backend, the others wait for its answer.
			wait, mine := c.claim(sh, r.Key, p)
			switch {
			case mine != nil:
				refresh = mine
				break lookup
			case wait == nil:
				continue // the entry changed meanwhile: look again
			}
			select {
			case <-wait:
			case <-ctx.Done():
			}
		}
	}
	epoch := sh.epoch.Load()
	sent := c.now()
	d, err := c.next.Take(ctx, r)
	if err == nil {
		c.learn(sh, epoch, sent, &r, &d, d.Allowed)
	}
	if refresh != nil {
		c.refreshed(sh, r.Key, refresh)
	}
	return d, err
}

// TakeAll rejects rs locally if remembered rejections cover every one of them, and otherwise
// forwards them to the next Store and remembers each rejection.
func (c *OverLimitCache) TakeAll(ctx context.Context, rs []admit.Request, ds []admit.Decision) (bool, error) {
	if len(rs) > bound.MaxRequests || len(ds) != len(rs) {
		return c.next.TakeAll(ctx, rs, ds) // invalid: the next Store says why
	}
	var refresh [bound.MaxRequests]chan struct{} // as in Take, per Request
	if c.maxAge >= 0 && c.mayCover(rs) {
		for { // as in Take
			local, wait := c.localAll(ctx, rs, ds, &refresh)
			if local {
				c.hits.Add(1)
				return false, nil
			}
			if wait == nil {
				break
			}
			select {
			case <-wait:
			case <-ctx.Done():
			}
		}
	}
	var epochs [bound.MaxRequests]uint64
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
	for i := range rs {
		if refresh[i] != nil {
			c.refreshed(c.shard(rs[i].Key), rs[i].Key, refresh[i])
		}
	}
	return allowed, err
}

// mayCover reports whether every one of rs is cacheable and has a remembered entry, so that
// localAll may answer them: the common case, a Request with nothing remembered, is told here
// without localAll's large frame (its copies of the entries and Decisions), which a goroutine's
// stack would otherwise grow for on every call. An entry learnt after this look is used by a
// later call.
func (c *OverLimitCache) mayCover(rs []admit.Request) bool {
	for i := range rs {
		if !cacheable(&rs[i]) {
			return false
		}
		sh := c.shard(rs[i].Key)
		sh.mu.RLock()
		p := sh.entries[rs[i].Key]
		sh.mu.RUnlock()
		if p == nil {
			return false
		}
	}
	return true
}

// localAll fills ds with local rejections and reports true if remembered rejections cover every
// one of rs; otherwise it leaves ds alone. When the rejections cover rs but some are aged, it
// claims their refresh for this call in refresh and reports false, or, if another call refreshes
// one of them already, claims nothing and returns the channel to wait on before looking again.
func (c *OverLimitCache) localAll(ctx context.Context, rs []admit.Request, ds []admit.Decision, refresh *[bound.MaxRequests]chan struct{}) (bool, <-chan struct{}) {
	if ctx.Err() != nil {
		return false, nil
	}
	for i := range rs {
		if !cacheable(&rs[i]) {
			return false, nil
		}
	}
	var entries [bound.MaxRequests]overEntry
	var ptrs [bound.MaxRequests]*overEntry
	for i := range rs {
		p, e, ok := c.remembered(c.shard(rs[i].Key), &rs[i])
		if !ok {
			return false, nil
		}
		entries[i], ptrs[i] = e, p
	}
	now := c.now() // after the entries, as in Take
	var local [bound.MaxRequests]admit.Decision
	aged := false
	for i := range rs {
		d, ok := answer(&entries[i], &rs[i], now)
		if !ok {
			return false, nil
		}
		local[i] = d
		aged = aged || !now.Before(entries[i].expires)
	}
	if admit.ValidateAll(rs, ds) != nil {
		return false, nil
	}
	if !aged {
		copy(ds, local[:len(rs)])
		return true, nil
	}
	for i := range rs {
		if now.Before(entries[i].expires) {
			continue
		}
		sh := c.shard(rs[i].Key)
		wait, mine := c.claim(sh, rs[i].Key, ptrs[i])
		if mine != nil {
			refresh[i] = mine
			continue
		}
		// Another call refreshes it, or it changed: give back what was claimed, and look again.
		for j := range i {
			if refresh[j] != nil {
				c.refreshed(c.shard(rs[j].Key), rs[j].Key, refresh[j])
				refresh[j] = nil
			}
		}
		if wait == nil {
			wait = closed
		}
		return false, wait
	}
	return false, nil
}

// closed is a closed channel: a wait that ends at once.
var closed = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// claim makes the caller the one that refreshes p, key's aged entry, and returns the channel to
// close once its answer has been learnt (with refreshed); or, if another call refreshes p already,
// the channel to wait on; or neither if key's entry is no longer p.
func (c *OverLimitCache) claim(sh *overShard, key string, p *overEntry) (wait <-chan struct{}, mine chan struct{}) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch {
	case sh.entries[key] != p:
		return nil, nil
	case p.refresh != nil:
		return p.refresh, nil
	}
	p.refresh = make(chan struct{})
	return nil, p.refresh
}

// refreshed ends the refresh of key that claim gave ch to: the calls waiting for it look again.
func (c *OverLimitCache) refreshed(sh *overShard, key string, ch chan struct{}) {
	sh.mu.Lock()
	if p := sh.entries[key]; p != nil && p.refresh == ch {
		p.refresh = nil // nothing new was learnt: the next call refreshes it again
	}
	sh.mu.Unlock()
	close(ch)
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

// Reset forwards keys to the next Store, then forgets them, whatever the outcome (see
// [OverLimitCache.Forget]).
func (c *OverLimitCache) Reset(ctx context.Context, keys []string) error {
	err := c.next.Reset(ctx, keys)
	c.Forget(keys)
	return err
}

// Forget deletes the remembered rejections of keys, and of the Requests whose OverrideKey is one of
// keys, and makes a rejection of one of them in flight not remembered: the next Take of each asks
// the next Store. Use it as the listener of resets, and of Overrides set or deleted, made through
// other instances (redisstore's OnReset).
func (c *OverLimitCache) Forget(keys []string) {
	for _, k := range keys {
		c.forget(k)
	}
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

// shard returns the shard of key: the one of its hash tag (its Redis Cluster slot's), so that a
// subject's keys and its override keys (KeyBuilder.OverrideKey: the same tag) share one, and
// forgetting an override key examines one shard.
func (c *OverLimitCache) shard(key string) *overShard {
	if len(c.shards) == 1 {
		return &c.shards[0]
	}
	return &c.shards[maphash.String(c.seed, slot.Tag(key))%uint64(len(c.shards))]
}

// remembered returns the remembered rejection of r's key and a copy of it, if there is one of r's
// Limit that covers r's cost.
func (c *OverLimitCache) remembered(sh *overShard, r *admit.Request) (*overEntry, overEntry, bool) {
	sh.mu.RLock()
	p := sh.entries[r.Key]
	var e overEntry
	if p != nil {
		e = *p
	}
	sh.mu.RUnlock()
	return p, e, p != nil && e.limit == r.Limit && e.overrideKey == r.OverrideKey && covers(e.cost, r)
}

// answer returns the local rejection of r at now by the remembered rejection e, if e still covers
// it. now must be read after e: e.until may be later than now + RetryAfter for an older now.
func answer(e *overEntry, r *admit.Request, now time.Time) (admit.Decision, bool) {
	if !now.Before(e.until) {
		return admit.Decision{}, false
	}
	retry := e.until.Sub(now)
	d := admit.Decision{
		Limit:      e.decided, // r.Limit, or its Override's numbers: the backend's answer
		Overridden: e.overridden,
		Remaining:  e.remaining,
		RetryAfter: retry,
		ResetAfter: max(e.reset.Sub(now), retry),
	}
	if r.Limit.Algorithm == admit.GCRA {
		// A GCRA key's Remaining grows as its backlog drains; once the request fits, the
		// remembered RetryAfter (rounded up to the millisecond by the backend) is too late: ask.
		if d.Remaining = gcraRemaining(e.decided, d.ResetAfter, e.remaining); d.Remaining >= r.Cost {
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
	case c.maxAge < 0 || !cacheable(&admit.Request{Cost: r.Cost, Limit: r.Limit}) || d.RetryAfter <= 0:
		return
	}
	e := &overEntry{limit: r.Limit, overrideKey: r.OverrideKey, decided: d.Limit, overridden: d.Overridden,
		cost: r.Cost, remaining: d.Remaining, until: sent.Add(d.RetryAfter), reset: sent.Add(d.ResetAfter)}
	e.expires = sent.Add(min(d.RetryAfter, c.maxAge))
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
		if !now.Before(e.expires) && e.refresh == nil {
			delete(sh.entries, k)
			freed = true
		}
		if n++; n >= overEvictBudget {
			break
		}
	}
	return freed
}

// forget deletes key's entry, and, when key is an override key, the entries of the Requests whose
// OverrideKey it is (in key's shard: they share its tag), and makes a rejection in flight of any of
// them not remembered.
func (c *OverLimitCache) forget(key string) {
	sh := c.shard(key)
	override := validate.OverridePolicy(key) != ""
	sh.mu.Lock()
	delete(sh.entries, key)
	if override {
		for k, e := range sh.entries {
			if e.overrideKey == key {
				delete(sh.entries, k)
			}
		}
	}
	sh.epoch.Add(1)
	sh.mu.Unlock()
}

// SetOverride forwards o to the next Store, then forgets o.Key, whatever the outcome: a rejection
// remembered under the numbers before is not answered after (see [OverLimitCache.Forget]).
func (c *OverLimitCache) SetOverride(ctx context.Context, o admit.Override) error {
	err := c.next.SetOverride(ctx, o)
	c.forget(o.Key)
	return err
}

// Override forwards key to the next Store.
func (c *OverLimitCache) Override(ctx context.Context, key string) (admit.Override, bool, error) {
	return c.next.Override(ctx, key)
}

// DeleteOverride forwards key to the next Store, then forgets key, whatever the outcome, as
// SetOverride.
func (c *OverLimitCache) DeleteOverride(ctx context.Context, key string) (bool, error) {
	existed, err := c.next.DeleteOverride(ctx, key)
	c.forget(key)
	return existed, err
}

// Overrides forwards the listing to the next Store.
func (c *OverLimitCache) Overrides(ctx context.Context, policy, cursor string, n int) ([]admit.Override, string, error) {
	return c.next.Overrides(ctx, policy, cursor, n)
}

// OverrideCount forwards the count to the next Store.
func (c *OverLimitCache) OverrideCount(ctx context.Context, policy string) (int64, error) {
	return c.next.OverrideCount(ctx, policy)
}
