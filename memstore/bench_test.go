package memstore_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/memstore"
)

// BenchmarkTake measures Take of one unit under a limit never reached (the admit path: a lookup and
// an increment on a live key), from 1, 16 and 256 goroutines, on keys spread over the shards (each
// goroutine cycles through its own 1024 keys) and on one hot key that every goroutine shares. Keys
// are made and their entries created before the timer starts.
func BenchmarkTake(b *testing.B) {
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: admit.MaxRate, Period: time.Hour}
	for _, hot := range []bool{false, true} {
		for _, goroutines := range []int{1, 16, 256} {
			keys := "distinct"
			if hot {
				keys = "hot"
			}
			b.Run(fmt.Sprintf("keys=%s/goroutines=%d", keys, goroutines), func(b *testing.B) {
				benchmarkTake(b, lim, goroutines, hot)
			})
		}
	}
}

func benchmarkTake(b *testing.B, lim admit.Limit, goroutines int, hot bool) {
	s := memstore.New(memstore.Options{})
	defer s.Close()
	ctx := context.Background()

	// RunParallel starts parallelism × GOMAXPROCS goroutines.
	parallelism := max(1, goroutines/runtime.GOMAXPROCS(0))
	n := goroutines
	if goroutines > 1 {
		n = parallelism * runtime.GOMAXPROCS(0)
	}
	keys := make([][]string, n)
	for g := range keys {
		keys[g] = make([]string, 1024)
		for i := range keys[g] {
			keys[g][i] = fmt.Sprintf("rl:bench:v1:{%04x%08x}", g, i)
			if hot {
				keys[g][i] = "rl:bench:v1:{hot}"
			}
			if _, err := s.Take(ctx, keys[g][i], lim, 1); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()

	if goroutines == 1 {
		i := 0
		for b.Loop() {
			if _, err := s.Take(ctx, keys[0][i&1023], lim, 1); err != nil {
				b.Fatal(err)
			}
			i++
		}
		return
	}
	var next atomic.Int64
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mine := keys[int(next.Add(1)-1)%len(keys)]
		for i := 0; pb.Next(); i++ {
			if _, err := s.Take(ctx, mine[i&1023], lim, 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
