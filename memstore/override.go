package memstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
	"github.com/admit-dev/admit/internal/validate"
)

// Overrides (admit.Override) live in the shard of their key's hash slot, which is the shard of the
// subject's state (KeyBuilder.OverrideKey): a Take reads a Request's Override under the lock it
// decides under, so the two are read together, as the Redis script reads both. A shard with no
// Override (len of its map 0, read under the lock the Take holds anyway) costs a decision one
// comparison. Each policy's keys are also kept sorted in the table's overrideIndex, for listing and
// counting. An Override's expiry is a deadline on the Store's clock (Options.Now), like an entry's;
// an expired Override reads as none everywhere and is removed when a listing, a count or the
// sweeper meets it (docs/memstore.md#overrides).

// A storedOverride is an Override as a shard keeps it. It is never changed once stored but for
// derived, a cache: SetOverride stores a new one, so a Take may read it under the shard's read lock.
type storedOverride struct {
	o        admit.Override
	deadline time.Duration // since table.base: from then on it is expired; ignored when forever
	forever  bool          // o.Expires is zero
	// derived is the Limit the Override makes of the Limit it last decided under (limitFor): most
	// Requests of one override key are of one policy's Limit, whose overridden figures are then
	// computed once, not on every decision.
	derived atomic.Pointer[overriddenLimit]
}

// An overriddenLimit is a Limit with an Override's numbers, and what deciding under it needs.
type overriddenLimit struct {
	base admit.Limit     // the Request's Limit it was made from
	lim  admit.Limit     // base with the Override's numbers (overridden)
	gcra algo.GCRAParams // lim's figures, when it is a valid GCRA Limit
	err  error           // why lim is not a valid Limit, or nil
}

// limitFor returns base with so's numbers, from derived when it was made from a Limit equal to
// base. Safe under the shard's read lock: callers that race store equal values.
func (so *storedOverride) limitFor(base *admit.Limit) *overriddenLimit {
	if ol := so.derived.Load(); ol != nil && sameLimit(&ol.base, base) {
		return ol
	}
	ol := &overriddenLimit{base: *base}
	// The copy owns its names: a caller's string might share bytes it later changes (unsafe).
	ol.base.Name, ol.base.Tier = strings.Clone(base.Name), strings.Clone(base.Tier)
	ol.lim = overridden(ol.base, so.o)
	if ol.err = ol.lim.Validate(); ol.err == nil && ol.lim.Algorithm == admit.GCRA {
		ol.gcra = algo.NewGCRAParams(ol.lim)
	}
	so.derived.Store(ol)
	return ol
}

// decides reports whether ol decides r: its Limit is valid, and r's cost within its capacity.
func (ol *overriddenLimit) decides(r *admit.Request) bool {
	return ol.err == nil && r.Cost <= ol.lim.Capacity()
}

// expired reports whether so has expired at mono.
func (so *storedOverride) expired(mono time.Duration) bool {
	return !so.forever && so.deadline <= mono
}

// An overrideIndex holds the keys of every policy's Overrides in key order. Its lock is taken
// before any shard's (SetOverride, DeleteOverride, the listing and tidying), never by a Take.
type overrideIndex struct {
	mu       sync.Mutex
	policies map[string]*policyOverrides
}

// policyOverrides are the Overrides of one policy: their keys, sorted, expired ones not yet tidied
// included, and the earliest deadline among them, or later.
type policyOverrides struct {
	keys    sortedKeys
	soonest time.Duration // no key expires before it; noDeadline when none expires
}

// noDeadline is the soonest of a policy none of whose Overrides expires.
const noDeadline = time.Duration(1<<63 - 1)

// override returns the unexpired Override at key, or nil. The caller holds sh.mu, for reading or
// writing.
func (sh *shard) override(key string, mono time.Duration) *storedOverride {
	if len(sh.overrides) == 0 || key == "" {
		return nil
	}
	so := sh.overrides[key]
	if so == nil || so.expired(mono) {
		return nil
	}
	return so
}

// limitOf sets *over to r's Limit with the numbers of the Override at r.OverrideKey and reports
// true, or reports false when there is none at mono. The Override's numbers must make a Limit that
// decides r: an Override that does not (a rate above a sliding log's largest, a cost above its
// burst) is an error matching admit.ErrInvalidRequest naming it. The caller holds sh.mu.
func (sh *shard) limitOf(r *admit.Request, mono time.Duration, over *admit.Limit) (bool, error) {
	so := sh.override(r.OverrideKey, mono)
	if so == nil {
		return false, nil
	}
	return true, overrideLimit(r, so, over)
}

// overrideLimit sets *over to r's Limit with so's numbers, and reports why they cannot decide r, or
// nil. Out of line, so that a decision without an Override pays for none of it.
//
//go:noinline
func overrideLimit(r *admit.Request, so *storedOverride, over *admit.Limit) error {
	ol := so.limitFor(&r.Limit)
	*over = ol.lim
	err := ol.err
	if err == nil {
		// The Request's own checks under the new numbers: its cost against their capacity.
		err = validate.Request(r.Key, r.Cost, r.ID, over.Algorithm == admit.Concurrency, over.Capacity())
	}
	if err != nil {
		return fmt.Errorf("memstore: %w: the override at %q (rate %d, burst %d) cannot decide this request: %v",
			admit.ErrInvalidRequest, r.OverrideKey, so.o.Rate, so.o.Burst, err)
	}
	return nil
}

// overridden returns lim with o's numbers: its Rate, and for GCRA its Burst when o sets one.
func overridden(lim admit.Limit, o admit.Override) admit.Limit {
	lim.Rate = o.Rate
	if lim.Algorithm == admit.GCRA && o.Burst > 0 {
		lim.Burst = o.Burst
	}
	return lim
}

// wall returns the time of the Store's clock, for checking an Override's expiry.
func (t *table) wall() time.Time {
	if t.clock == nil {
		return time.Now()
	}
	return t.clock()
}

// SetOverride stores o at o.Key, replacing any Override there, checked first as admit.Store
// requires (an error matching admit.ErrInvalidRequest, nothing stored). Its expiry is kept on the
// Store's clock: Options.Now, when set, decides when it has passed. Decisions already made are not
// changed; the next Take of a Request with OverrideKey o.Key decides under o.
func (s *Store) SetOverride(ctx context.Context, o admit.Override) error {
	if err := validate.Override(o.Key, o.Rate, o.Burst, o.Expires, o.Reason, s.tab.wall()); err != nil {
		return fmt.Errorf("memstore: override: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: override: %w: %w", admit.ErrUnavailable, err)
	}
	o.Expires = o.Expires.Round(0) // no monotonic reading: it reads back as the same instant
	so := &storedOverride{o: o, forever: o.Expires.IsZero()}
	if !so.forever {
		so.deadline = o.Expires.Sub(s.tab.base)
	}
	ix := &s.tab.overrides
	ix.mu.Lock()
	defer ix.mu.Unlock()
	sh := s.tab.shard(o.Key)
	sh.mu.Lock()
	if sh.overrides == nil {
		sh.overrides = make(map[string]*storedOverride)
	}
	_, had := sh.overrides[o.Key]
	sh.overrides[o.Key] = so
	sh.mu.Unlock()
	policy := validate.OverridePolicy(o.Key)
	if ix.policies == nil {
		ix.policies = make(map[string]*policyOverrides)
	}
	p := ix.policies[policy]
	if p == nil {
		p = &policyOverrides{soonest: noDeadline}
		ix.policies[policy] = p
	}
	if !had {
		p.keys.insert(o.Key)
	}
	if !so.forever {
		p.soonest = min(p.soonest, so.deadline)
	}
	return nil
}

// Override returns the unexpired Override at key. See admit.Store.
func (s *Store) Override(ctx context.Context, key string) (admit.Override, bool, error) {
	if err := validate.OverrideKey(key); err != nil {
		return admit.Override{}, false, fmt.Errorf("memstore: override: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return admit.Override{}, false, fmt.Errorf("memstore: override: %w: %w", admit.ErrUnavailable, err)
	}
	so := s.readOverride(key)
	if so == nil {
		return admit.Override{}, false, nil
	}
	return so.o, true, nil
}

// readOverride returns the Override stored at key and not expired, or nil, read under its shard's
// read lock.
func (s *Store) readOverride(key string) *storedOverride {
	sh := s.tab.shard(key)
	read := s.tab.now()
	sh.mu.RLock()
	so := sh.override(key, sh.at(read))
	sh.mu.RUnlock()
	return so
}

// DeleteOverride deletes the Override at key and reports whether there was an unexpired one. See
// admit.Store.
func (s *Store) DeleteOverride(ctx context.Context, key string) (bool, error) {
	if err := validate.OverrideKey(key); err != nil {
		return false, fmt.Errorf("memstore: override: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("memstore: override: %w: %w", admit.ErrUnavailable, err)
	}
	ix := &s.tab.overrides
	ix.mu.Lock()
	defer ix.mu.Unlock()
	sh := s.tab.shard(key)
	read := s.tab.now()
	sh.mu.Lock()
	so, had := sh.overrides[key]
	existed := had && !so.expired(sh.at(read))
	delete(sh.overrides, key)
	sh.mu.Unlock()
	if had {
		ix.forget(validate.OverridePolicy(key), key)
	}
	return existed, nil
}

// forget removes key from policy's keys. The caller holds ix.mu.
func (ix *overrideIndex) forget(policy, key string) {
	p := ix.policies[policy]
	if p == nil {
		return
	}
	p.keys.delete(key)
	if p.keys.len() == 0 {
		delete(ix.policies, policy)
	}
}

// Overrides lists the unexpired Overrides of policy after cursor, in key order, at most n. See
// admit.Store.
func (s *Store) Overrides(ctx context.Context, policy, cursor string, n int) ([]admit.Override, string, error) {
	if err := validate.OverridePage(policy, cursor, n); err != nil {
		return nil, "", fmt.Errorf("memstore: overrides: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, "", fmt.Errorf("memstore: overrides: %w: %w", admit.ErrUnavailable, err)
	}
	ix := &s.tab.overrides
	ix.mu.Lock()
	defer ix.mu.Unlock()
	p := ix.policies[policy]
	if p == nil {
		return nil, "", nil
	}
	var page []admit.Override
	var gone []string
	more := p.keys.each(cursor, func(key string) bool {
		if len(page) == n {
			return false // a key after a full page
		}
		if so := s.readOverride(key); so != nil {
			page = append(page, so.o)
		} else {
			gone = append(gone, key)
		}
		return true
	})
	next := ""
	if more && len(page) > 0 {
		next = page[len(page)-1].Key
	}
	if len(gone) > 0 {
		s.tab.tidy(policy, gone)
	}
	return page, next, nil
}

// OverrideCount returns the number of unexpired Overrides of policy: exact, since it first removes
// those that have expired, when any has. See admit.Store.
func (s *Store) OverrideCount(ctx context.Context, policy string) (int64, error) {
	if err := validate.OverridePage(policy, "", 1); err != nil {
		return 0, fmt.Errorf("memstore: override count: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("memstore: override count: %w: %w", admit.ErrUnavailable, err)
	}
	ix := &s.tab.overrides
	ix.mu.Lock()
	defer ix.mu.Unlock()
	s.tab.tidyExpired(policy)
	if p := ix.policies[policy]; p != nil {
		return int64(p.keys.len()), nil
	}
	return 0, nil
}

// tidyOverrides removes the expired Overrides of every policy one of whose Overrides may have
// expired: the sweeper's pass over them.
func (t *table) tidyOverrides() {
	ix := &t.overrides
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for policy := range ix.policies {
		t.tidyExpired(policy)
	}
}

// tidyExpired removes policy's expired Overrides, if its soonest deadline has passed, and sets its
// soonest anew. The caller holds t.overrides.mu.
func (t *table) tidyExpired(policy string) {
	p := t.overrides.policies[policy]
	if p == nil || p.soonest > t.now() {
		return // nothing can have expired: the count is exact without a pass
	}
	t.tidy(policy, p.keys.all())
}

// tidy removes, of keys (policy's), those whose Override has expired or gone, from their shards
// and from policy's keys, and sets policy's soonest deadline anew. The caller holds
// t.overrides.mu.
func (t *table) tidy(policy string, keys []string) {
	ix := &t.overrides
	p := ix.policies[policy]
	if p == nil {
		return
	}
	var gone []string
	for _, key := range keys {
		sh := t.shard(key)
		read := t.now()
		sh.mu.Lock()
		if so := sh.overrides[key]; so == nil || so.expired(sh.at(read)) {
			delete(sh.overrides, key)
			gone = append(gone, key)
		}
		sh.mu.Unlock()
	}
	for _, key := range gone {
		ix.forget(policy, key)
	}
	if p = ix.policies[policy]; p == nil {
		return
	}
	p.soonest = noDeadline
	p.keys.each("", func(key string) bool {
		sh := t.shard(key)
		sh.mu.RLock()
		if so := sh.overrides[key]; so != nil && !so.forever {
			p.soonest = min(p.soonest, so.deadline)
		}
		sh.mu.RUnlock()
		return true
	})
}
