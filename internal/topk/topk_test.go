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

// checkInvariants checks a generation's structure: every held entry is found where its slot
// says, the heap is a min-heap whose positions match, and the table holds nothing else.
func checkInvariants(t *testing.T, g *generation) {
	t.Helper()
	used := 0
	for _, e := range g.table {
		if e != 0 {
			used++
		}
	}
	if used != len(g.heap) {
		t.Fatalf("table holds %d entries, heap %d", used, len(g.heap))
	}
	for p, idx := range g.heap {
		e := &g.entries[idx]
		if int(e.pos) != p {
			t.Fatalf("entry %d at heap position %d says %d", idx, p, e.pos)
		}
		if p > 0 && g.entries[g.heap[(p-1)/2]].count > e.count {
			t.Fatalf("heap: parent count %d above child's %d", g.entries[g.heap[(p-1)/2]].count, e.count)
		}
		slot, ok := g.find(&e.digest)
		if !ok || slot != e.slot || g.table[slot] != idx+1 {
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
	checkInvariants(t, s.cur)
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
			checkInvariants(t, s.cur)
		}
	}
	checkInvariants(t, s.cur)
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
	for _, idx := range s.cur.heap {
		sum += s.cur.entries[idx].count
	}
	if sum != 200_000 { // space-saving: the counts add up to the rejections counted
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

// Generations roll on the clock: a rejection counts for at least half a period and at most a
// whole one; the counts of both generations are summed.
func TestGenerationsRoll(t *testing.T) {
	s, clock := newSketch(t, 10, false)
	a, b := digest("a"), digest("b")
	s.Add(a, "")
	clock.advance(4 * time.Minute)
	s.Add(a, "")
	if e := s.Top(1).Entries; len(e) != 1 || e[0].Rejected != 2 {
		t.Fatalf("in the first generation: %+v; want a counted 2", e)
	}
	clock.advance(time.Minute) // 5m: the first generation becomes the previous one
	s.Add(a, "")
	s.Add(b, "")
	e := s.Top(10).Entries
	if len(e) != 2 || e[0].Digest != a || e[0].Rejected != 3 || e[1].Rejected != 1 {
		t.Fatalf("over both generations: %+v; want a 3, b 1", e)
	}
	if !e[0].FirstSeen.Equal(clock.now().Add(-5*time.Minute)) || !e[0].LastSeen.Equal(clock.now()) {
		t.Errorf("a seen %v … %v; want the first and last rejections, merged", e[0].FirstSeen, e[0].LastSeen)
	}
	if s.Len() != 3 {
		t.Errorf("Len = %d; want 3 entries in two generations", s.Len())
	}
	clock.advance(5 * time.Minute) // 10m: the first generation is dropped
	if e := s.Top(10).Entries; len(e) != 2 || e[0].Rejected != 1 || e[1].Rejected != 1 {
		t.Fatalf("after the first generation is dropped: %+v; want a 1, b 1", e)
	}
	clock.advance(10 * time.Minute) // 20m: both dropped
	if e := s.Top(10).Entries; len(e) != 0 || s.Len() != 0 {
		t.Fatalf("a whole period later: %+v; want nothing", e)
	}
	s.Add(b, "")
	if e := s.Top(10).Entries; len(e) != 1 || e[0].Rejected != 1 {
		t.Fatalf("after both were dropped: %+v; want b 1", e)
	}
	clock.advance(-time.Hour) // a clock that goes back rolls nothing
	if e := s.Top(10).Entries; len(e) != 1 {
		t.Fatalf("after the clock went back: %+v; want b still", e)
	}
	checkInvariants(t, s.cur)
	checkInvariants(t, s.prev)
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
	for _, o := range []Options{{Size: 0, Period: time.Minute}, {Size: MaxSize + 1, Period: time.Minute}, {Size: 1, Period: 1}, {Size: 1}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v): no error", o)
		}
	}
	if _, err := New(Options{Size: MaxSize, Period: time.Minute}); err != nil {
		t.Errorf("New at MaxSize: %v", err)
	}
}

// Add allocates nothing, a full Sketch replacing entries included.
func TestAddAllocatesNothing(t *testing.T) {
	for _, reveal := range []bool{false, true} {
		s, _ := newSketch(t, 64, reveal)
		ds := make([]string, 4096)
		for i := range ds {
			ds[i] = digest(fmt.Sprint(i))
		}
		i := 0
		if n := testing.AllocsPerRun(10_000, func() { s.Add(ds[i%len(ds)], "subject"); i++ }); n != 0 {
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
