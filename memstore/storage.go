package memstore

import (
	"math"
	"math/bits"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
)

// A shard keeps its entries in a table of its own, not a Go map, so that an idle key costs little
// more than its bytes and its state (BENCHMARKS.md, "memory per idle key"):
//
//   - entries is dense: the entries in no particular order, each of 32 bytes and free of pointers
//     (the garbage collector does not scan it), holding a key's count and deadline inline. Reclaim's
//     cursor walks it by position; removing an entry moves the last one into its place.
//   - keys is an arena of the keys' bytes, one after another, which an entry names by offset and
//     length: no string header and no allocation per key. A removed key's bytes stay until the arena
//     is compacted, which happens once they are half of it.
//   - slots is the index, open addressing with linear probing over a power-of-two array of uint32,
//     at most three quarters full: a slot holds the position of an entry plus one (0 for an empty
//     slot) in its low bits and the high bits of the key's hash in the others, so that most probes
//     that miss are told apart without loading an entry. Removal shifts the following slots back
//     (no tombstones).
//   - exts holds the state of the entries that need more than a count and a deadline (a sliding
//     window's, a sliding log's, a concurrency key's, an idempotency record's), which an entry names
//     by index plus one; a fixed window or GCRA entry names none.

// An entry is the state of one key under one algorithm, kept by the algorithm's kernel, or, for the
// key of an idempotency record, the record (in its ext).
type entry struct {
	count    int64         // the units a kernel counts
	deadline time.Duration // since table.base: from then on the entry is not live, and reclaimed
	keyOff   uint32        // the key's bytes: keys[keyOff : keyOff+keyLen]
	hash     uint32        // the key's hash (shard.hash)
	ext      uint32        // 1 + the index in exts of the entry's further state; 0 for none
	keyLen   uint16
	alg      admit.Algorithm // the algorithm whose kernel keeps it; 0 for a record
}

// Bounds of a shard's table.
const (
	minSlots = 8 // the fewest slots of an index
	// minCompact is the fewest bytes of removed keys that make the arena worth compacting.
	minCompact = 4096
	// recordKeyOverhead is how much longer than the longest key a record's key is (algo.RecordKey).
	recordKeyOverhead = len("rl:id:{}:") + bound.DigestLen
)

// maxArena is the most bytes of keys a shard holds: offsets are 32 bits. A shard that would exceed
// it is full (ErrFull). A variable only so that a test can make it small.
var maxArena int64 = math.MaxUint32

// hash returns the hash of key in the shard's table.
func (sh *shard) hash(key string) uint32 { return keyHash(sh.seed, key) }

// keyHash returns the hash of key in the tables of a Store whose seed is seed (random per Store).
// Take computes it before taking the shard's lock. It is wyhash's mixing, 16 bytes a step, the last
// 16 bytes of a key read whole (overlapping the step before): a few tens of
// instructions for a key of 30 bytes, half of what hash/maphash takes through its wrappers, and seeded
// per Store, so that which keys collide cannot be learnt from another process.
//
// Both factors of every product are seeded: a factor that is zero zeroes the product and drops all
// that came before it, so a key whose 8 bytes equal a public constant (wyhash's k1, with which the
// first factor was once made) collided with every key of its length under any seed, a family of
// collisions an attacker who chooses key bytes could fill one home slot with
// (TestKeyHashHasNoSeedFreeCollisions).
func keyHash(seed uint64, key string) uint32 {
	const (
		k0 = 0xa0761d6478bd642f
		k1 = 0xe7037ed1a0b428db
		k2 = 0x8ebc6af09c88c6e3
	)
	n := len(key)
	h := seed ^ uint64(n)*k0
	s1 := seed ^ k1 // the first factor's key: secret, so no chosen bytes zero it
	var a, b uint64
	switch {
	case n > 16:
		for rest := key; len(rest) > 16; rest = rest[16:] {
			h = mix(load64(rest)^s1, load64(rest[8:])^h)
		}
		a, b = load64(key[n-16:]), load64(key[n-8:]) // the last 16 bytes
	case n >= 8:
		a, b = load64(key), load64(key[n-8:])
	case n >= 4:
		a, b = uint64(load32(key)), uint64(load32(key[n-4:]))
	case n > 0:
		a, b = uint64(key[0])<<16|uint64(key[n>>1])<<8|uint64(key[n-1]), 0
	}
	h = mix(a^s1, b^h)
	return uint32(mix(h^k2, uint64(n)^k1))
}

// mix returns the xor of the halves of the 128-bit product of a and b.
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// load64 returns the first 8 bytes of s, little-endian (one load: the compiler combines the bytes).
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// load32 returns the first 4 bytes of s, little-endian.
func load32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// keyOf returns the key of e, in the arena: valid until the arena changes.
func (sh *shard) keyOf(e *entry) []byte {
	return sh.keys[e.keyOff : e.keyOff+uint32(e.keyLen)]
}

// find returns the position of key's entry, and whether it has one; h is key's hash. The caller
// holds sh.mu.
func (sh *shard) find(key string, h uint32) (int, bool) {
	if len(sh.entries) == 0 {
		return 0, false
	}
	slots := sh.slots
	mask := uint32(len(slots) - 1) // also the mask of a slot's position: len(slots) is a power of two
	tag := h &^ mask
	for i := h; ; i++ {
		s := slots[i&mask]
		if s == 0 {
			return 0, false
		}
		if s&^mask == tag {
			pos := int(s&mask) - 1
			e := &sh.entries[pos]
			if int(e.keyLen) == len(key) && string(sh.keyOf(e)) == key {
				return pos, true
			}
		}
	}
}

// ext returns e's further state, or nil for none (or no entry). The caller holds sh.mu.
func (sh *shard) ext(e *entry) *sliding {
	if e == nil || e.ext == 0 {
		return nil
	}
	return sh.exts[e.ext-1]
}

// extSlot returns where e's further state is kept, for a kernel to change it, or spare if e has none.
// The caller holds sh.mu.
func (sh *shard) extSlot(e *entry, spare **sliding) **sliding {
	if e.ext == 0 {
		return spare
	}
	return &sh.exts[e.ext-1]
}

// insert adds the entry e of key, whose hash is h, with further state x (nil for none); key has no
// entry yet. The caller holds sh.mu, and made room for it (makeRoomFor).
func (sh *shard) insert(key string, h uint32, e entry, x *sliding) {
	e.keyOff, e.keyLen = uint32(len(sh.keys)), uint16(len(key))
	sh.keys = append(grown(sh.keys, len(key)), key...)
	e.hash = h
	e.ext = 0
	if x != nil {
		if n := len(sh.freeExts); n > 0 {
			e.ext = sh.freeExts[n-1]
			sh.freeExts = sh.freeExts[:n-1]
			sh.exts[e.ext-1] = x
		} else {
			sh.exts = append(sh.exts, x)
			e.ext = uint32(len(sh.exts))
		}
	}
	if (len(sh.entries)+1)*4 > len(sh.slots)*3 {
		sh.reindex(len(sh.slots) * 2)
	}
	sh.entries = append(grown(sh.entries, 1), e)
	sh.place(len(sh.entries) - 1)
	sh.peak = max(sh.peak, len(sh.entries))
}

// grown returns s with room for n more elements: s itself if it has it, else a copy with an eighth
// more room than it needs (append's quarter would leave an idle key's storage an eighth larger on
// average, for half as many copies).
func grown[T any](s []T, n int) []T {
	if cap(s)-len(s) >= n {
		return s
	}
	need := len(s) + n
	c := make([]T, len(s), need+max(need/8, 16))
	copy(c, s)
	return c
}

// place puts the entry at pos into the index, at the first empty slot from its hash's.
func (sh *shard) place(pos int) {
	h := sh.entries[pos].hash
	mask := uint32(len(sh.slots) - 1)
	i := h & mask
	for sh.slots[i] != 0 {
		i = (i + 1) & mask
	}
	sh.slots[i] = h&^mask | uint32(pos+1)
}

// slotOf returns the index slot that holds position pos.
func (sh *shard) slotOf(pos int) uint32 {
	mask := uint32(len(sh.slots) - 1)
	for i := sh.entries[pos].hash & mask; ; i = (i + 1) & mask {
		if int(sh.slots[i]&mask) == pos+1 {
			return i
		}
	}
}

// remove deletes the entry at position i, moving the last entry into its place. A place behind
// reclaim's cursor is filled instead with the entry just behind it, and the last entry, which the
// cursor has yet to examine, moves to the cursor, which steps back onto it: a removal never moves an
// entry the cursor's turn has not examined behind it, where the turn would skip it. The caller holds
// sh.mu.
func (sh *shard) remove(i int) {
	e := &sh.entries[i]
	sh.unindex(sh.slotOf(i))
	if e.ext != 0 {
		sh.exts[e.ext-1] = nil
		sh.freeExts = append(sh.freeExts, e.ext)
	}
	sh.garbage += int(e.keyLen)
	last := len(sh.entries) - 1
	if i < sh.cursor && sh.cursor <= last+1 {
		c := sh.cursor - 1 // examined in this turn, as everything behind the cursor
		if c != i {
			sh.move(c, i)
			i = c
		}
		sh.cursor = c
	}
	if i != last {
		sh.move(last, i)
	}
	sh.entries = sh.entries[:last]
	switch {
	case last == 0:
		sh.keys, sh.garbage = sh.keys[:0], 0
	case sh.garbage >= minCompact && sh.garbage*2 >= len(sh.keys):
		sh.compactKeys(len(sh.keys) - sh.garbage)
	}
}

// move moves the entry at position from to position to, whose entry has been unindexed.
func (sh *shard) move(from, to int) {
	s := sh.slotOf(from)
	sh.slots[s] = sh.slots[s]&^uint32(len(sh.slots)-1) | uint32(to+1)
	sh.entries[to] = sh.entries[from]
}

// unindex empties slot i, shifting back the slots after it that belong before it (linear probing's
// deletion without tombstones).
func (sh *shard) unindex(i uint32) {
	mask := uint32(len(sh.slots) - 1)
	for j := (i + 1) & mask; sh.slots[j] != 0; j = (j + 1) & mask {
		home := sh.entries[int(sh.slots[j]&mask)-1].hash & mask
		// The slot at j may move to i if its home is not cyclically in (i, j].
		if (j-home)&mask >= (j-i)&mask {
			sh.slots[i] = sh.slots[j]
			i = j
		}
	}
	sh.slots[i] = 0
}

// reindex rebuilds the index with size slots (a power of two, at least minSlots).
func (sh *shard) reindex(size int) {
	size = max(size, minSlots)
	sh.slots = make([]uint32, size)
	for pos := range sh.entries {
		sh.place(pos)
	}
}

// slotsFor returns the size of an index for n entries: a power of two at most three quarters full.
func slotsFor(n int) int {
	size := minSlots
	for size*3 < n*4 {
		size *= 2
	}
	return size
}

// compactKeys copies the keys of the entries into a new arena of capacity size (at least their
// bytes), dropping the bytes of removed keys.
func (sh *shard) compactKeys(size int) {
	keys := make([]byte, 0, size)
	for i := range sh.entries {
		e := &sh.entries[i]
		off := uint32(len(keys))
		keys = append(keys, sh.keyOf(e)...)
		e.keyOff = off
	}
	sh.keys, sh.garbage = keys, 0
}

// rebuild copies the shard's storage into storage of its present size: Go's slices do not shrink.
func (sh *shard) rebuild() {
	entries := make([]entry, len(sh.entries))
	copy(entries, sh.entries)
	sh.entries = entries
	live := 0
	for i := range sh.entries {
		live += int(sh.entries[i].keyLen)
	}
	sh.compactKeys(live)
	var exts []*sliding
	for i := range sh.entries {
		if e := &sh.entries[i]; e.ext != 0 {
			exts = append(exts, sh.exts[e.ext-1])
			e.ext = uint32(len(exts))
		}
	}
	sh.exts, sh.freeExts = exts, nil
	sh.reindex(slotsFor(len(sh.entries)))
	sh.peak = len(sh.entries)
	if sh.cursor > len(sh.entries) {
		sh.cursor = 0
	}
}

// arenaRoom reports whether the arena can take need more keys of the longest length.
func (sh *shard) arenaRoom(need int) bool {
	most := int64(need) * int64(bound.MaxKeyLen+recordKeyOverhead)
	if int64(len(sh.keys)-sh.garbage)+most > maxArena {
		return false
	}
	if int64(len(sh.keys))+most > maxArena {
		sh.compactKeys(len(sh.keys) - sh.garbage)
	}
	return true
}
