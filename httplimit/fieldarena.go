package httplimit

import (
	"sync"
	"unsafe"
)

// Sizes of the blocks a fieldArena carves values from.
const (
	arenaSlots = 128  // header values ([]string of one element) per block
	arenaText  = 4096 // bytes of value text per block
)

// A fieldArena hands out the values of response header fields without an allocation each: a value
// is a []string of one element, cut from a block of slots, and its text a string cut from a block
// of bytes, written there in place (see fieldArena.buffer). A block is allocated once it is used
// up, so a response costs a few hundredths of an allocation, amortized.
//
// What the arena hands out is never written again: each value has its own slot, of capacity 1 (an
// append to it copies), and each text its own bytes, which the arena never hands out again. The
// price is memory kept alive: a header value that outlives its response keeps its block, a few
// kilobytes, from the garbage collector.
//
// A fieldArena is not safe for concurrent use: take one from fieldArenas for the time it takes to
// set a response's fields, and put it back.
type fieldArena struct {
	slots *[arenaSlots]string // the current block of slots
	text  *[arenaText]byte    // the current block of text
	free  int                 // the unused slots, at the end of slots
	room  int                 // the unused bytes, at the end of text
}

// fieldArenas pools fieldArenas: one per P, in effect, without locks.
var fieldArenas = sync.Pool{New: func() any { return new(fieldArena) }}

// value returns a header value of the one element v.
func (a *fieldArena) value(v string) []string {
	if a.free == 0 {
		a.slots, a.free = new([arenaSlots]string), arenaSlots
	}
	i := arenaSlots - a.free
	a.free--
	f := a.slots[i : i+1 : i+1]
	f[0] = v
	return f
}

// buffer returns an empty slice with room for n bytes, to append a text to and pass to
// fieldArena.take: the unused part of the current block, or of a new one if it has less room. A
// text of more than a quarter of a block gets a buffer of its own, so that it does not waste the
// rest of one.
func (a *fieldArena) buffer(n int) []byte {
	if n > arenaText/4 {
		return make([]byte, 0, n)
	}
	if a.room < n {
		a.text, a.room = new([arenaText]byte), arenaText // the old block lives on in the strings handed out of it
	}
	return a.text[arenaText-a.room : arenaText-a.room]
}

// take returns b, a slice that fieldArena.buffer returned with bytes appended, as a string, and
// moves the arena past its bytes: they are never handed out, nor written, again. b must be the
// last buffer the arena returned; if an append outgrew it, b is in memory of its own.
func (a *fieldArena) take(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) <= a.room && unsafe.SliceData(b) == &a.text[arenaText-a.room] {
		a.room -= len(b)
	}
	return unsafe.String(unsafe.SliceData(b), len(b)) // immutable from here on: see above
}

// string returns b as a string whose bytes the arena holds.
func (a *fieldArena) string(b []byte) string {
	return a.take(append(a.buffer(len(b)), b...))
}
