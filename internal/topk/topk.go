// Package topk is a bounded heavy-hitters sketch: the subjects rejected most often under one
// policy over a sliding period, counted by their key's subject digest with the space-saving
// algorithm in a fixed number of entries, whatever the number of subjects.
//
// The period is two generations of half a period each: the current one counts, the previous one
// is read with it, and every half period the previous is dropped and the current becomes the
// previous. A query covers between half a period and a whole one.
//
// Space-saving's bound: once a generation has replaced an entry, each entry's count overestimates
// the true count of its digest by at most the entry's error, itself at most the generation's least
// count, and a digest without an entry was rejected at most that least count of times; before, its
// counts are exact. So a count merged over both generations is within [Report.Bound] (the sum of
// those least counts) of the truth, and a digest rejected more often than that has an entry.
// Docs: docs/operations.md, "Who is being limited".
package topk

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
	"unsafe"
)

// Bounds of a Sketch.
const (
	// DigestLen is the length of a digest, in hex characters: a key's subject digest.
	DigestLen = 32
	// MaxSize is the most entries a Sketch's generation holds.
	MaxSize = 10000
	// MaxKeyLen is the most bytes of a subject a Sketch that reveals subjects keeps; a longer
	// one is kept cut, Entry.Truncated set.
	MaxKeyLen = 256
)

// Options configures a Sketch.
type Options struct {
	// Size is the number of entries of each generation: 1 to MaxSize.
	Size int
	// Period is the period the Sketch counts over: at least 2ns, each generation half of it.
	Period time.Duration
	// Reveal keeps the raw subject of each entry (at most MaxKeyLen bytes), in memory only;
	// without it a Sketch holds digests alone.
	Reveal bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// A Sketch counts the rejections of subjects by digest in two generations of Size entries. It is
// safe for concurrent use, and Add allocates nothing. Make one with [New].
type Sketch struct {
	mu        sync.Mutex
	cur, prev *generation
	start     int64 // Unix nanoseconds at which cur began
	half      int64 // a generation's length, in nanoseconds
	now       func() time.Time
	opts      Options
}

// New returns an empty Sketch for o. It reports an error for a Size or Period out of bounds.
func New(o Options) (*Sketch, error) {
	switch {
	case o.Size < 1 || o.Size > MaxSize:
		return nil, fmt.Errorf("topk: size %d; want 1-%d", o.Size, MaxSize)
	case o.Period < 2:
		return nil, errors.New("topk: a period of at least 2ns")
	}
	s := &Sketch{
		cur:  newGeneration(o.Size, o.Reveal),
		prev: newGeneration(o.Size, o.Reveal),
		half: int64(o.Period / 2),
		now:  o.Now,
		opts: o,
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.start = s.now().UnixNano()
	return s, nil
}

// Options returns the Options the Sketch was made with.
func (s *Sketch) Options() Options { return s.opts }

// Add counts one rejection of the subject whose digest is digest (DigestLen lower-case hex
// characters), keeping subject only when the Sketch reveals subjects. It reports false, counting
// nothing, for a digest of another form.
func (s *Sketch) Add(digest, subject string) bool {
	var d [DigestLen / 2]byte
	if !parseDigest(digest, &d) {
		return false
	}
	now := s.now().UnixNano()
	s.mu.Lock()
	s.roll(now)
	s.cur.add(&d, subject, now)
	s.mu.Unlock()
	return true
}

// roll starts the generations due at now: one half period on, the current becomes the previous
// and a new one starts; a whole period on, both are empty. A clock that went back rolls nothing.
func (s *Sketch) roll(now int64) {
	elapsed := now - s.start
	if elapsed < s.half {
		return
	}
	if elapsed < 2*s.half {
		s.cur, s.prev = s.prev, s.cur
		s.cur.reset()
	} else {
		s.cur.reset()
		s.prev.reset()
	}
	s.start += elapsed / s.half * s.half
}

// An Entry is one subject of a Report.
type Entry struct {
	// Digest is the subject's digest, as its keys end with.
	Digest string
	// Key is the raw subject, at most MaxKeyLen bytes of it, when the Sketch reveals subjects;
	// else "".
	Key string
	// Truncated reports that Key is cut at MaxKeyLen bytes.
	Truncated bool
	// Rejected is the rejections counted, at most Error above the true number.
	Rejected uint64
	// Error is the most of Rejected that may be other subjects' (space-saving's overestimate):
	// at most the Report's Bound.
	Error uint64
	// FirstSeen and LastSeen are the times of the first and last rejection counted.
	FirstSeen, LastSeen time.Time
}

// A Report is what [Sketch.Top] reads.
type Report struct {
	// Entries are the subjects rejected most, most first (ties: the latest seen first).
	Entries []Entry
	// Bound is the most by which any subject's count, present or not, may be off from its true
	// number of rejections in the period read: 0 while no generation has had to replace an entry.
	Bound uint64
}

// Top returns the n subjects rejected most over both generations, their counts summed.
func (s *Sketch) Top(n int) Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roll(s.now().UnixNano())
	byDigest := make(map[[DigestLen / 2]byte]int, len(s.cur.heap)+len(s.prev.heap))
	var out []Entry
	for _, g := range []*generation{s.cur, s.prev} {
		for _, idx := range g.heap {
			e := &g.entries[idx]
			first, last := time.Unix(0, e.first), time.Unix(0, e.last)
			i, seen := byDigest[e.digest]
			if !seen {
				byDigest[e.digest] = len(out)
				out = append(out, Entry{Digest: digestString(&e.digest), Key: g.key(idx), Truncated: e.truncated,
					Rejected: e.count, Error: e.err, FirstSeen: first, LastSeen: last})
				continue
			}
			m := &out[i]
			m.Rejected += e.count
			m.Error += e.err
			if first.Before(m.FirstSeen) {
				m.FirstSeen = first
			}
			if last.After(m.LastSeen) {
				m.LastSeen = last
			}
			if m.Key == "" {
				m.Key, m.Truncated = g.key(idx), e.truncated
			}
		}
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if c := cmp.Compare(b.Rejected, a.Rejected); c != 0 {
			return c
		}
		if c := b.LastSeen.Compare(a.LastSeen); c != 0 {
			return c
		}
		return cmp.Compare(a.Digest, b.Digest)
	})
	if len(out) > n {
		out = out[:max(n, 0)]
	}
	return Report{Entries: out, Bound: s.cur.min() + s.prev.min()}
}

// Len returns the number of entries the Sketch holds: at most 2 × Size.
func (s *Sketch) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roll(s.now().UnixNano())
	return len(s.cur.heap) + len(s.prev.heap)
}

// Bytes returns the memory the Sketch's arrays take, in bytes: fixed by its Options at New.
func (s *Sketch) Bytes() int {
	n := int(unsafe.Sizeof(*s))
	for _, g := range []*generation{s.cur, s.prev} {
		n += int(unsafe.Sizeof(*g)) + cap(g.entries)*int(unsafe.Sizeof(entry{})) + 4*cap(g.heap) + 4*cap(g.table) + cap(g.keys)
	}
	return n
}
