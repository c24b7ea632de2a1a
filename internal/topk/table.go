package topk

import (
	"encoding/hex"
	"math/bits"
)

// Slices is the number of slices a Sketch's period is cut into: a rejection counts in its slice
// and the Slices after it, so for at least a period and at most a tenth of one more.
const Slices = 10

// ring is the number of slices an entry keeps: the current one and the Slices before it.
const ring = Slices + 1

// A table is one space-saving summary of at most size entries, in arrays allocated once: an
// open-addressing table from digest to entry (linear probing, backward-shift deletion), a min-heap
// of the held entries by their count over the live slices, whose root is the entry a new digest
// replaces when full, and the free entries.
type table struct {
	entries []entry
	heap    []int32 // indexes of the held entries, a min-heap by total
	free    []int32 // indexes of the entries not held
	slots   []int32 // per slot, 1 + the index of the entry there, or 0 for none
	shift   uint    // 64 - log2(len(slots)): a digest's home slot is the top bits of its hash
	keys    []byte  // MaxKeyLen bytes per entry when subjects are revealed, else nil
	// replaced holds, per live slice, the largest count of an entry replaced in it.
	replaced [ring]uint64
}

// An entry is one digest counted by a table.
type entry struct {
	digest      [DigestLen / 2]byte
	counts      [ring]uint64 // rejections counted per live slice, by slice number mod ring
	total       uint64       // the sum of counts
	err         uint64       // what the entry started with: the most of total others' may be
	born        int64        // the slice in which the entry was made
	first, last int64        // Unix nanoseconds of the first and last rejection counted
	pos, slot   int32        // in the heap and in the slots
	keyLen      uint16       // bytes of the subject kept in keys
	truncated   bool         // the subject was longer than MaxKeyLen
}

// newTable returns an empty table of size entries, keeping subjects if reveal.
func newTable(size int, reveal bool) *table {
	n := 1 << bits.Len(uint(2*size-1)) // a power of two, at least twice size: short probes
	t := &table{
		entries: make([]entry, size),
		heap:    make([]int32, 0, size),
		free:    make([]int32, size),
		slots:   make([]int32, n),
		shift:   uint(64 - bits.TrailingZeros(uint(n))),
	}
	for i := range t.free {
		t.free[i] = int32(size - 1 - i)
	}
	if reveal {
		t.keys = make([]byte, size*MaxKeyLen)
	}
	return t
}

// home returns the slot where a probe for d starts: Fibonacci hashing of its first 8 bytes.
func (t *table) home(d *[DigestLen / 2]byte) int32 {
	var h uint64
	for _, b := range d[:8] {
		h = h<<8 | uint64(b)
	}
	return int32((h * 0x9E3779B97F4A7C15) >> t.shift)
}

// find returns the slot of d, and whether d is there (else the empty slot where it would go).
func (t *table) find(d *[DigestLen / 2]byte) (int32, bool) {
	mask := int32(len(t.slots) - 1)
	for i := t.home(d); ; i = (i + 1) & mask {
		e := t.slots[i]
		if e == 0 {
			return i, false
		}
		if t.entries[e-1].digest == *d {
			return i, true
		}
	}
}

// add counts one rejection of d, of subject (kept only when t keeps subjects), at now, in slice
// cur. A new digest takes a free entry or, in a full table, the entry of the least total, whose
// count is recorded as replaced in slice cur. It starts with what a digest without an entry may
// have had in each live slice on, the largest count replaced in that slice or a later one (a
// staircase, the bound in all: 0 while nothing was replaced), and the rejection itself in slice cur.
func (t *table) add(d *[DigestLen / 2]byte, subject string, now, cur int64) {
	slot, found := t.find(d)
	if found {
		e := &t.entries[t.slots[slot]-1]
		e.counts[cur%ring]++
		e.total++
		e.last = now
		t.down(int(e.pos))
		return
	}
	var idx int32
	if len(t.free) > 0 {
		idx = t.free[len(t.free)-1]
		t.free = t.free[:len(t.free)-1]
		t.heap = append(t.heap, idx) // within its capacity: no allocation
		t.entries[idx].pos = int32(len(t.heap) - 1)
	} else {
		idx = t.heap[0] // the least counted: space-saving replaces it
		r := &t.replaced[cur%ring]
		*r = max(*r, t.entries[idx].total)
		t.remove(t.entries[idx].slot)
		slot, _ = t.find(d)
	}
	e := &t.entries[idx]
	*e = entry{digest: *d, born: cur, first: now, last: now, pos: e.pos, slot: slot}
	var m uint64 // the largest count replaced in slice j or later
	for j := cur; j > cur-ring && j >= 0; j-- {
		if r := t.replaced[j%ring]; r > m {
			e.counts[j%ring] = r - m
			m = r
		}
	}
	e.err, e.total = m, m
	e.counts[cur%ring]++
	e.total++
	t.slots[slot] = idx + 1
	if t.keys != nil {
		n := copy(t.keys[int(idx)*MaxKeyLen:(int(idx)+1)*MaxKeyLen], subject)
		e.keyLen, e.truncated = uint16(n), n < len(subject)
	}
	t.up(int(e.pos)) // a new entry's count may be below its parent's
	t.down(int(e.pos))
}

// begin starts slice s: the slice ring before it, whose place s takes, leaves the live slices, and
// its counts leave every entry; an entry with nothing left is freed. It restores the heap after.
func (t *table) begin(s int64) {
	i := s % ring
	t.replaced[i] = 0
	kept := t.heap[:0]
	for _, idx := range t.heap {
		e := &t.entries[idx]
		e.total -= e.counts[i]
		e.counts[i] = 0
		if e.total == 0 {
			t.remove(e.slot)
			t.free = append(t.free, idx) // within its capacity
			continue
		}
		kept = append(kept, idx)
	}
	t.heap = kept
	for p, idx := range t.heap {
		t.entries[idx].pos = int32(p)
	}
	for p := len(t.heap)/2 - 1; p >= 0; p-- {
		t.down(p)
	}
}

// remove empties slot i, moving back the entries after it that would no longer be found
// (backward-shift deletion), so that no probe stops early.
func (t *table) remove(i int32) {
	mask := int32(len(t.slots) - 1)
	t.slots[i] = 0
	for j := (i + 1) & mask; t.slots[j] != 0; j = (j + 1) & mask {
		e := &t.entries[t.slots[j]-1]
		h := t.home(&e.digest)
		// The entry at j stays unless its home is cyclically outside (i, j]: then it moves to i.
		if i <= j && (h <= i || h > j) || i > j && h <= i && h > j {
			t.slots[i] = t.slots[j]
			e.slot = i
			t.slots[j] = 0
			i = j
		}
	}
}

// down restores the heap below position p, whose entry's total only grew.
func (t *table) down(p int) {
	h := t.heap
	for {
		c := 2*p + 1
		if c >= len(h) {
			break
		}
		if c+1 < len(h) && t.entries[h[c+1]].total < t.entries[h[c]].total {
			c++
		}
		if t.entries[h[p]].total <= t.entries[h[c]].total {
			break
		}
		h[p], h[c] = h[c], h[p]
		t.entries[h[p]].pos, t.entries[h[c]].pos = int32(p), int32(c)
		p = c
	}
}

// up restores the heap above position p, whose entry's total may be below its parent's.
func (t *table) up(p int) {
	h := t.heap
	for p > 0 {
		parent := (p - 1) / 2
		if t.entries[h[parent]].total <= t.entries[h[p]].total {
			break
		}
		h[p], h[parent] = h[parent], h[p]
		t.entries[h[p]].pos, t.entries[h[parent]].pos = int32(p), int32(parent)
		p = parent
	}
}

// bound returns the largest count replaced in the live slices: the most that a digest without an
// entry may have been rejected in them, and the most any entry's count is over.
func (t *table) bound() uint64 {
	var b uint64
	for _, r := range t.replaced {
		b = max(b, r)
	}
	return b
}

// key returns the subject kept for the entry at idx, "" when none is.
func (t *table) key(idx int32) string {
	if t.keys == nil {
		return ""
	}
	start := int(idx) * MaxKeyLen
	return string(t.keys[start : start+int(t.entries[idx].keyLen)])
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
