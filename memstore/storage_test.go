package memstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
)

// TestStorageMatchesAMap drives a shard's table — inserts, removals by position (as reclaim makes
// them), arena compactions, index growth and rebuilds — against a map of the same keys, and checks
// after every step that each key is found at an entry holding its own key and count, and that no
// removed key is found.
func TestStorageMatchesAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sh := &shard{seed: rng.Uint64()}
	want := map[string]int64{} // key → count
	var next int64
	key := func(i int64) string {
		// lengths 1 … 600, so every branch of keyHash and long runs of the arena are covered
		return fmt.Sprintf("%0*d", 1+int(i*7919%600), i)
	}
	check := func(step int) {
		t.Helper()
		if len(sh.entries) != len(want) {
			t.Fatalf("step %d: %d entries; want %d", step, len(sh.entries), len(want))
		}
		live := 0
		for k, count := range want {
			i, ok := sh.find(k, sh.hash(k))
			if !ok || string(sh.keyOf(&sh.entries[i])) != k || sh.entries[i].count != count {
				t.Fatalf("step %d: find(%.20q) = %d, %v; want its entry", step, k, i, ok)
			}
			live += len(k)
		}
		if len(sh.keys)-sh.garbage != live {
			t.Fatalf("step %d: %d bytes of keys, %d of them garbage; want %d live", step, len(sh.keys), sh.garbage, live)
		}
		for range 20 {
			if k := key(next + rng.Int64N(1000)); want[k] == 0 {
				if _, ok := sh.find(k, sh.hash(k)); ok {
					t.Fatalf("step %d: found %.20q, which has no entry", step, k)
				}
			}
		}
	}
	for step := range 30_000 {
		switch r := rng.IntN(100); {
		case r < 55 || len(sh.entries) == 0: // a new key
			next++
			k := key(next)
			x := (*sliding)(nil)
			if next%3 == 0 {
				x = &sliding{start: next}
			}
			sh.insert(k, sh.hash(k), entry{count: next, deadline: time.Duration(next)}, x)
			want[k] = next
		case r < 99: // a removal, anywhere
			i := rng.IntN(len(sh.entries))
			e := &sh.entries[i]
			if x := sh.ext(e); x != nil && x.start != e.count {
				t.Fatalf("step %d: entry %d holds further state %d; want its own, %d", step, i, x.start, e.count)
			}
			delete(want, string(sh.keyOf(e)))
			sh.remove(i)
		default:
			sh.rebuild()
		}
		if step%97 == 0 || len(want) < 50 {
			check(step)
		}
	}
	check(-1)
}

// TestKeyHashSpreads checks that keyHash's low bits, which pick a key's home slot, spread keys that
// differ in one character only, as a KeyBuilder's keys do, over the slots.
func TestKeyHashSpreads(t *testing.T) {
	const keys, slots = 1 << 14, 1 << 12
	var seen [slots]int
	for i := range keys {
		seen[keyHash(42, fmt.Sprintf("rl:api:v1:{user%08d}", i))&(slots-1)]++
	}
	most := 0
	for _, n := range seen {
		most = max(most, n)
	}
	if most > 20 { // 4 on average; a good hash puts at most ~14 in one
		t.Fatalf("%d of %d keys in one of %d home slots; want the keys spread", most, keys, slots)
	}
}

// TestFullArena checks that a shard whose arena of keys cannot take one more key of the longest
// length refuses new keys with ErrFull, keeps deciding the keys it holds, and takes new keys again
// once expired ones are removed (their bytes compacted away).
func TestFullArena(t *testing.T) {
	defer func(most int64) { maxArena = most }(maxArena)
	maxArena = 4096
	clock := newClock()
	s := New(Options{Now: clock.Now, SweepInterval: -1, Shards: 1})
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 2, Period: time.Second}
	key := func(i int) string { return fmt.Sprintf("%0100d", i) } // 100 bytes
	held := 0
	for ; ; held++ {
		_, err := s.Take(context.Background(), admit.Request{Key: key(held), Limit: lim, Cost: 1})
		if errors.Is(err, ErrFull) && errors.Is(err, admit.ErrUnavailable) {
			break
		}
		if err != nil || held > 100 {
			t.Fatalf("Take of new key %d: %v; want ErrFull by the time the arena is full", held, err)
		}
	}
	// A new key needs room for a key of the longest length, a record's, however long it is itself.
	if most := int(maxArena) - bound.MaxKeyLen - recordKeyOverhead; (held-1)*100 > most || held*100 <= most {
		t.Fatalf("the shard took %d keys of 100 bytes; want new keys while it held at most %d bytes", held, most)
	}
	if d := mustTake(t, s, key(0), lim, 1); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("Take of a held key in a full shard = %+v; want it decided as before", d)
	}
	clock.Advance(time.Second)
	for i := range held { // the held keys have ended: the first new one reclaims them all
		if d := mustTake(t, s, key(1000+i), lim, 1); !d.Allowed {
			t.Fatalf("Take of new key %d after the others ended = %+v", i, d)
		}
	}
}
