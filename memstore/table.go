package memstore

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
	"github.com/admit-dev/admit/internal/slot"
)

// A table is the state of a Store: its shards and its clock.
type table struct {
	shards []shard
	mask   uint64
	clock  func() time.Time // nil for time.Now
	seed   uint64           // of the hash of every shard's index (keyHash), random
	base   time.Time        // the clock at New; times are kept as durations since base
	// baseNano is base in Unix nanoseconds, from which tokens are told in Unix time.
	baseNano int64
	// overrides lists the keys of the Overrides the shards hold, by policy (override.go).
	overrides overrideIndex
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
	return &t.shards[uint64(slot.Of(key))&t.mask]
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
	// overrides are the Overrides whose keys are in the shard's slots, by key (override.go); nil
	// until the first.
	overrides map[string]*storedOverride
	_         [64]byte
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
		var err error
		if p.overridden, err = sh.limitOf(r, now.mono, &p.over); err != nil {
			return false, err
		}
		lim := p.limit(r)
		p.kernel, p.hash = kernel(r.Limit.Algorithm), sh.hash(r.Key)
		p.figures(sh, lim)
		var e *entry
		if p.index, e, err = sh.read(r.Key, p.hash, lim, p.kernel, &p.gcra, now, r.OverrideKey != "", &moved); err != nil {
			return false, err
		}
		// Decide now, while e is where read found it: a later read may move entries.
		p.write, p.next = p.kernel.decide(e, sh.ext(e), lim, &p.gcra, r.Cost, now, &ds[k])
		ds[k].Overridden = p.overridden
		allowed = allowed && (ds[k].Allowed || r.Limit.Shadow) // a shadow rejection rejects nothing
	}
	if !allowed {
		// A rejection writes nothing: a policy that would have admitted reports its key as it is.
		for k := range rs {
			if ds[k].Allowed {
				e := sh.live(rs[k].Key)
				ps[k].kernel.decide(e, sh.ext(e), ps[k].limit(&rs[k]), &ps[k].gcra, 0, now, &ds[k])
				ds[k].Overridden = ps[k].overridden
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
	var err error
	if p.overridden, err = sh.limitOf(r, now.mono, &p.over); err != nil {
		return err
	}
	lim := p.limit(r)
	p.figures(sh, lim)
	var e *entry
	moved := false
	if p.index, e, err = sh.read(r.Key, h, lim, p.kernel, &p.gcra, now, r.OverrideKey != "", &moved); err != nil {
		return err
	}
	p.write, p.next = p.kernel.decide(e, sh.ext(e), lim, &p.gcra, r.Cost, now, d)
	d.Overridden = p.overridden
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
	i, e, err := sh.read(r.Key, h, &r.Limit, k, &p.gcra, now, false, &moved) // a settlement ignores overrides
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
	gcra   algo.GCRAParams // the figures of lim, when it is a GCRA Limit
	// overridden reports that over, the Request's Limit with its Override's numbers, decides
	// (limit).
	overridden bool
	over       admit.Limit
}

// limit returns the Limit that decides p's Request r: over when overridden, else r's.
func (p *pending) limit(r *admit.Request) *admit.Limit {
	if p.overridden {
		return &p.over
	}
	return &r.Limit
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
// error when the state cannot be lim's. g are lim's figures when it is a GCRA Limit. clamp is true
// for a Request with an OverrideKey, whose numbers may have changed since the state was written: a
// GCRA TAT too far ahead for lim is then clamped (algo.GCRAParams.Clamp), not corrupt. The entry
// stays where it is until the next removal. The caller holds sh.mu.
func (sh *shard) read(key string, h uint32, lim *admit.Limit, k kernel, g *algo.GCRAParams, now instant, clamp bool, moved *bool) (int, *entry, error) {
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
		if err := k.check(e, sh.ext(e), lim, g, now, clamp); err != nil {
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
		p.kernel.apply(&e, &x, writeCreate, p.limit(r), r.Cost, now, lease, p.next)
		sh.insert(r.Key, p.hash, e, x)
		return p.kernel.token(&e, x, now, lease)
	case writeUpdate:
		i := p.index
		if moved {
			i, _ = sh.find(r.Key, p.hash)
		}
		e := &sh.entries[i]
		var spare *sliding
		p.kernel.apply(e, sh.extSlot(e, &spare), writeUpdate, p.limit(r), r.Cost, now, lease, p.next)
		return p.kernel.token(e, sh.ext(e), now, lease)
	}
	return 0
}
