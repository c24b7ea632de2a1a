// Package memstore is the in-process admit.Store: limit state in sharded tables of this process.
//
// A [Store] makes exactly the decisions of the Redis store (docs/guarantees.md), so one process — `admit serve`
// without Redis, a test, a single-instance service — can use it in place of Redis. Its limits are
// per process: several processes each with a memstore do not share them.
//
// Keys live in shards chosen by their Redis Cluster hash slot, each behind its own lock; a busy fixed-window or
// GCRA key is decided under the shard's read lock, with a compare-and-swap. Entries whose window has ended are
// reclaimed by every insert and by a background sweeper, so memory follows the keys in use at any rate of new keys.
// A Store holds at most about Options.MaxEntries entries: a new key beyond them gets an error matching [ErrFull]
// and [admit.ErrUnavailable], never a live count forgotten. The tables, the fast path, reclaim and the entry cap
// are described in docs/memstore.md.
package memstore

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
	"github.com/admit-dev/admit/internal/bound"
)

// Defaults for the zero fields of Options.
const (
	defaultShards        = 64
	maxShards            = bound.SlotCount
	defaultSweepInterval = time.Second
	defaultSweepBudget   = 256
	defaultMaxEntries    = 1 << 20
)

// ErrFull is the error [Store.Take] returns when a key needs a new entry and its shard already holds
// its share of Options.MaxEntries, and reclaim found no expired entry to remove: the Store cannot
// count the key without forgetting another key's count, so it decides nothing. It matches
// [admit.ErrUnavailable]; fail closed on it, as on any error.
var ErrFull = fmt.Errorf("memstore: full: %w", admit.ErrUnavailable)

// Options configures a Store. The zero value is ready to use.
type Options struct {
	// Now is the clock; nil means time.Now. It must be safe for concurrent use and should not go
	// backwards: each call reads it once, before taking its shard's lock, and a shard decides at the
	// latest time it has seen, so a clock that goes back stops the shard's time until it catches up.
	Now func() time.Time
	// Shards is the number of independently locked shards, a power of two; other positive values are
	// rounded up to one (at most 16384, the number of hash slots: a key's shard is chosen by its slot).
	// 0 or less means 64.
	Shards int
	// SweepInterval is the time between two passes of the background sweeper, each of which examines
	// every entry; 0 means one second, and a negative value disables the sweeper (expired entries
	// are then reclaimed only by inserts and when their keys are used again).
	SweepInterval time.Duration
	// SweepBudget is the most entries the sweeper examines in a shard while holding its lock, and the
	// most expired entries an insert removes; it bounds how long reclaim delays a Take. 0 or less
	// means 256.
	SweepBudget int
	// MaxEntries is the most entries the Store holds, expired ones not yet reclaimed included,
	// enforced per shard as MaxEntries/Shards rounded up. 0 or less means 1<<20 (1,048,576, about
	// 64 MiB with 20-byte keys); there is no unlimited setting. A Take that needs a new entry in a
	// full shard returns an error matching [ErrFull] (see the package doc).
	MaxEntries int
}

// Store is an in-process [admit.Store]. It is safe for concurrent use.
// Make one with [New]; the zero value is not usable.
type Store struct {
	tab    *table
	sw     *sweeper          // nil when the sweeper is disabled
	tokens *algo.TokenSource // names the leases of Concurrency Limits
	valid  validLimits       // Limits validated already, for Take
}

var _ admit.Store = (*Store)(nil)

// New returns a Store configured by opts, and starts its background sweeper unless
// opts.SweepInterval is negative. Call [Store.Close] to stop the sweeper; it is also stopped when the
// Store is garbage collected.
func New(opts Options) *Store {
	s := &Store{tab: newTable(opts), tokens: algo.NewTokenSource()}
	interval := opts.SweepInterval
	if interval == 0 {
		interval = defaultSweepInterval
	}
	if interval > 0 {
		// The goroutine holds the table and the sweeper, never the Store, so an unreachable Store is
		// collected and its cleanup stops the goroutine.
		s.sw = &sweeper{stop: make(chan struct{}), done: make(chan struct{})}
		go s.sw.run(s.tab, interval)
		runtime.AddCleanup(s, (*sweeper).signal, s.sw)
	}
	return s
}

// Take decides r; it is TakeAll of one Request. See [Store.TakeAll].
func (s *Store) Take(ctx context.Context, r admit.Request) (d admit.Decision, err error) {
	if r.ID == "" && !algo.Leases(&r) {
		// The common case, without TakeAll's bookkeeping of several Requests, records and leases:
		// the same decision and writes, with the same errors.
		known, err := s.valid.validate(&r)
		if err != nil {
			return d, fmt.Errorf("memstore: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return d, fmt.Errorf("memstore: %w: %w", admit.ErrUnavailable, err)
		}
		sh := s.tab.shard(r.Key)
		h := keyHash(s.tab.seed, r.Key) // before the lock, as the clock
		read := s.tab.now()             // before the lock: nothing under it waits for the clock
		sh.mu.RLock()
		var out fastOutcome
		if sh.takeFast(s.tab, &r, known, h, sh.at(read), &out) {
			sh.mu.RUnlock()
			if out.over != nil {
				out.fill(&out.over.lim, s.tab.baseNano, &d) // after the lock: see fastpath.go
				d.Overridden = true
				return d, nil
			}
			out.fill(&r.Limit, s.tab.baseNano, &d)
			return d, nil
		}
		sh.mu.RUnlock()
		sh.mu.Lock()
		err = sh.takeOne(&r, h, s.tab.instant(sh.at(read)), &d)
		sh.mu.Unlock()
		return d, err
	}
	rs := [1]admit.Request{r}
	var ds [1]admit.Decision
	_, err = s.TakeAll(ctx, rs[:], ds[:])
	return ds[0], err
}

// TakeAll decides rs together, all-or-nothing, exactly as the Redis store does (docs/guarantees.md): each
// Request is decided on the state before any of them, and only if every one is allowed is every one
// consumed. With an ID it keeps the same idempotency record (see admit.Request). See admit.Store.
//
// Invalid requests are reported as errors matching [admit.ErrInvalidLimit] or
// [admit.ErrInvalidRequest], and so is a replicated Limit (admit.Limit.Replicas): memstore has no
// replica to confirm a write, its state lives in the process; like the Redis store, memstore refuses keys of different Redis Cluster
// hash slots, so code tested on it never meets CROSSSLOT in a cluster. If ctx is already done,
// TakeAll decides nothing and returns an error that matches both [admit.ErrUnavailable] and
// ctx.Err(). Otherwise it never blocks on anything but one shard's lock: the keys of one slot live
// in one shard.
//
// If the admission needs new entries and the shard has no room for them (see Options.MaxEntries),
// TakeAll decides nothing and returns an error matching [ErrFull] and [admit.ErrUnavailable]; it
// never evicts a live entry.
//
// A key's state does not depend on the Limit that wrote it. State that cannot be the Limit's — a window left longer
// than its Period, live state of another algorithm — is an error matching [admit.ErrCorruptState], with nothing
// changed, as in Redis (docs/memstore.md#state-under-another-limit).
func (s *Store) TakeAll(ctx context.Context, rs []admit.Request, ds []admit.Decision) (bool, error) {
	if err := admit.ValidateAll(rs, ds); err != nil {
		return false, fmt.Errorf("memstore: %w", err)
	}
	for i := range rs {
		if err := notReplicated(&rs[i].Limit); err != nil {
			return false, fmt.Errorf("memstore: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("memstore: %w: %w", admit.ErrUnavailable, err)
	}
	var rec recordID // hashed before the lock: nothing under it waits for SHA-256
	if id := rs[0].ID; id != "" {
		rec = recordID{key: algo.RecordKey(rs[0].Key, id), fingerprint: algo.Fingerprint(rs)}
	}
	var tokens [bound.MaxRequests]uint64 // the lease each request acquires if admitted, or 0
	algo.LeaseTokens(s.tokens, rs, rec.fingerprint, tokens[:len(rs)])
	sh := s.tab.shard(rs[0].Key)
	read := s.tab.now() // before the lock: nothing under it waits for the clock
	sh.mu.Lock()
	allowed, err := sh.takeAll(rs, ds, tokens[:len(rs)], rec, s.tab.instant(sh.at(read)))
	sh.mu.Unlock()
	if err != nil {
		clear(ds)
	}
	return allowed, err
}

// Settle settles res at its actual cost under the key's shard lock, exactly as the Redis store does
// (docs/reserve-settle.md, internal/algo's settle transitions): a refund goes back only to the window res.Token
// names while the key still holds it, an overrun consumes what the key has left now. It reports the
// key's Decision after; it writes nothing when nothing changes. See admit.Store.
//
// Invalid reservations are reported as errors matching [admit.ErrInvalidLimit] or
// [admit.ErrInvalidRequest] before anything else; a done ctx, as for TakeAll, settles nothing. Corrupt
// state is an error matching [admit.ErrCorruptState], with nothing written; an overrun on a missing
// key in a full shard, one matching [ErrFull].
func (s *Store) Settle(ctx context.Context, res admit.Reservation, actual int64) (admit.Decision, error) {
	if err := res.Validate(actual); err != nil {
		return admit.Decision{}, fmt.Errorf("memstore: settle: %w", err)
	}
	if err := notReplicated(&res.Request.Limit); err != nil {
		return admit.Decision{}, fmt.Errorf("memstore: settle: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return admit.Decision{}, fmt.Errorf("memstore: settle: %w: %w", admit.ErrUnavailable, err)
	}
	sh := s.tab.shard(res.Request.Key)
	read := s.tab.now()
	sh.mu.Lock()
	d, err := sh.settle(&res, actual, s.tab.instant(sh.at(read)))
	sh.mu.Unlock()
	return d, err
}

// Close stops the background sweeper and waits for it to exit. It is idempotent and always returns
// nil. The Store stays usable after Close; expired entries are then reclaimed only by inserts and
// when their keys are used again.
func (s *Store) Close() error {
	if s.sw != nil {
		s.sw.close()
	}
	return nil
}

// Len returns the number of entries the Store holds, including entries whose window has ended but
// which have not been reclaimed yet. It is meant for tests and metrics.
func (s *Store) Len() int {
	n := 0
	for i := range s.tab.shards {
		sh := &s.tab.shards[i]
		sh.mu.Lock()
		n += len(sh.entries)
		sh.mu.Unlock()
	}
	return n
}

// sweep runs one pass of the sweeper now, and returns how many entries it examined and removed.
func (s *Store) sweep() (examined, removed int) { return s.tab.sweep() }
