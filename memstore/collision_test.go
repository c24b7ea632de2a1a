package memstore

import (
	"encoding/binary"
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

// TestKeyHashHasNoSeedFreeCollisions hashes keys that hold, at the start of a 16-byte step or of the
// last 16 bytes, the 8 bytes of wyhash's public constant k1, with everything else varied: their
// hashes must differ, whatever the seed. Before the first factor of each product was seeded, the
// product of those bytes xored with k1 was zero, and every such key of a length hashed alike under
// every seed: an attacker choosing key bytes could put all its keys in one home slot with one tag,
// and make each find of the shard walk them all.
func TestKeyHashHasNoSeedFreeCollisions(t *testing.T) {
	var k1 [8]byte
	binary.LittleEndian.PutUint64(k1[:], 0xe7037ed1a0b428db)
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{12, 15, 16, 17, 24, 32, 33, 100} {
		for at := 0; at+8 <= n; at += 8 {
			if n > 16 && at%16 != 0 && at != n-16 || n <= 16 && at != 0 {
				continue // not where a product's first factor is loaded
			}
			for _, seed := range []uint64{rng.Uint64(), rng.Uint64()} {
				seen := map[uint32]bool{}
				const keys = 200
				for range keys {
					b := make([]byte, n)
					for i := range b {
						b[i] = byte('a' + rng.IntN(26))
					}
					copy(b[at:], k1[:])
					seen[keyHash(seed, string(b))] = true
				}
				if len(seen) < keys-2 {
					t.Errorf("%d keys of %d bytes with k1's bytes at %d: %d distinct hashes under seed %#x; want about %d", keys, n, at, len(seen), seed, keys)
				}
			}
		}
	}
}

// TestRemovalKeepsUnexaminedEntriesAheadOfTheCursor removes entries anywhere, as a Take that finds
// its key's entry ended, a Release or a Settle do, with reclaim's cursor anywhere: the entries the
// cursor's turn has yet to examine (at the cursor and after it) must stay there, less the one
// removed, so that the turn examines each. Before, a removal behind the cursor moved the last
// entry, not yet examined, into the hole behind it, and an ended entry so moved outlived the turn.
func TestRemovalKeepsUnexaminedEntriesAheadOfTheCursor(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	sh := &shard{seed: rng.Uint64()}
	aheadOf := func() map[string]bool {
		m := map[string]bool{}
		for i := sh.cursor; i < len(sh.entries); i++ {
			m[string(sh.keyOf(&sh.entries[i]))] = true
		}
		return m
	}
	next := 0
	for step := range 3000 {
		if len(sh.entries) < 5 || rng.IntN(2) == 0 {
			next++
			k := fmt.Sprint("key", next)
			sh.insert(k, sh.hash(k), entry{count: int64(next)}, nil)
			continue
		}
		sh.cursor = rng.IntN(len(sh.entries) + 1)
		want := aheadOf()
		i := rng.IntN(len(sh.entries))
		gone := string(sh.keyOf(&sh.entries[i]))
		delete(want, gone)
		sh.remove(i)
		if got := aheadOf(); len(got) != len(want) {
			t.Fatalf("step %d: removing position %d left %d entries from the cursor on; want the %d not yet examined", step, i, len(got), len(want))
		} else {
			for k := range want {
				if !got[k] {
					t.Fatalf("step %d: removing position %d moved %q, not yet examined, behind the cursor", step, i, k)
				}
			}
		}
		for j := range sh.entries {
			k := string(sh.keyOf(&sh.entries[j]))
			if p, ok := sh.find(k, sh.hash(k)); !ok || p != j {
				t.Fatalf("step %d: find(%q) = %d, %v; want %d", step, k, p, ok, j)
			}
		}
		if _, ok := sh.find(gone, sh.hash(gone)); ok {
			t.Fatalf("step %d: the removed key %q is still found", step, gone)
		}
	}
}
