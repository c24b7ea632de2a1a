package topk

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// digest returns a digest for the subject s, as a key would end with it.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:DigestLen/2])
}

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newSketch(t testing.TB, size int, reveal bool) (*Sketch, *fakeClock) {
	t.Helper()
	clock := &fakeClock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	s, err := New(Options{Size: size, Period: 10 * time.Minute, Reveal: reveal, Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	return s, clock
}

// checkInvariants checks a table's structure: every held entry is found where its slot says and
// its total is the sum of its slices, the heap is a min-heap whose positions match, the held and
// the free entries are the table's, each once, and the slots hold nothing else.
func checkInvariants(t *testing.T, tb *table) {
	t.Helper()
	used := 0
	for _, e := range tb.slots {
		if e != 0 {
			used++
		}
	}
	if used != len(tb.heap) {
		t.Fatalf("slots hold %d entries, heap %d", used, len(tb.heap))
	}
	if len(tb.heap)+len(tb.free) != len(tb.entries) {
		t.Fatalf("%d held and %d free of %d entries", len(tb.heap), len(tb.free), len(tb.entries))
	}
	seen := map[int32]bool{}
	for _, idx := range append(append([]int32(nil), tb.heap...), tb.free...) {
		if seen[idx] {
			t.Fatalf("entry %d held or free twice", idx)
		}
		seen[idx] = true
	}
	for p, idx := range tb.heap {
		e := &tb.entries[idx]
		if int(e.pos) != p {
			t.Fatalf("entry %d at heap position %d says %d", idx, p, e.pos)
		}
		if p > 0 && tb.entries[tb.heap[(p-1)/2]].total > e.total {
			t.Fatalf("heap: parent total %d above child's %d", tb.entries[tb.heap[(p-1)/2]].total, e.total)
		}
		var sum uint64
		for _, c := range e.counts {
			sum += c
		}
		if sum != e.total || sum == 0 {
			t.Fatalf("entry %d: total %d, slices sum to %d", idx, e.total, sum)
		}
		slot, ok := tb.find(&e.digest)
		if !ok || slot != e.slot || tb.slots[slot] != idx+1 {
			t.Fatalf("entry %d: find gives slot %d (%v), entry says %d", idx, slot, ok, e.slot)
		}
	}
}

// Below its size, a Sketch counts every subject exactly, with no error and a bound of 0.
func TestExactBelowSize(t *testing.T) {
	s, clock := newSketch(t, 10, false)
	start := clock.now()
	want := map[string]uint64{}
	for i := range 10 {
		for range i + 1 {
			if !s.Add(digest(fmt.Sprint(i)), fmt.Sprint(i)) {
				t.Fatal("Add refused a digest")
			}
			want[digest(fmt.Sprint(i))]++
			clock.advance(time.Second)
		}
	}
	r := s.Top(10)
	if r.Bound != 0 || len(r.Entries) != 10 {
		t.Fatalf("Bound %d, %d entries; want 0 and 10", r.Bound, len(r.Entries))
	}
	for i, e := range r.Entries {
		if e.Rejected != want[e.Digest] || e.Error != 0 || e.Key != "" {
			t.Errorf("%s: rejected %d error %d key %q; want %d, 0, no key", e.Digest, e.Rejected, e.Error, e.Key, want[e.Digest])
		}
		if i > 0 && r.Entries[i-1].Rejected < e.Rejected {
			t.Errorf("entry %d: %d after %d: not most first", i, e.Rejected, r.Entries[i-1].Rejected)
		}
	}
	top := r.Entries[0] // subject 9: rejected 10 times, the last 10 seconds
	if top.Digest != digest("9") || !top.FirstSeen.Equal(start.Add(45*time.Second)) || !top.LastSeen.Equal(start.Add(54*time.Second)) {
		t.Errorf("top %s seen %v … %v; want %s at +45s … +54s", top.Digest, top.FirstSeen, top.LastSeen, digest("9"))
	}
	if got := s.Top(3).Entries; len(got) != 3 || got[0].Digest != digest("9") || got[2].Digest != digest("7") {
		t.Errorf("Top(3) = %+v; want subjects 9, 8, 7", got)
	}
	if s.Len() != 10 {
		t.Errorf("Len = %d, want 10", s.Len())
	}
	checkInvariants(t, s.t)
}

// Heavy hitters survive a flood of distinct subjects many times the size: each is reported with a
// count no lower than its true one and at most its Error above, the Error within the Bound; and
// every subject rejected more than the Bound times is reported.
func TestHeavyHittersSurviveAFlood(t *testing.T) {
	const size = 100
	s, _ := newSketch(t, size, false)
	rng := rand.New(rand.NewPCG(1, 2))
	truth := map[string]uint64{}
	var heavy []string
	for i := range 10 {
		heavy = append(heavy, digest(fmt.Sprintf("heavy-%d", i)))
	}
	for i := range 200_000 {
		d := digest(fmt.Sprintf("flood-%d", i))
		if rng.IntN(10) == 0 {
			d = heavy[rng.IntN(len(heavy))]
		}
		s.Add(d, "")
		truth[d]++
		if i%9973 == 0 {
			checkInvariants(t, s.t)
		}
	}
	checkInvariants(t, s.t)
	r := s.Top(size)
	if r.Bound == 0 {
		t.Fatal("Bound 0 after a flood of 200,000 subjects into 100 entries")
	}
	reported := map[string]bool{}
	for _, e := range r.Entries {
		reported[e.Digest] = true
		if e.Rejected < truth[e.Digest] || e.Rejected-truth[e.Digest] > e.Error || e.Error > r.Bound {
			t.Errorf("%s: rejected %d (true %d), error %d, bound %d", e.Digest, e.Rejected, truth[e.Digest], e.Error, r.Bound)
		}
	}
	for d, n := range truth {
		if n > r.Bound && !reported[d] {
			t.Errorf("%s rejected %d times, above the bound %d, and not reported", d, n, r.Bound)
		}
	}
	top := s.Top(len(heavy)).Entries
	for _, e := range top {
		if !contains(heavy, e.Digest) {
			t.Errorf("the top %d hold %s, not a heavy hitter", len(heavy), e.Digest)
		}
	}
	if s.Len() != size {
		t.Errorf("Len = %d after the flood; want %d", s.Len(), size)
	}
	var sum uint64
	for _, idx := range s.t.heap {
		sum += s.t.entries[idx].total
	}
	if sum != 200_000 { // space-saving in one slice: the counts add up to the rejections counted
		t.Errorf("counts add up to %d; want 200000", sum)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Slices roll on the clock: a rejection counts in its slice (a tenth of the period) and the ten
// after it, so for at least a period and at most a tenth more; an entry with nothing left in the
// live slices is dropped, and its place freed.
func TestSlicesRoll(t *testing.T) {
	s, clock := newSketch(t, 2, false)
	start := clock.now()
	a, b, c := digest("a"), digest("b"), digest("c")
	s.Add(a, "")
	clock.advance(4*time.Minute + 30*time.Second) // slice 4
	s.Add(a, "")
	s.Add(b, "")
	if e := s.Top(2).Entries; len(e) != 2 || e[0].Digest != a || e[0].Rejected != 2 || e[1].Rejected != 1 {
		t.Fatalf("within the period: %+v; want a 2, b 1", e)
	}
	clock.advance(6*time.Minute + 29*time.Second) // 10m59s: slice 10, slice 0 still live
	e := s.Top(2).Entries
	if len(e) != 2 || e[0].Rejected != 2 {
		t.Fatalf("a period and 59s on: %+v; want a still 2", e)
	}
	if !e[0].FirstSeen.Equal(start) || !e[0].LastSeen.Equal(start.Add(4*time.Minute+30*time.Second)) {
		t.Errorf("a seen %v … %v; want its first and last rejections", e[0].FirstSeen, e[0].LastSeen)
	}
	clock.advance(time.Second) // 11m: slice 0 leaves
	if e := s.Top(2).Entries; len(e) != 2 || e[0].Rejected != 1 || e[1].Rejected != 1 {
		t.Fatalf("slice 0 left: %+v; want a 1, b 1", e)
	}
	s.Add(c, "") // a third subject in a full sketch replaces one of 1
	if e := s.Top(2); s.Len() != 2 || e.Bound != 1 || e.Entries[0].Digest != c || e.Entries[0].Rejected != 2 || e.Entries[0].Error != 1 {
		t.Fatalf("c replaced an entry: %+v (Len %d); want c 2, error 1, bound 1", e, s.Len())
	}
	checkInvariants(t, s.t)
	clock.advance(4 * time.Minute) // 15m: slice 4 leaves, and the entry left of a or b with it
	if e := s.Top(2); s.Len() != 1 || len(e.Entries) != 1 || e.Entries[0].Digest != c || e.Bound != 1 {
		t.Fatalf("slice 4 left: %+v (Len %d); want c alone, bound 1 (slice 11 live)", e, s.Len())
	}
	checkInvariants(t, s.t)
	s.Add(a, "") // a freed place, but a may be the subject replaced at 11m: it starts there
	if e := s.Top(2).Entries; len(e) != 2 || e[0].Digest != a || e[0].Rejected != 2 || e[0].Error != 1 {
		t.Fatalf("a in a freed place: %+v; want a 2, error 1, first (seen last)", e)
	}
	clock.advance(7 * time.Minute) // 22m: slice 11 leaves, with c's start and the replaced count
	if e := s.Top(2); e.Bound != 0 || len(e.Entries) != 1 || e.Entries[0].Digest != a || e.Entries[0].Rejected != 1 {
		t.Fatalf("slice 11 left: %+v; want a alone, 1, bound 0", e)
	}
	s.Add(b, "") // nothing replaced in the live slices: counted exactly
	if e := s.Top(2); e.Bound != 0 || len(e.Entries) != 2 || e.Entries[0].Digest != b || e.Entries[0].Rejected != 1 || e.Entries[0].Error != 0 {
		t.Fatalf("b with nothing replaced: %+v; want b 1, error 0", e)
	}
	clock.advance(-time.Hour) // a clock that goes back rolls nothing
	if e := s.Top(2).Entries; len(e) != 2 {
		t.Fatalf("after the clock went back: %+v; want a and b still", e)
	}
	clock.advance(time.Hour + 100*time.Hour) // far on: every slice left
	if e := s.Top(2).Entries; len(e) != 0 || s.Len() != 0 {
		t.Fatalf("100 hours on: %+v; want nothing", e)
	}
	checkInvariants(t, s.t)
}

// The bound holds over time, against the true counts of the live slices: under a random stream of
// heavy and light subjects, on a clock that moves in random steps, every reported count is at or
// above the truth and at most its Error above, every Error is within the Bound, every subject with
// more than Bound rejections in the live slices is reported, and the Sketch never holds more than
// its size.
func TestBoundOverTime(t *testing.T) {
	const size, period = 20, 10 * time.Minute
	s, clock := newSketch(t, size, true)
	origin := clock.now()
	sliceOf := func(at time.Time) int64 { return int64(at.Sub(origin) / (period / Slices)) }
	type rejection struct {
		digest string
		slice  int64
	}
	var log []rejection
	rng := rand.New(rand.NewPCG(4, 4))
	replaced := false
	regime := 0
	for step := range 40_000 {
		if step%300 == 0 {
			regime = rng.IntN(5)
			if regime == 4 { // a pause of about half a period, then subjects seen before it
				clock.advance(4*time.Minute + time.Duration(rng.IntN(120))*time.Second)
			}
		}
		var d string
		switch regime {
		case 0: // a burst of a few subjects, many times each
			clock.advance(time.Duration(rng.IntN(20)) * time.Millisecond)
			d = digest(fmt.Sprintf("burst-%d-%d", step/3000, rng.IntN(30)))
		case 1: // a flood of distinct subjects
			clock.advance(time.Duration(rng.IntN(50)) * time.Millisecond)
			d = digest(fmt.Sprintf("flood-%d", step))
		case 2: // sparse: some of the earlier subjects, far apart
			clock.advance(time.Duration(rng.IntN(2_000)) * time.Millisecond)
			d = digest(fmt.Sprintf("burst-%d-%d", rng.IntN(step/3000+1), rng.IntN(30)))
		case 4:
			clock.advance(time.Duration(rng.IntN(100)) * time.Millisecond)
			d = digest(fmt.Sprintf("burst-%d-%d", max(step/3000-rng.IntN(2), 0), rng.IntN(30)))
		default: // mixed, with a pause now and then
			if rng.IntN(100) == 0 {
				clock.advance(time.Duration(rng.IntN(300)) * time.Second)
			}
			d = digest(fmt.Sprintf("burst-%d-%d", step/3000, rng.IntN(40)))
		}
		s.Add(d, "")
		log = append(log, rejection{d, sliceOf(clock.now())})
		if step%20 != 19 {
			continue
		}
		cur := sliceOf(clock.now())
		for len(log) > 0 && log[0].slice < cur-Slices {
			log = log[1:]
		}
		truth := map[string]uint64{}
		for _, r := range log {
			if r.slice >= cur-Slices {
				truth[r.digest]++
			}
		}
		r := s.Top(size)
		if r.Bound > 0 {
			replaced = true
		}
		if s.Len() > size || len(r.Entries) > size {
			t.Fatalf("step %d: Len %d, %d entries; size %d", step, s.Len(), len(r.Entries), size)
		}
		reported := map[string]bool{}
		for _, e := range r.Entries {
			reported[e.Digest] = true
			if e.Rejected < truth[e.Digest] || e.Rejected-truth[e.Digest] > e.Error || e.Error > r.Bound {
				t.Fatalf("step %d: %s rejected %d (true %d), error %d, bound %d", step, e.Digest, e.Rejected, truth[e.Digest], e.Error, r.Bound)
			}
		}
		for d, n := range truth {
			if n > r.Bound && !reported[d] {
				t.Fatalf("step %d: %s rejected %d times in the live slices, above the bound %d, and not reported", step, d, n, r.Bound)
			}
		}
		checkInvariants(t, s.t)
	}
	if !replaced {
		t.Fatal("no entry was ever replaced: the stream did not exercise the bound")
	}
}

// A subject replaced while its rejections are live starts again with what it may have had, even
// in a place freed since: x, replaced with 9 rejections at 5m, returns at 11m to the place f's
// slice 0 left, and is counted 10, not 1.
func TestReturningSubjectNotUndercounted(t *testing.T) {
	s, clock := newSketch(t, 2, false)
	f, x, y := digest("f"), digest("x"), digest("y")
	for range 10 {
		s.Add(f, "")
	}
	clock.advance(5 * time.Minute)
	for range 9 {
		s.Add(x, "")
	}
	s.Add(y, "")                   // replaces x, the least: 9
	clock.advance(6 * time.Minute) // 11m: slice 0 leaves, and f with it
	if s.Len() != 1 {
		t.Fatalf("Len %d at 11m; want 1 (y), f dropped", s.Len())
	}
	s.Add(x, "")
	r := s.Top(2)
	if r.Bound != 9 || len(r.Entries) != 2 || r.Entries[0].Digest != x || r.Entries[0].Rejected != 10 || r.Entries[0].Error != 9 {
		t.Fatalf("x back: %+v; want x 10 (its 9 and 1), error 9, bound 9", r)
	}
	checkInvariants(t, s.t)
}

// A Sketch that reveals subjects keeps each one, cut at MaxKeyLen bytes; one that does not keeps
// none.
func TestReveal(t *testing.T) {
	for _, reveal := range []bool{false, true} {
		s, _ := newSketch(t, 4, reveal)
		long := strings.Repeat("x", MaxKeyLen+10)
		s.Add(digest("alice"), "alice")
		s.Add(digest("alice"), "alice")
		s.Add(digest("long"), long)
		e := s.Top(2).Entries
		wantA, wantL := "", ""
		if reveal {
			wantA, wantL = "alice", long[:MaxKeyLen]
		}
		if len(e) != 2 || e[0].Key != wantA || e[1].Key != wantL || e[1].Truncated != reveal || e[0].Truncated {
			t.Errorf("reveal %v: %+v; want keys %q and %d bytes", reveal, e, wantA, len(wantL))
		}
	}
}

// A digest of another form counts nothing.
func TestBadDigest(t *testing.T) {
	s, _ := newSketch(t, 4, false)
	good := digest("a")
	for _, d := range []string{"", good[:31], good + "0", strings.ToUpper(good), "g" + good[1:], "{" + good[1:]} {
		if s.Add(d, "x") {
			t.Errorf("Add(%q) = true", d)
		}
	}
	if s.Len() != 0 {
		t.Errorf("Len = %d after bad digests; want 0", s.Len())
	}
}

func TestNewBounds(t *testing.T) {
	for _, o := range []Options{{Size: 0, Period: time.Minute}, {Size: MaxSize + 1, Period: time.Minute}, {Size: 1, Period: Slices - 1}, {Size: 1}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v): no error", o)
		}
	}
	if _, err := New(Options{Size: MaxSize, Period: Slices}); err != nil {
		t.Errorf("New at MaxSize and the shortest period: %v", err)
	}
}

// Add allocates nothing, a full Sketch replacing entries and slices starting included.
func TestAddAllocatesNothing(t *testing.T) {
	for _, reveal := range []bool{false, true} {
		s, clock := newSketch(t, 64, reveal)
		ds := make([]string, 4096)
		for i := range ds {
			ds[i] = digest(fmt.Sprint(i))
		}
		i := 0
		add := func() {
			s.Add(ds[i%len(ds)], "subject")
			if i++; i%100 == 0 {
				clock.advance(7 * time.Second) // a slice of 1m starts every 900 Adds or so
			}
		}
		if n := testing.AllocsPerRun(10_000, add); n != 0 {
			t.Errorf("reveal %v: Add allocates %v times per call", reveal, n)
		}
	}
}

// Concurrent Adds are all counted (below the size, exactly).
func TestConcurrentAdds(t *testing.T) {
	s, _ := newSketch(t, 100, true)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				s.Add(digest(fmt.Sprint(i%50)), fmt.Sprint(w))
				if i%100 == 0 {
					s.Top(5)
					s.Len()
				}
			}
		})
	}
	wg.Wait()
	e := s.Top(100).Entries
	if len(e) != 50 {
		t.Fatalf("%d entries; want 50", len(e))
	}
	for _, x := range e {
		if x.Rejected != 160 {
			t.Errorf("%s: %d; want 160", x.Digest, x.Rejected)
		}
	}
}
