package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
)

// benchCallers are the numbers of concurrent callers every Take benchmark runs with.
var benchCallers = []int{1, 16, 256}

// benchLimit never rejects within a benchmark, so every call does the full admit path.
var benchLimit = admit.Limit{Algorithm: admit.FixedWindow, Rate: admit.MaxRate, Period: time.Hour}

// runCallers runs op from exactly callers goroutines until b.N calls are done in all. Each call
// gets a distinct index, so callers can spread over keys.
func runCallers(b *testing.B, callers int, op func(i int64) error) {
	b.Helper()
	var next atomic.Int64
	var failed atomic.Value
	done := make(chan struct{})
	b.ResetTimer()
	for range callers {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if err := op(i); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	for range callers {
		<-done
	}
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkTake measures Store.Take on a harness-started Redis, over 1024 keys.
func BenchmarkTake(b *testing.B) {
	srv := redistest.Start(b)
	s := open(b, srv.URL())
	keys := benchKeys(1024)
	for _, callers := range benchCallers {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			b.ReportAllocs()
			runCallers(b, callers, func(i int64) error {
				_, err := s.Take(context.Background(), keys[i%int64(len(keys))], benchLimit, 1)
				return err
			})
		})
	}
}

// BenchmarkReferenceRueidis is the reference for BenchmarkTake: the same script called with a bare
// rueidis EVALSHA, with no validation, timeout or reply checks around it.
func BenchmarkReferenceRueidis(b *testing.B) {
	srv := redistest.Start(b)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Do(ctx, c.B().ScriptLoad().Script(fixedWindow.src).Build()).Error(); err != nil {
		b.Fatal(err)
	}
	keys := benchKeys(1024)
	args := fixedWindowArgs(benchLimit, 1)
	for _, callers := range benchCallers {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			b.ReportAllocs()
			runCallers(b, callers, func(i int64) error {
				cmd := c.B().Evalsha().Sha1(fixedWindow.sha).Numkeys(1).Key(keys[i%int64(len(keys))]).Arg(args...).Build()
				return c.Do(ctx, cmd).Error()
			})
		})
	}
}

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "rl:bench:v1:{" + strconv.Itoa(i) + "}"
	}
	return keys
}
