package memstore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// sortedKeys against a sorted slice, on random inserts and deletes of keys from a space of 6,000
// (several chunks, splits, chunks emptied): after each step the same keys in the same order, and
// each from a random key, present or not, gives what follows it.
func TestSortedKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var s sortedKeys
	var want []string
	key := func() string { return fmt.Sprintf("rl:p:o:{%05d}", rng.IntN(6000)) }
	for step := range 40_000 {
		k := key()
		i, found := slices.BinarySearch(want, k)
		if step%3 == 2 || step > 30_000 { // the last steps mostly delete: chunks empty
			if got := s.delete(k); got != found {
				t.Fatalf("step %d: delete(%q) = %v; want %v", step, k, got, found)
			}
			if found {
				want = slices.Delete(want, i, i+1)
			}
		} else {
			if got := s.insert(k); got == found {
				t.Fatalf("step %d: insert(%q) = %v; want %v", step, k, got, !found)
			}
			if !found {
				want = slices.Insert(want, i, k)
			}
		}
		if step%997 != 0 && step != 39_999 {
			continue
		}
		if all := s.all(); s.len() != len(want) || !slices.Equal(all, want) {
			t.Fatalf("step %d: %d keys %.3q…; want %d %.3q…", step, s.len(), all, len(want), want)
		}
		for _, c := range s.chunks {
			if len(c) == 0 || len(c) > chunkMax {
				t.Fatalf("step %d: a chunk of %d keys; want 1 to %d", step, len(c), chunkMax)
			}
		}
		for _, after := range []string{"", key(), key(), "rl:p:o:{99999}"} {
			j, found := slices.BinarySearch(want, after)
			if found {
				j++
			}
			var got []string
			stopped := s.each(after, func(k string) bool {
				if len(got) == 5 {
					return false
				}
				got = append(got, k)
				return true
			})
			rest := want[j:]
			if w := rest[:min(5, len(rest))]; !slices.Equal(got, w) || stopped != (len(rest) > 5) {
				t.Fatalf("step %d: each(%q) = %q, stopped %v; want %q, %v", step, after, got, stopped, w, len(rest) > 5)
			}
		}
	}
}
