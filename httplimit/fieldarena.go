package httplimit

import (
	"strings"
	"sync"
)

// Sizes of the blocks a fieldArena carves values from.
const (
	arenaSlots = 128  // header values ([]string of one element) per block
	arenaText  = 4096 // bytes of value text per block
)

// A fieldArena hands out the values of response header fields without an allocation each: a value
// is a []string of one element, cut from a block of slots, and its text a string cut from a block
// of bytes. A block is allocated once it is used up, so a response costs a few hundredths of an
// allocation, amortized.
//
// What the arena hands out is never written again: each value has its own slot, of capacity 1 (an
// append to it copies), and each text its own bytes, which a strings.Builder never rewrites. The
// price is memory kept alive: a header value that outlives its response keeps its block, a few
// kilobytes, from the garbage collector.
//
// A fieldArena is not safe for concurrent use: take one from fieldArenas for the time it takes to
// set a response's fields, and put it back.
type fieldArena struct {
	slots []string        // the unused slots of the current block
	text  strings.Builder // the current block of text; strings handed out are parts of its String()
}

// fieldArenas pools fieldArenas: one per P, in effect, without locks.
var fieldArenas = sync.Pool{New: func() any { return new(fieldArena) }}

// value returns a header value of the one element v.
func (a *fieldArena) value(v string) []string {
	if len(a.slots) == 0 {
		a.slots = make([]string, arenaSlots)
	}
	f := a.slots[0:1:1]
	a.slots = a.slots[1:]
	f[0] = v
	return f
}

// string returns b as a string. A text of more than a quarter of a block gets an allocation of
// its own, so that it does not waste the rest of one.
func (a *fieldArena) string(b []byte) string {
	if len(b) > arenaText/4 {
		return string(b)
	}
	if a.text.Cap()-a.text.Len() < len(b) {
		a.text = strings.Builder{} // the old block lives on in the strings handed out of it
		a.text.Grow(arenaText)
	}
	start := a.text.Len()
	a.text.Write(b)
	return a.text.String()[start:]
}
