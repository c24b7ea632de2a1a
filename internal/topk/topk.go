// Package topk is a bounded heavy-hitters sketch: the subjects rejected most often under one
// policy over a sliding period, counted by their key's subject digest with the space-saving
// algorithm in a fixed number of entries, whatever the number of subjects.
//
// The period is cut into Slices slices of a tenth of it. Each entry counts its rejections per
// slice; its count is the sum over the live slices, the current one and the Slices before it, so a
// rejection counts for at least a period and at most a tenth of one more. A slice's start drops
// the slice that leaves from every entry, and an entry with nothing left.
//
// Space-saving's bound, per period: a new digest in a full sketch takes the entry of the least
// count, and the count it replaced is recorded in the current slice; [Report.Bound] is the largest
// count recorded in the live slices. A digest without an entry was rejected at most Bound times
// in the live slices, so a digest rejected more often has an entry. A new entry, in a free place
// too, starts with what its digest may have had: in each live slice, the largest count replaced in
// it or later, less what the later slices hold (at most Bound in all, leaving with its slices). So
// no count is below the truth, and each is over it by at most its [Entry.Error], itself at most
// Bound. While no entry was replaced in the live slices,
// Bound is 0 and every count exact.
// Docs: docs/operations.md, "Who is being limited".
package topk

import (
	"cmp"
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
	// MaxSize is the most entries a Sketch holds.
	MaxSize = 10000
	// MaxKeyLen is the most bytes of a subject a Sketch that reveals subjects keeps; a longer
	// one is kept cut, Entry.Truncated set.
	MaxKeyLen = 256
)

// Options configures a Sketch.
type Options struct {
	// Size is the most entries the Sketch holds: 1 to MaxSize.
	Size int
	// Period is the period the Sketch counts over: at least Slices ns, each slice a tenth of it.
	Period time.Duration
	// Reveal keeps the raw subject of each entry (at most MaxKeyLen bytes), in memory only;
	// without it a Sketch holds digests alone.
	Reveal bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// A Sketch counts the rejections of subjects by digest in at most Size entries, over the last
// Period. It is safe for concurrent use, and Add allocates nothing. Make one with [New].
type Sketch struct {
	mu     sync.Mutex
	t      *table
	origin int64 // Unix nanoseconds at which slice 0 began
	slice  int64 // a slice's length, in nanoseconds
	cur    int64 // the current slice, counted from origin
	now    func() time.Time
	opts   Options
}

// New returns an empty Sketch for o. It reports an error for a Size or Period out of bounds.
func New(o Options) (*Sketch, error) {
	switch {
	case o.Size < 1 || o.Size > MaxSize:
		return nil, fmt.Errorf("topk: size %d; want 1-%d", o.Size, MaxSize)
	case o.Period < Slices:
		return nil, fmt.Errorf("topk: period %v; want at least %dns", o.Period, Slices)
	}
	s := &Sketch{
		t:     newTable(o.Size, o.Reveal),
		slice: int64(o.Period / Slices),
		now:   o.Now,
		opts:  o,
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.origin = s.now().UnixNano()
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
	s.t.add(&d, subject, now, s.cur)
	s.mu.Unlock()
	return true
}

// roll starts the slices due at now, at most ring of them (after that many, every count is
// gone). A clock that went back rolls nothing.
func (s *Sketch) roll(now int64) {
	due := (now - s.origin) / s.slice
	if now < s.origin || due <= s.cur {
		return
	}
	for j := max(s.cur+1, due-ring+1); j <= due; j++ {
		s.t.begin(j)
	}
	s.cur = due
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
	// Rejected is the rejections counted in the live slices: never below the true number, at
	// most Error above it.
	Rejected uint64
	// Error is the most of Rejected that may be other subjects' (space-saving's overestimate):
	// at most the Report's Bound.
	Error uint64
	// FirstSeen and LastSeen are the times of the first and last rejection counted since the
	// entry was made: a subject rejected all along may have been first seen before the period.
	FirstSeen, LastSeen time.Time
}

// A Report is what [Sketch.Top] reads.
type Report struct {
	// Entries are the subjects rejected most, most first (ties: the latest seen first).
	Entries []Entry
	// Bound is the most by which any subject's count, present or not, may be off from its true
	// number of rejections in the live slices: the largest count replaced in them, 0 while none was.
	Bound uint64
}

// Top returns the n subjects rejected most over the live slices.
func (s *Sketch) Top(n int) Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roll(s.now().UnixNano())
	bound := s.t.bound()
	out := make([]Entry, 0, len(s.t.heap))
	for _, idx := range s.t.heap {
		e := &s.t.entries[idx]
		var errBound uint64
		if e.born >= s.cur-Slices {
			errBound = min(e.err, bound)
		}
		out = append(out, Entry{Digest: digestString(&e.digest), Key: s.t.key(idx), Truncated: e.truncated,
			Rejected: e.total, Error: errBound, FirstSeen: time.Unix(0, e.first), LastSeen: time.Unix(0, e.last)})
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
	return Report{Entries: out, Bound: bound}
}

// Len returns the number of entries the Sketch holds: at most Size.
func (s *Sketch) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roll(s.now().UnixNano())
	return len(s.t.heap)
}

// Bytes returns the memory the Sketch's arrays take, in bytes: fixed by its Options at New.
func (s *Sketch) Bytes() int {
	t := s.t
	return int(unsafe.Sizeof(*s)) + int(unsafe.Sizeof(*t)) + cap(t.entries)*int(unsafe.Sizeof(entry{})) +
		4*cap(t.heap) + 4*cap(t.free) + 4*cap(t.slots) + cap(t.keys)
}
