package memstore

import (
	"slices"
	"strings"
)

// chunkMax is the most keys a chunk of a sortedKeys holds: one fuller splits in two. An insert or a
// delete moves at most chunkMax keys, after a binary search of the chunks, so that a policy's
// millionth Override costs about what its first does (one sorted slice made every insert move half
// of them: quadratic in the number of Overrides).
const chunkMax = 1024

// sortedKeys is a set of keys in order: chunks, each sorted and not empty, each key below every key
// of the next chunk. The zero value is empty.
type sortedKeys struct {
	chunks [][]string
	n      int // the keys in all chunks
}

// len returns the number of keys.
func (s *sortedKeys) len() int { return s.n }

// chunkOf returns the index of the chunk key is in or belongs in: the first whose last key is not
// below key, else the last. s has a chunk.
func (s *sortedKeys) chunkOf(key string) int {
	i, _ := slices.BinarySearchFunc(s.chunks, key, func(c []string, k string) int { return strings.Compare(c[len(c)-1], k) })
	return min(i, len(s.chunks)-1)
}

// insert adds key and reports whether it was not there yet.
func (s *sortedKeys) insert(key string) bool {
	if len(s.chunks) == 0 {
		s.chunks, s.n = [][]string{{key}}, 1
		return true
	}
	ci := s.chunkOf(key)
	c := s.chunks[ci]
	i, found := slices.BinarySearch(c, key)
	if found {
		return false
	}
	c = slices.Insert(c, i, key)
	if len(c) > chunkMax {
		half := len(c) / 2
		s.chunks = slices.Insert(s.chunks, ci+1, slices.Clone(c[half:]))
		c = slices.Clone(c[:half])
	}
	s.chunks[ci] = c
	s.n++
	return true
}

// delete removes key and reports whether it was there.
func (s *sortedKeys) delete(key string) bool {
	if len(s.chunks) == 0 {
		return false
	}
	ci := s.chunkOf(key)
	c := s.chunks[ci]
	i, found := slices.BinarySearch(c, key)
	if !found {
		return false
	}
	if c = slices.Delete(c, i, i+1); len(c) == 0 {
		s.chunks = slices.Delete(s.chunks, ci, ci+1)
	} else {
		s.chunks[ci] = c
	}
	s.n--
	return true
}

// each calls f with each key after the key after ("" for from the first), in order, until f
// returns false; it reports whether f did.
func (s *sortedKeys) each(after string, f func(key string) bool) bool {
	if len(s.chunks) == 0 {
		return false
	}
	ci := s.chunkOf(after)
	i, found := slices.BinarySearch(s.chunks[ci], after)
	if found {
		i++ // strictly after
	}
	for ; ci < len(s.chunks); ci, i = ci+1, 0 {
		for _, key := range s.chunks[ci][i:] {
			if !f(key) {
				return true
			}
		}
	}
	return false
}

// all returns every key, in order, in a new slice.
func (s *sortedKeys) all() []string {
	return slices.Concat(s.chunks...)
}
