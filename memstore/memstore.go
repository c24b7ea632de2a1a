// Package memstore is the in-process admit.Store: limit state in sharded maps of this process.
//
// A [Store] makes exactly the decisions of the Redis store (SPEC §2), so one process — `admit serve`
// without Redis, a test, a single-instance service — can use it in place of Redis. Its limits are
// per process: several processes each with a memstore do not share them.
//
// Keys live in shards chosen by a hash of the key with a per-Store seed, each shard behind its own
// mutex. An entry holds a count and the absolute end of its window. An entry whose window has ended
// is treated as missing and reclaimed when its key is next used; a background sweeper also
// reclaims such entries, examining a bounded number of entries per shard at each tick, so memory
// follows the keys in use rather than every key ever seen.
package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
)

// Defaults for the zero fields of Options.
const (
	defaultShards        = 64
	maxShards            = 1 << 16
	defaultSweepInterval = time.Second
	defaultSweepBudget   = 256
)

// Options configures a Store. The zero value is ready to use.
type Options struct {
	// Now is the clock; nil means time.Now. It must be safe for concurrent use and should not go
	// backwards (see [Store.Take]).
	Now func() time.Time
	// Shards is the number of independently locked shards, a power of two; other positive values are
	// rounded up to one (at most 65536). 0 or less means 64.
	Shards int
	// SweepInterval is the time between two passes of the background sweeper; 0 means one second,
	// and a negative value disables the sweeper (expired entries are then reclaimed only when their
	// keys are used again).
	SweepInterval time.Duration
	// SweepBudget is the most entries the sweeper examines in each shard at each pass; 0 or less
	// means 256.
	SweepBudget int
}

// Store is an in-process [admit.Store]. It is safe for concurrent use.
// Make one with [New]; the zero value is not usable.
type Store struct {
	tab *table
	sw  *sweeper // nil when the sweeper is disabled
}

var _ admit.Store = (*Store)(nil)

// New returns a Store configured by opts, and starts its background sweeper unless
// opts.SweepInterval is negative. Call [Store.Close] to stop the sweeper; it is also stopped when the
// Store is garbage collected.
func New(opts Options) *Store {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	n := opts.Shards
	switch {
	case n <= 0:
		n = defaultShards
	case n > maxShards:
		n = maxShards
	}
	size := 1
	for size < n {
		size <<= 1
	}
	budget := opts.SweepBudget
	if budget <= 0 {
		budget = defaultSweepBudget
	}
	tab := &table{
		seed:   maphash.MakeSeed(),
		shards: make([]shard, size),
		mask:   uint64(size - 1),
		clock:  now,
		base:   now(),
		budget: budget,
	}
	for i := range tab.shards {
		tab.shards[i].index = make(map[string]int)
	}
	s := &Store{tab: tab}

	interval := opts.SweepInterval
	if interval == 0 {
		interval = defaultSweepInterval
	}
	if interval > 0 {
		// The goroutine holds the table and the sweeper, never the Store, so an unreachable Store is
		// collected and its cleanup stops the goroutine.
		s.sw = &sweeper{stop: make(chan struct{}), done: make(chan struct{})}
		go s.sw.run(tab, interval)
		runtime.AddCleanup(s, (*sweeper).signal, s.sw)
	}
	return s
}

// Take consumes n units of key under lim if they are available and reports the Decision; n = 0 is a
// peek that consumes nothing. It decides exactly as the Redis store does (SPEC §2.1).
//
// An invalid lim, key or n is reported as an error matching [admit.ErrInvalidLimit] or
// [admit.ErrInvalidRequest]. If ctx is already done, Take decides nothing and returns an error that
// matches both [admit.ErrUnavailable] and ctx.Err(). Otherwise Take never blocks on anything but its
// shard's lock.
//
// The state of a key does not depend on the Limit that wrote it: a later Take under another Limit
// uses the stored count and window as they are, as Redis does. If the window left on the key is
// longer than lim.Period — the key was started under a longer Period, or the clock went backwards —
// Take returns an error matching [admit.ErrCorruptState] (and so ErrUnavailable) and changes nothing,
// exactly as the Redis store does; the key is usable again when its window ends.
func (s *Store) Take(ctx context.Context, key string, lim admit.Limit, n int64) (admit.Decision, error) {
	if err := admit.ValidateRequest(key, lim, n); err != nil {
		return admit.Decision{}, fmt.Errorf("memstore: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return admit.Decision{}, fmt.Errorf("memstore: %w: %w", admit.ErrUnavailable, err)
	}
	sh := s.tab.shard(key)
	sh.mu.Lock()
	// Read the clock under the lock, so that the times seen by one key never go backwards.
	r, err := sh.take(key, lim, n, s.tab.now())
	sh.mu.Unlock()
	if err != nil {
		return admit.Decision{}, err
	}
	return admit.Decision{
		Allowed:    r.Allowed,
		Limit:      lim,
		Remaining:  r.Remaining,
		RetryAfter: r.RetryAfter,
		ResetAfter: r.ResetAfter,
	}, nil
}

// Close stops the background sweeper and waits for it to exit. It is idempotent and always returns
// nil. The Store stays usable after Close; expired entries are then reclaimed only when their keys
// are used again.
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

// A table is the state of a Store: its shards and its clock.
type table struct {
	seed   maphash.Seed
	shards []shard
	mask   uint64
	clock  func() time.Time
	base   time.Time // the clock at New; times are kept as durations since base
	budget int       // the sweeper's budget per shard per pass
}

// now returns the time since t.base. With time.Now it follows the monotonic clock, so a change of
// the wall clock moves no window.
func (t *table) now() time.Duration { return t.clock().Sub(t.base) }

func (t *table) shard(key string) *shard {
	return &t.shards[maphash.String(t.seed, key)&t.mask]
}

// sweep examines at most t.budget entries of each shard, removes those whose window has ended, and
// returns how many entries it examined and removed.
func (t *table) sweep() (examined, removed int) {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		e, r := sh.sweep(t.now(), t.budget)
		sh.mu.Unlock()
		examined += e
		removed += r
	}
	return examined, removed
}

// An entry is the state of one key: algo.FixedWindowState with an absolute deadline in place of a TTL.
type entry struct {
	key      string
	count    int64
	deadline time.Duration // the end of the window, since table.base
}

// A shard is the part of a table that one mutex guards. Its entries are kept densely in a slice,
// with a map from key to position, so that the sweeper can visit them in turn with a cursor.
type shard struct {
	mu      sync.Mutex
	index   map[string]int // key → position in entries
	entries []entry
	cursor  int // the next position the sweeper examines
	peak    int // the most entries held since the shard's storage was last rebuilt
	_       [64]byte
}

// take decides a request of n units of key under lim at time now, and makes the decision's write.
// The caller holds sh.mu.
func (sh *shard) take(key string, lim admit.Limit, n int64, now time.Duration) (algo.FixedWindowResult, error) {
	i, found := sh.index[key]
	var st *algo.FixedWindowState
	if found {
		e := &sh.entries[i]
		if ttl := e.deadline - now; ttl > 0 {
			state := algo.FixedWindowState{Count: e.count, TTL: ttl}
			if err := algo.CheckFixedWindow(state, lim.Period); err != nil {
				return algo.FixedWindowResult{}, fmt.Errorf("memstore: fixed_window: %w: %w (window left %v, Limit %v)",
					admit.ErrCorruptState, err, ttl, lim)
			}
			st = &state
		}
		// Otherwise the window has ended: the key is missing, and its entry is reused or removed below.
	}
	r := algo.FixedWindow(st, lim.Rate, lim.Period, n)
	switch r.Write {
	case algo.WriteCreate:
		if found {
			sh.entries[i].count, sh.entries[i].deadline = n, now+lim.Period
		} else {
			sh.insert(entry{key: strings.Clone(key), count: n, deadline: now + lim.Period})
		}
	case algo.WriteIncrement:
		sh.entries[i].count += n
	case algo.WriteNone:
		if found && st == nil {
			sh.remove(i)
		}
	}
	return r, nil
}

func (sh *shard) insert(e entry) {
	sh.index[e.key] = len(sh.entries)
	sh.entries = append(sh.entries, e)
	sh.peak = max(sh.peak, len(sh.entries))
}

// remove deletes the entry at position i, moving the last entry into its place.
func (sh *shard) remove(i int) {
	last := len(sh.entries) - 1
	delete(sh.index, sh.entries[i].key)
	if i != last {
		sh.entries[i] = sh.entries[last]
		sh.index[sh.entries[i].key] = i
	}
	sh.entries[last] = entry{}
	sh.entries = sh.entries[:last]
}

// Below this many entries a shard's storage is never rebuilt.
const minRebuild = 1024

// sweep examines up to budget entries from the cursor on, wrapping around, and removes those whose
// window has ended at now. When the shard has shrunk to a quarter of its peak, it rebuilds the map
// and the slice at their present size (Go maps never shrink by themselves). The caller holds sh.mu.
func (sh *shard) sweep(now time.Duration, budget int) (examined, removed int) {
	for n := min(budget, len(sh.entries)); examined < n && len(sh.entries) > 0; examined++ {
		if sh.cursor >= len(sh.entries) {
			sh.cursor = 0
		}
		if sh.entries[sh.cursor].deadline <= now {
			sh.remove(sh.cursor) // the last entry moves here, and is examined next
			removed++
		} else {
			sh.cursor++
		}
	}
	if sh.peak >= minRebuild && len(sh.entries) <= sh.peak/4 {
		sh.rebuild()
	}
	return examined, removed
}

// rebuild copies the entries into storage of their present size.
func (sh *shard) rebuild() {
	entries := make([]entry, len(sh.entries))
	copy(entries, sh.entries)
	index := make(map[string]int, len(entries))
	for i, e := range entries {
		index[e.key] = i
	}
	sh.entries, sh.index, sh.peak = entries, index, len(entries)
	if sh.cursor > len(entries) {
		sh.cursor = 0
	}
}

// A sweeper is the background goroutine of a Store.
type sweeper struct {
	once sync.Once
	stop chan struct{} // closed to stop the goroutine
	done chan struct{} // closed by the goroutine when it returns
}

func (sw *sweeper) run(tab *table, interval time.Duration) {
	defer close(sw.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-sw.stop:
			return
		case <-tick.C:
			tab.sweep()
		}
	}
}

// signal tells the goroutine to stop, without waiting. It is idempotent.
func (sw *sweeper) signal() { sw.once.Do(func() { close(sw.stop) }) }

// close stops the goroutine and waits for it to return. It is idempotent.
func (sw *sweeper) close() {
	sw.signal()
	<-sw.done
}
