// Package callers runs a benchmark's operation from a fixed number of goroutines at once, so that
// every package measures "1, 16 and 256 concurrent callers" the same way and names it the same way.
package callers

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// Counts are the numbers of concurrent callers every admit benchmark runs with.
var Counts = []int{1, 16, 256}

// Name returns the sub-benchmark name for n callers, "callers=n"; scripts/bench.sh pairs rows by it.
func Name(n int) string { return fmt.Sprintf("callers=%d", n) }

// Bench runs op as one sub-benchmark per entry of Counts, named by [Name], each with
// b.ReportAllocs and [Run].
func Bench(b *testing.B, op func(i int) error) {
	b.Helper()
	for _, n := range Counts {
		b.Run(Name(n), func(b *testing.B) {
			b.ReportAllocs()
			Run(b, n, op)
		})
	}
}

// Run calls op b.N times in all from exactly n goroutines, each call with its own index in
// 0 … b.N−1, and reports the throughput as "decisions/s". Unlike b.RunParallel, the number of
// goroutines does not depend on GOMAXPROCS. The first error op returns stops the run and fails b.
func Run(b *testing.B, n int, op func(i int) error) {
	b.Helper()
	run(b, n, 1, func(from, _ int) error { return op(from) })
}

// RunBatches is [Run] for an operation that makes the decisions from … to−1 at once (a pipeline):
// n goroutines take batches of up to batch indices until b.N decisions are made, and decisions/s
// counts decisions, not batches.
func RunBatches(b *testing.B, n, batch int, op func(from, to int) error) {
	b.Helper()
	run(b, n, batch, op)
}

func run(b *testing.B, n, batch int, op func(from, to int) error) {
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		failure error
	)
	size, total := int64(batch), int64(b.N)
	b.ResetTimer()
	for range n {
		wg.Go(func() {
			for {
				from := next.Add(size) - size
				if from >= total {
					return
				}
				if err := op(int(from), int(min(from+size, total))); err != nil {
					errOnce.Do(func() { failure = err })
					next.Store(total) // stop the others
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if failure != nil {
		b.Fatal(failure)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}
