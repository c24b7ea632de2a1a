package topk

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkAdd measures Sketch.Add under a flood of 1,048,576 distinct subjects in turn, each
// rejected once per pass: every Add of a full Sketch replaces an entry. It reports the Sketch's
// memory (sketch-B, fixed at New) and its entries at the end, which stay at the bound however many
// subjects arrive, and the live heap's growth over the run (heap-growth-B, after a GC at each end),
// which stays near 0; B/op and allocs/op are 0. Run with -benchtime 1048576x for one flood of
// 10^6 distinct subjects, each rejected once.
func BenchmarkAdd(b *testing.B) {
	ds := make([]string, 1<<20)
	for i := range ds {
		ds[i] = digest(fmt.Sprint(i))
	}
	for _, size := range []int{100, MaxSize} {
		for _, reveal := range []bool{false, true} {
			b.Run(fmt.Sprintf("size=%d/reveal=%v", size, reveal), func(b *testing.B) {
				s, err := New(Options{Size: size, Period: 10 * time.Minute, Reveal: reveal})
				if err != nil {
					b.Fatal(err)
				}
				bytes := s.Bytes()
				before := liveHeap()
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					s.Add(ds[i&(len(ds)-1)], "subject@example.com")
					i++
				}
				if s.Bytes() != bytes || s.Len() > size {
					b.Fatalf("after %d Adds: %d bytes (from %d), %d entries", i, s.Bytes(), bytes, s.Len())
				}
				b.ReportMetric(float64(int64(liveHeap())-int64(before)), "heap-growth-B")
				b.ReportMetric(float64(s.Bytes()), "sketch-B")
				b.ReportMetric(float64(s.Len()), "entries")
			})
		}
	}
}

// liveHeap returns the bytes of live heap objects after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
