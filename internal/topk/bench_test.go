package topk

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkAdd measures Sketch.Add under a flood of 1,048,576 distinct subjects in turn, each
// rejected once per pass: every Add of a full Sketch replaces an entry. It reports the Sketch's
// memory (sketch-B, fixed at New) and its entries at the end, which stay at the bound however many
// subjects arrive; B/op and allocs/op are 0.
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
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					s.Add(ds[i&(len(ds)-1)], "subject@example.com")
					i++
				}
				if s.Bytes() != bytes || s.Len() > 2*size {
					b.Fatalf("after %d Adds: %d bytes (from %d), %d entries", i, s.Bytes(), bytes, s.Len())
				}
				b.ReportMetric(float64(s.Bytes()), "sketch-B")
				b.ReportMetric(float64(s.Len()), "entries")
			})
		}
	}
}
