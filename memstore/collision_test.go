package memstore

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestStorageWithCollidingHashes drives a shard's table as TestStorageMatchesAMap does, but gives
// every key one of three hashes, so that all keys share a few home slots and hash tags: every find
// compares keys, the index's probe runs wrap around its end (a hash of all ones homes in the last
// slot), and backward-shift deletion moves slots across the wrap and past slots of other homes.
// Keys are of the lengths that matter to the arena and keyHash: 1, 7, 8, 15, 16, 17 and 512 bytes,
// and record-key long.
func TestStorageWithCollidingHashes(t *testing.T) {
	hashes := []uint32{0, 0xffff_ffff, 0x8000_0003}
	lengths := []int{1, 7, 8, 15, 16, 17, 512, 512 + recordKeyOverhead}
	key := func(i int) string {
		s := fmt.Sprint(i)
		n := max(lengths[i%len(lengths)], len(s))
		return strings.Repeat("k", n-len(s)) + s
	}
	hashOf := func(k string) uint32 { return hashes[len(k)%len(hashes)] }
	rng := rand.New(rand.NewPCG(5, 6))
	sh := &shard{}
	want := map[string]int64{}
	check := func(step int) {
		t.Helper()
		if len(sh.entries) != len(want) {
			t.Fatalf("step %d: %d entries; want %d", step, len(sh.entries), len(want))
		}
		for k, count := range want {
			i, ok := sh.find(k, hashOf(k))
			if !ok || string(sh.keyOf(&sh.entries[i])) != k || sh.entries[i].count != count {
				t.Fatalf("step %d: find(%.20q) = %d, %v; want its entry", step, k, i, ok)
			}
			if x := sh.ext(&sh.entries[i]); x != nil && x.start != count {
				t.Fatalf("step %d: %.20q holds further state %d; want its own, %d", step, k, x.start, count)
			}
		}
		for range 10 {
			if k := key(rng.IntN(3000)); want[k] == 0 {
				if _, ok := sh.find(k, hashOf(k)); ok {
					t.Fatalf("step %d: found %.20q, which has no entry", step, k)
				}
			}
		}
		used := 0
		for _, s := range sh.slots {
			if s != 0 {
				used++
			}
		}
		if used != len(sh.entries) || len(sh.entries) > 0 && len(sh.entries)*4 > len(sh.slots)*3 {
			t.Fatalf("step %d: %d slots used of %d for %d entries", step, used, len(sh.slots), len(sh.entries))
		}
	}
	next := int64(0)
	for step := range 6_000 {
		// grow to about 300 keys, shrink to none, twice: the index grows while clustered
		grow := step%3000 < 1500
		switch r := rng.IntN(100); {
		case (grow && r < 70) || (!grow && r < 30) || len(sh.entries) == 0:
			k := key(rng.IntN(3000))
			if want[k] != 0 {
				continue
			}
			next++
			var x *sliding
			if next%2 == 0 {
				x = &sliding{start: next}
			}
			sh.insert(k, hashOf(k), entry{count: next, deadline: time.Duration(next)}, x)
			want[k] = next
		case r < 99:
			i := rng.IntN(len(sh.entries))
			delete(want, string(sh.keyOf(&sh.entries[i])))
			sh.remove(i)
		default:
			sh.rebuild()
		}
		if step%29 == 0 || len(want) < 40 { // each check is quadratic here: every find walks a cluster
			check(step)
		}
	}
	check(-1)
}
