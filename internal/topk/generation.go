package topk

import (
	"encoding/hex"
	"math/bits"
)

// A generation is one space-saving summary of at most size entries, in arrays allocated once: an
// open-addressing table from digest to entry (linear probing, backward-shift deletion) and a
// min-heap of the entries by count, whose root is the entry a new digest replaces when full.
type generation struct {
	entries []entry // the first n are held
	heap    []int32 // indexes of the held entries, a min-heap by count
	table   []int32 // per slot, 1 + the index of the entry there, or 0 for none
	shift   uint    // 64 - log2(len(table)): a digest's home slot is the top bits of its hash
	keys    []byte  // MaxKeyLen bytes per entry when subjects are revealed, else nil
	evicted bool    // an entry was replaced: counts are no longer exact
}

// An entry is one digest counted by a generation.
type entry struct {
	digest      [DigestLen / 2]byte
	count, err  uint64 // rejections counted, and the most of them that may belong to others
	first, last int64  // Unix nanoseconds of the first and last rejection counted
	pos, slot   int32  // in the heap and in the table
	keyLen      uint16 // bytes of the subject kept in keys
	truncated   bool   // the subject was longer than MaxKeyLen
}

// newGeneration returns an empty generation of size entries, keeping subjects if reveal.
func newGeneration(size int, reveal bool) *generation {
	slots := 1 << bits.Len(uint(2*size-1)) // a power of two, at least twice size: short probes
	g := &generation{
		entries: make([]entry, size),
		heap:    make([]int32, 0, size),
		table:   make([]int32, slots),
		shift:   uint(64 - bits.TrailingZeros(uint(slots))),
	}
	if reveal {
		g.keys = make([]byte, size*MaxKeyLen)
	}
	return g
}

// home returns the slot where a probe for d starts: Fibonacci hashing of its first 8 bytes.
func (g *generation) home(d *[DigestLen / 2]byte) int32 {
	var h uint64
	for _, b := range d[:8] {
		h = h<<8 | uint64(b)
	}
	return int32((h * 0x9E3779B97F4A7C15) >> g.shift)
}

// find returns the slot of d in the table, and whether d is there (else the empty slot where it
// would go).
func (g *generation) find(d *[DigestLen / 2]byte) (int32, bool) {
	mask := int32(len(g.table) - 1)
	for i := g.home(d); ; i = (i + 1) & mask {
		e := g.table[i]
		if e == 0 {
			return i, false
		}
		if g.entries[e-1].digest == *d {
			return i, true
		}
	}
}

// add counts one rejection of d, of subject (kept only when g keeps subjects), at now.
func (g *generation) add(d *[DigestLen / 2]byte, subject string, now int64) {
	slot, found := g.find(d)
	if found {
		e := &g.entries[g.table[slot]-1]
		e.count++
		e.last = now
		g.down(int(e.pos))
		return
	}
	var idx int32
	var e *entry
	if n := len(g.heap); n < len(g.entries) {
		idx = int32(n)
		e = &g.entries[idx]
		*e = entry{pos: int32(n)}
		g.heap = append(g.heap, idx) // within its capacity: no allocation
	} else {
		idx = g.heap[0] // the least counted: space-saving replaces it
		e = &g.entries[idx]
		g.remove(e.slot)
		slot, _ = g.find(d)
		e.err = e.count // the new digest may have had at most that many before
		g.evicted = true
	}
	e.digest = *d
	e.count = e.err + 1
	e.first, e.last = now, now
	e.slot = slot
	g.table[slot] = idx + 1
	if g.keys != nil {
		n := copy(g.keys[int(idx)*MaxKeyLen:(int(idx)+1)*MaxKeyLen], subject)
		e.keyLen, e.truncated = uint16(n), n < len(subject)
	}
	g.up(int(e.pos)) // a new entry's count of 1 may be below its parent's
	g.down(int(e.pos))
}

// remove empties slot i of the table, moving back the entries after it that would no longer be
// found (backward-shift deletion), so that no probe stops early.
func (g *generation) remove(i int32) {
	mask := int32(len(g.table) - 1)
	g.table[i] = 0
	for j := (i + 1) & mask; g.table[j] != 0; j = (j + 1) & mask {
		e := &g.entries[g.table[j]-1]
		h := g.home(&e.digest)
		// The entry at j stays unless its home is cyclically outside (i, j]: then it moves to i.
		if i <= j && (h <= i || h > j) || i > j && h <= i && h > j {
			g.table[i] = g.table[j]
			e.slot = i
			g.table[j] = 0
			i = j
		}
	}
}

// down restores the heap below position p, whose entry's count only grew.
func (g *generation) down(p int) {
	h := g.heap
	for {
		c := 2*p + 1
		if c >= len(h) {
			break
		}
		if c+1 < len(h) && g.entries[h[c+1]].count < g.entries[h[c]].count {
			c++
		}
		if g.entries[h[p]].count <= g.entries[h[c]].count {
			break
		}
		h[p], h[c] = h[c], h[p]
		g.entries[h[p]].pos, g.entries[h[c]].pos = int32(p), int32(c)
		p = c
	}
}

// up restores the heap above position p, whose entry's count may be below its parent's.
func (g *generation) up(p int) {
	h := g.heap
	for p > 0 {
		parent := (p - 1) / 2
		if g.entries[h[parent]].count <= g.entries[h[p]].count {
			break
		}
		h[p], h[parent] = h[parent], h[p]
		g.entries[h[p]].pos, g.entries[h[parent]].pos = int32(p), int32(parent)
		p = parent
	}
}

// min returns the least count of g's entries once one was replaced, else 0: the most that any
// digest's count in g may be off by.
func (g *generation) min() uint64 {
	if !g.evicted {
		return 0
	}
	return g.entries[g.heap[0]].count
}

// reset empties g, keeping its arrays.
func (g *generation) reset() {
	for _, idx := range g.heap {
		g.table[g.entries[idx].slot] = 0
	}
	g.heap = g.heap[:0]
	g.evicted = false
}

// key returns the subject kept for the entry at idx, "" when none is.
func (g *generation) key(idx int32) string {
	if g.keys == nil {
		return ""
	}
	start := int(idx) * MaxKeyLen
	return string(g.keys[start : start+int(g.entries[idx].keyLen)])
}

// parseDigest decodes the DigestLen hex characters of s into d, and reports whether it could.
func parseDigest(s string, d *[DigestLen / 2]byte) bool {
	if len(s) != DigestLen {
		return false
	}
	for i := range d {
		hi, ok1 := nibble(s[2*i])
		lo, ok2 := nibble(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		d[i] = hi<<4 | lo
	}
	return true
}

// nibble returns the value of the lower-case hex digit c.
func nibble(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// digestString returns d in hex, as keys hold it.
func digestString(d *[DigestLen / 2]byte) string { return hex.EncodeToString(d[:]) }
