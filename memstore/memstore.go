// Package memstore is the in-process admit.Store: limit state in sharded tables of this process.
//
// A [Store] makes exactly the decisions of the Redis store (docs/guarantees.md), so one process — `admit serve`
// without Redis, a test, a single-instance service — can use it in place of Redis. Its limits are
// per process: several processes each with a memstore do not share them.
//
// Keys live in shards chosen by their Redis Cluster hash slot (admit.Slot), each shard behind its
// own read-write lock, so the keys of one all-or-nothing request share one lock. Each shard keeps a
// table of its own: 32-byte entries free of pointers, the keys' bytes one after another in an
// arena, and an open-addressing index of 4-byte slots. An entry holds a count and the absolute end
// of its window, or an idempotency record (docs/keys.md, "Idempotency records"). A single Take under a fixed window or GCRA
// Limit, on a key that holds live state, holds the lock only for reading, and writes its admission
// with a compare-and-swap of the entry's one changing word: callers of a hot key do not queue
// behind one another, and one preempted on the way holds up none of them unless a writer of the
// shard comes to wait for it. Everything else — a new or ended key, the other algorithms, TakeAll,
// Settle, reclaim — holds the lock for writing, for a few hundred instructions. Validating, hashing
// the key, reading the clock and making the Decision happen outside the lock. [Store.Settle]
// settles a reservation under the same shard lock, with internal/algo's settle transitions, as the
// Redis store's settle script does. A sliding window's entry also names its window's start and the
// previous window's count (about 90 bytes more), a sliding log's the times of its admitted units (8
// bytes each, at most admit.MaxSlidingLogRate), a concurrency key's its leases in flight (16 bytes
// each, at most admit.MaxConcurrency).
//
// # Reclaim
//
// An entry whose window has ended is treated as missing, and reclaimed so that memory follows the
// keys in use, however fast new keys arrive:
//
//   - Each insert pays for reclaim. Before a shard takes a new entry, it examines entries from its
//     cursor, which walks the shard in turn, and removes those whose window has ended until it has
//     stepped past 2 live ones (or removed SweepBudget). A turn of the cursor that leaves N entries
//     so takes about N/2 inserts, and leaves only entries that were live when the turn began or
//     were inserted during it: each turn ends with at most twice (k/(k−1), for k = 2 live entries
//     per insert) the entries live when it began, whatever the rate of new keys. Under a steady
//     flood a shard holds about 1.5 times its live entries (BENCHMARKS.md).
//   - When nothing is inserted, the background sweeper examines every entry of every shard once per
//     SweepInterval (holding a shard's lock for at most SweepBudget entries at a time), so an idle
//     Store is back to its live entries within one SweepInterval after their windows end.
//   - A key's own expired entry is reused or removed when the key is next used.
//
// A shard that has shrunk to a quarter of its peak rebuilds its entries, index and key arena at
// their present size, so the memory returns to the runtime; the arena is also compacted whenever the
// bytes of removed keys are half of it.
//
// # The entry cap
//
// A Store holds about Options.MaxEntries entries at most, by default 1<<20 (1,048,576): for fixed
// windows or GCRA about 64 MiB with keys of 20 bytes, 75 MiB with keys of 30, 97 MiB with keys of 50,
// 592 MiB with keys of 512 bytes, the longest allowed. The cap is enforced per shard: each shard holds at most MaxEntries/shards
// entries, rounded up (so the Store exceeds MaxEntries only by that rounding), and a new key is
// refused when its own shard is full, which may be somewhat before the Store holds MaxEntries in
// all. There is no unlimited setting; set a larger MaxEntries.
//
// When a Take needs a new entry and the key's shard is full, the shard first reclaims expired
// entries (examining at most SweepBudget more). If it is still full, Take returns an error matching
// [ErrFull] and [admit.ErrUnavailable] at once: it never waits, and it never evicts a live entry,
// because forgetting a count would admit more than the limit. Keys that hold an entry keep being
// decided exactly as before, a peek (n = 0) of a missing key needs no entry and still answers, and
// new keys are admitted again as soon as entries expire.
package memstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
)

// Defaults for the zero fields of Options.
const (
	defaultShards        = 64
	maxShards            = admit.SlotCount
	defaultSweepInterval = time.Second
	defaultSweepBudget   = 256
	defaultMaxEntries    = 1 << 20
)

// liveExaminedPerInsert is k, the live entries an insert steps past to pay for reclaim. A shard then
// holds at most about k/(k−1) times its live entries; 2 means twice, for little work per insert.
const liveExaminedPerInsert = 2

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
			out.fill(&r.Limit, s.tab.baseNano, &d) // after the lock: see fastpath.go
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
// [admit.ErrInvalidRequest]; like the Redis store, memstore refuses keys of different Redis Cluster
// hash slots, so code tested on it never meets CROSSSLOT in a cluster. If ctx is already done,
// TakeAll decides nothing and returns an error that matches both [admit.ErrUnavailable] and
// ctx.Err(). Otherwise it never blocks on anything but one shard's lock: the keys of one slot live
// in one shard.
//
// If the admission needs new entries and the shard has no room for them (see Options.MaxEntries),
// TakeAll decides nothing and returns an error matching [ErrFull] and [admit.ErrUnavailable]; it
// never evicts a live entry.
//
// The state of a key does not depend on the Limit that wrote it: a later request under another Limit
// uses the stored count and window as they are, as Redis does. If the window left on a key is longer
// than its Limit's Period — the key was started under a longer Period —
// TakeAll returns an error matching [admit.ErrCorruptState] (and so ErrUnavailable) and changes
// nothing, exactly as the Redis store does; the key is usable again when its window ends. So is a
// key that holds live state of another algorithm; once that state has ended, the key is missing, as
// an expired Redis key is, and any algorithm starts it afresh.
func (s *Store) TakeAll(ctx context.Context, rs []admit.Request, ds []admit.Decision) (bool, error) {
	if err := admit.ValidateAll(rs, ds); err != nil {
		return false, fmt.Errorf("memstore: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("memstore: %w: %w", admit.ErrUnavailable, err)
	}
	var rec recordID // hashed before the lock: nothing under it waits for SHA-256
	if id := rs[0].ID; id != "" {
		rec = recordID{key: algo.RecordKey(rs[0].Key, id), fingerprint: algo.Fingerprint(rs)}
	}
	var tokens [admit.MaxRequests]uint64 // the lease each request acquires if admitted, or 0
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

// A table is the state of a Store: its shards and its clock.
type table struct {
	shards []shard
	mask   uint64
	clock  func() time.Time // nil for time.Now
	seed   uint64           // of the hash of every shard's index (keyHash), random
	base   time.Time        // the clock at New; times are kept as durations since base
	// baseNano is base in Unix nanoseconds, from which tokens are told in Unix time.
	baseNano int64
}

// newTable returns the empty table that opts describe, with their defaults applied.
func newTable(opts Options) *table {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	size := shardCount(opts.Shards)
	capacity := perShard(orDefault(opts.MaxEntries, defaultMaxEntries), size)
	budget := orDefault(opts.SweepBudget, defaultSweepBudget)
	tab := &table{
		shards: make([]shard, size),
		mask:   uint64(size - 1),
		clock:  opts.Now,
		base:   now(),
	}
	tab.baseNano = tab.base.UnixNano()
	tab.seed = rand.Uint64()
	for i := range tab.shards {
		tab.shards[i] = shard{seed: tab.seed, capacity: capacity, budget: budget}
	}
	return tab
}

// shardCount returns the number of shards for Options.Shards = n: n rounded up to a power of two,
// within 1 … maxShards, or defaultShards for n ≤ 0.
func shardCount(n int) int {
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
	return size
}

// perShard returns total/shards, rounded up.
func perShard(total, shards int) int {
	n := total / shards
	if total%shards != 0 {
		n++
	}
	return n
}

// orDefault returns n, or def if n ≤ 0.
func orDefault(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

// now returns the time since t.base. With time.Now it follows the monotonic clock, so a change of
// the wall clock moves no window; time.Since reads only that clock, about half the cost of
// time.Now, which reads the wall clock too.
func (t *table) now() time.Duration {
	if t.clock == nil {
		return time.Since(t.base)
	}
	return t.clock().Sub(t.base)
}

// instant returns the instant of a decision at mono since base. Its Unix time is the clock's at base
// plus mono, truncated to the microsecond.
func (t *table) instant(mono time.Duration) instant {
	unixNano := t.baseNano + int64(mono)
	unixMicro := unixNano / 1000
	if unixNano%1000 < 0 {
		unixMicro-- // floor, as time.Time.UnixMicro rounds, for a base before 1970
	}
	return instant{mono: mono, unixMicro: unixMicro, intoMicro: time.Duration(unixNano - unixMicro*1000), base: t.baseNano}
}

// at returns the time of a decision in sh whose caller read the clock at read, before taking
// sh.mu: read, or the latest time sh has decided at if that is later (another caller read the
// clock after this one but took the lock first). Either is a time between the caller's call and
// its taking the lock, so the times seen by one shard, and so by one key, never go backwards,
// as when the clock is read under the lock; but no caller waits for the clock while holding it.
// The caller holds sh.mu, for reading (the fast path: callers may then commit their decisions in
// an order other than their times', see fastpath.go) or writing.
func (sh *shard) at(read time.Duration) time.Duration {
	for {
		latest := sh.latest.Load()
		if int64(read) <= latest {
			return time.Duration(latest)
		}
		if sh.latest.CompareAndSwap(latest, int64(read)) {
			return read
		}
	}
}

// shard returns the shard of key: the one of its Redis Cluster hash slot, so that the keys of one
// TakeAll share a lock.
func (t *table) shard(key string) *shard {
	return &t.shards[uint64(admit.Slot(key))&t.mask]
}

// sweep examines every entry of every shard, removes those whose window has ended, and returns how
// many entries it examined and removed.
func (t *table) sweep() (examined, removed int) {
	for i := range t.shards {
		e, r := t.shards[i].sweep(t.now)
		examined += e
		removed += r
	}
	return examined, removed
}

// A record is what an admitted request with an ID leaves: its fingerprint and its Decisions.
type record struct {
	fingerprint string
	ds          []admit.Decision
}

// A shard is the part of a table that one mutex guards. Its entries are kept densely in a slice,
// indexed by a table of its own (storage.go), so that reclaim can visit them in turn.
type shard struct {
	// mu guards the shard's storage. Take's fast path holds it for reading, and changes only an
	// entry's count or deadline, atomically (fastpath.go); everything else holds it for writing.
	mu       sync.RWMutex
	latest   atomic.Int64 // the latest time, since table.base, at which the shard has decided (at)
	seed     uint64       // the Store's: the hash of the index
	entries  []entry      // dense, in no order
	slots    []uint32     // the index: entry position + 1 in the low bits, the hash's high bits above
	keys     []byte       // the arena of the entries' keys
	garbage  int          // the bytes of keys that no entry names
	exts     []*sliding   // the entries' further state, by entry.ext − 1; nil where free
	freeExts []uint32     // the free places of exts, plus one
	cursor   int          // the next position that reclaim on insert examines
	peak     int          // the most entries held since the shard's storage was last rebuilt
	capacity int          // the most entries the shard holds: its share of Options.MaxEntries
	budget   int          // Options.SweepBudget: the most entries examined at once to sweep or make room
	gcra     gcraCache    // the figures of the GCRA Limit the shard decided under last
	_        [64]byte
}

// A recordID names the idempotency record of a request with an ID: its key and the request's
// fingerprint. It is zero for a request without an ID.
type recordID struct {
	key, fingerprint string
}

// takeAll decides rs together at time now and makes the writes of an admission, with the record rec
// for a request with an ID; tokens names the lease each Request acquires if admitted, or is 0. The
// caller holds sh.mu.
func (sh *shard) takeAll(rs []admit.Request, ds []admit.Decision, tokens []uint64, rec recordID, now instant) (bool, error) {
	if rec.key != "" {
		if replayed, err := sh.replay(rec.key, rec.fingerprint, rs, ds, now.mono); replayed || err != nil {
			return replayed, err
		}
	}
	var few [4]pending // most requests have few policies: no allocation, little to zero
	ps := few[:0]
	if len(rs) <= len(few) {
		ps = few[:len(rs)]
	} else {
		ps = make([]pending, len(rs))
	}
	allowed, moved := true, false
	for k := range rs {
		r, p := &rs[k], &ps[k]
		p.kernel, p.hash = kernel(r.Limit.Algorithm), sh.hash(r.Key)
		p.figures(sh, &r.Limit)
		var e *entry
		var err error
		if p.index, e, err = sh.read(r.Key, p.hash, &r.Limit, p.kernel, &p.gcra, now, &moved); err != nil {
			return false, err
		}
		// Decide now, while e is where read found it: a later read may move entries.
		p.write, p.next = p.kernel.decide(e, sh.ext(e), &r.Limit, &p.gcra, r.Cost, now, &ds[k])
		allowed = allowed && (ds[k].Allowed || r.Limit.Shadow) // a shadow rejection rejects nothing
	}
	if !allowed {
		// A rejection writes nothing: a policy that would have admitted reports its key as it is.
		for k := range rs {
			if ds[k].Allowed {
				e := sh.live(rs[k].Key)
				ps[k].kernel.decide(e, sh.ext(e), &rs[k].Limit, &ps[k].gcra, 0, now, &ds[k])
			}
		}
		return false, nil
	}
	keep := rec.key != "" && algo.Recorded(rs)
	need := 0 // new entries: keys to create (read removed their ended entries) and the record
	if keep {
		need++
	}
	for k := range rs {
		if ps[k].write == writeCreate {
			need++
		}
	}
	if need > 0 {
		if err := sh.makeRoomFor(need, now.mono); err != nil {
			return false, err
		}
		moved = true // reclaim may have moved entries
	}
	for k := range rs {
		ds[k].Token = sh.apply(&rs[k], &ps[k], moved, now, tokens[k])
	}
	if keep {
		// replay removed an ended record of the same ID
		sh.insert(rec.key, sh.hash(rec.key), entry{deadline: now.mono + algo.RecordTTL(rs)},
			&sliding{rec: &record{fingerprint: rec.fingerprint, ds: append([]admit.Decision(nil), ds...)}})
	}
	return true, nil
}

// takeOne decides r at time now into d, and makes the write of an admission: takeAll of one
// Request without an ID that acquires no lease; h is r.Key's hash. On an error it leaves d zero. The
// caller holds sh.mu.
func (sh *shard) takeOne(r *admit.Request, h uint32, now instant, d *admit.Decision) error {
	p := pending{kernel: kernel(r.Limit.Algorithm), hash: h}
	p.figures(sh, &r.Limit)
	var e *entry
	var err error
	moved := false
	if p.index, e, err = sh.read(r.Key, h, &r.Limit, p.kernel, &p.gcra, now, &moved); err != nil {
		return err
	}
	p.write, p.next = p.kernel.decide(e, sh.ext(e), &r.Limit, &p.gcra, r.Cost, now, d)
	if !d.Allowed && !r.Limit.Shadow {
		return nil // a rejection writes nothing; a shadow rejection rejects nothing
	}
	if p.write == writeCreate {
		if err := sh.makeRoomFor(1, now.mono); err != nil {
			*d = admit.Decision{}
			return err
		}
		moved = true // reclaim may have moved entries
	}
	d.Token = sh.apply(r, &p, moved, now, 0)
	return nil
}

// settle settles res at actual at time now, and makes its one write. The caller holds sh.mu.
func (sh *shard) settle(res *admit.Reservation, actual int64, now instant) (admit.Decision, error) {
	r := &res.Request
	p := pending{kernel: kernel(r.Limit.Algorithm)}
	p.figures(sh, &r.Limit)
	k := p.kernel
	var moved bool // read removes only an ended entry, and then returns none: i stays valid
	h := sh.hash(r.Key)
	i, e, err := sh.read(r.Key, h, &r.Limit, k, &p.gcra, now, &moved)
	if err != nil {
		return admit.Decision{}, err
	}
	delta := actual - r.Cost
	d, w := k.settle(e, sh.ext(e), &r.Limit, res.Token, delta, now)
	switch w {
	case writeCreate:
		if err := sh.makeRoomFor(1, now.mono); err != nil {
			return admit.Decision{}, err
		}
		ne := entry{alg: r.Limit.Algorithm}
		var x *sliding
		k.settleApply(&ne, &x, writeCreate, &r.Limit, res.Token, delta, now)
		sh.insert(r.Key, h, ne, x)
	case writeUpdate:
		var spare *sliding
		e := &sh.entries[i]
		k.settleApply(e, sh.extSlot(e, &spare), writeUpdate, &r.Limit, res.Token, delta, now)
	case writeDelete:
		sh.remove(i)
	}
	return d, nil
}

// A pending is what takeAll knows of one Request between deciding and writing.
type pending struct {
	kernel kernel          // the Request's algorithm's
	hash   uint32          // the Request's key's (shard.hash)
	index  int             // the key's entry, when it has a live one
	write  write           // the write an admission makes
	next   int64           // the state the write stores, when decide computed it (see kernel.decide)
	gcra   algo.GCRAParams // the figures of the Request's Limit, when it is a GCRA Limit
}

// figures sets p.gcra to the figures of lim, when p's kernel is GCRA's. The caller holds sh.mu.
func (p *pending) figures(sh *shard, lim *admit.Limit) {
	if p.kernel == kernel(admit.GCRA) {
		p.gcra = *sh.gcraParams(lim)
	}
}

// live returns the entry of key, which takeAll read live, or nil if it has none. The caller holds
// sh.mu.
func (sh *shard) live(key string) *entry {
	if i, ok := sh.find(key, sh.hash(key)); ok {
		return &sh.entries[i]
	}
	return nil
}

// replay answers rs from the live record at recordKey, if there is one: its Decisions, marked
// replayed, when its fingerprint is rs's, or an invalid-request error when the ID was used for
// another request. It reports whether it answered. The caller holds sh.mu.
func (sh *shard) replay(recordKey, fingerprint string, rs []admit.Request, ds []admit.Decision, now time.Duration) (bool, error) {
	i, ok := sh.find(recordKey, sh.hash(recordKey))
	if !ok {
		return false, nil
	}
	if sh.entries[i].deadline <= now {
		sh.remove(i) // the record has ended
		return false, nil
	}
	e := &sh.entries[i]
	if e.alg != 0 {
		return false, fmt.Errorf("memstore: %w: request record %q holds a counter", admit.ErrCorruptState, recordKey)
	}
	rec := sh.ext(e).rec
	switch {
	case rec.fingerprint != fingerprint:
		return false, fmt.Errorf("memstore: %w: request ID reused for a different request", admit.ErrInvalidRequest)
	}
	for k := range ds {
		ds[k] = rec.ds[k]
		ds[k].Replayed = true
		if rs[k].Limit.Algorithm != admit.Concurrency {
			ds[k].Token = 0 // a replay holds nothing to settle; a lease's token is the one the ID names
		}
	}
	return true, nil
}

// read returns the entry of key, whose hash is h, and its index, if it is live for k at now; nil when the key is
// missing or its state has ended — an ended entry is removed, and *moved set, since removing moves another entry — or an
// error when the state cannot be lim's. g are lim's figures when it is a GCRA Limit. The entry stays
// where it is until the next removal. The caller holds sh.mu.
func (sh *shard) read(key string, h uint32, lim *admit.Limit, k kernel, g *algo.GCRAParams, now instant, moved *bool) (int, *entry, error) {
	i, found := sh.find(key, h)
	if !found {
		return 0, nil, nil
	}
	e := &sh.entries[i]
	switch {
	case e.alg == 0: // a record
		if e.deadline > now.mono {
			return 0, nil, fmt.Errorf("memstore: %v: %w: key %q holds a request record", lim.Algorithm, admit.ErrCorruptState, key)
		}
	case e.alg != lim.Algorithm:
		// Every kernel's state is live until its deadline (kernel.live); ended state of another
		// algorithm is a missing key, as an expired Redis key is, not corrupt state.
		if e.deadline > now.mono {
			return 0, nil, fmt.Errorf("memstore: %v: %w: key %q holds %v state", lim.Algorithm, admit.ErrCorruptState, key, e.alg)
		}
	case k.live(e, now):
		if err := k.check(e, sh.ext(e), lim, g, now); err != nil {
			return 0, nil, fmt.Errorf("memstore: %v: %w: %w", lim.Algorithm, admit.ErrCorruptState, err)
		}
		return i, e, nil
	}
	sh.remove(i) // ended, at its last instant as in Redis: the key is missing
	*moved = true
	return 0, nil, nil
}

// makeRoomFor makes room for need new entries, paying reclaim for each, or reports ErrFull having
// written nothing. The caller holds sh.mu.
func (sh *shard) makeRoomFor(need int, now time.Duration) error {
	for range need {
		if !sh.makeRoom(now) {
			return fmt.Errorf("%w: the shard of a new key holds %d entries, its share of MaxEntries", ErrFull, len(sh.entries))
		}
	}
	if len(sh.entries)+need > sh.capacity {
		return fmt.Errorf("%w: the shard of a new key holds %d entries, its share of MaxEntries", ErrFull, len(sh.entries))
	}
	if !sh.arenaRoom(need) {
		return fmt.Errorf("%w: the shard of a new key holds %d bytes of keys, the most it can", ErrFull, len(sh.keys)-sh.garbage)
	}
	return nil
}

// apply makes the write p decided for r: on a new entry, or on the key's, at p.index unless entries
// have moved since read; lease names the lease it acquires, if any (a concurrency policy's). It
// returns the token of the units written (admit.Decision.Token), 0 for none. The caller holds sh.mu,
// and made room for a new entry.
func (sh *shard) apply(r *admit.Request, p *pending, moved bool, now instant, lease uint64) uint64 {
	switch p.write {
	case writeCreate:
		e := entry{alg: r.Limit.Algorithm}
		var x *sliding
		p.kernel.apply(&e, &x, writeCreate, &r.Limit, r.Cost, now, lease, p.next)
		sh.insert(r.Key, p.hash, e, x)
		return p.kernel.token(&e, x, now, lease)
	case writeUpdate:
		i := p.index
		if moved {
			i, _ = sh.find(r.Key, p.hash)
		}
		e := &sh.entries[i]
		var spare *sliding
		p.kernel.apply(e, sh.extSlot(e, &spare), writeUpdate, &r.Limit, r.Cost, now, lease, p.next)
		return p.kernel.token(e, sh.ext(e), now, lease)
	}
	return 0
}

// makeRoom pays for one new entry: it reclaims from the cursor until it has stepped past
// liveExaminedPerInsert live entries, and, if the shard is still full, examines up to sh.budget more.
// It reports whether the shard has room for the entry. It never removes a live entry. The caller
// holds sh.mu.
func (sh *shard) makeRoom(now time.Duration) bool {
	sh.reclaim(now, liveExaminedPerInsert, sh.budget)
	if len(sh.entries) < sh.capacity {
		return true
	}
	sh.reclaim(now, sh.budget, sh.budget)
	return len(sh.entries) < sh.capacity
}

// reclaim walks the entries from the cursor on, wrapping around, and removes those whose window has
// ended at now, until it has stepped past maxLive live entries (at most as many as the shard holds)
// or removed maxExpired. Then it rebuilds the shard if it has shrunk. It returns how many entries it
// examined and removed. The caller holds sh.mu.
func (sh *shard) reclaim(now time.Duration, maxLive, maxExpired int) (examined, removed int) {
	maxLive = min(maxLive, len(sh.entries))
	for live := 0; live < maxLive && removed < maxExpired && len(sh.entries) > 0; examined++ {
		if sh.cursor >= len(sh.entries) {
			sh.cursor = 0
		}
		if sh.entries[sh.cursor].deadline <= now {
			sh.remove(sh.cursor) // the last entry moves here, and is examined next
			removed++
		} else {
			sh.cursor++
			live++
		}
	}
	sh.shrinkIfSparse()
	return examined, removed
}

// sweep examines every entry the shard holds when it starts, removes those whose window has ended at
// now(), and then rebuilds the shard if it has shrunk. It takes sh.mu for at most sh.budget entries
// at a time, so a Take waits for one such step at most. Entries inserted during the sweep, and any
// an insert moves between two steps, wait for the next one. It returns how many entries it examined
// and removed.
func (sh *shard) sweep(now func() time.Duration) (examined, removed int) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	end := len(sh.entries)
	for pos := 0; ; {
		var e, r int
		pos, e, r = sh.sweepFrom(pos, end, sh.at(now()), sh.budget)
		examined, removed = examined+e, removed+r
		if pos >= min(end, len(sh.entries)) {
			sh.shrinkIfSparse()
			return examined, removed
		}
		sh.mu.Unlock()
		runtime.Gosched() // let the Takes waiting for the lock have it
		sh.mu.Lock()
	}
}

// sweepFrom examines up to budget entries from position pos on, up to position end, and removes
// those whose window has ended at now. It returns the position to go on from and how many entries
// it examined and removed. The caller holds sh.mu.
func (sh *shard) sweepFrom(pos, end int, now time.Duration, budget int) (next, examined, removed int) {
	for ; examined < budget && pos < min(end, len(sh.entries)); examined++ {
		if sh.entries[pos].deadline <= now {
			sh.remove(pos) // another entry moves here (the last, or one behind the cursor), examined next
			removed++
		} else {
			pos++
		}
	}
	return pos, examined, removed
}

// Below this many entries a shard's storage is never rebuilt.
const minRebuild = 1024

// shrinkIfSparse rebuilds the shard's storage once it holds a quarter of its peak or less: Go maps
// never shrink by themselves. The caller holds sh.mu.
func (sh *shard) shrinkIfSparse() {
	if sh.peak >= minRebuild && len(sh.entries) <= sh.peak/4 {
		sh.rebuild()
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
