package redisstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/callers"
	"github.com/admit-dev/admit/internal/redistest"
)

// benchLimit never rejects within a benchmark, so every call does the full admit path.
var benchLimit = admit.Limit{Algorithm: admit.FixedWindow, Rate: bound.MaxRate, Period: time.Hour}

// BenchmarkTake measures Store.Take on a harness-started Redis, over 1024 keys. The module in bench/
// runs the same beside bare rueidis, go-redis and redis_rate; `make bench` reports it.
func BenchmarkTake(b *testing.B) {
	srv := redistest.Start(b)
	s := open(b, srv.URL())
	keys := benchKeys(1024)
	callers.Bench(b, func(i int) error {
		_, err := s.Take(context.Background(), admit.Request{Key: keys[i%len(keys)], Limit: benchLimit, Cost: 1})
		return err
	})
}

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "rl:bench:v1:{" + strconv.Itoa(i) + "}"
	}
	return keys
}

// BenchmarkKeyMemory reports the Redis memory of one key of each algorithm as admit leaves it:
// bytes/key is MEMORY USAGE (SAMPLES 0: every element counted) of a key named as a KeyBuilder names
// it, after one Take of the given cost; ns/op is that Take. docs/sliding-window.md and
// docs/sliding-log.md quote it:
//
//	ADMIT_REQUIRE_REDIS=1 go test -run '^$' -bench KeyMemory -benchtime 3x ./redisstore
func BenchmarkKeyMemory(b *testing.B) {
	srv := redistest.Start(b)
	s := open(b, srv.URL())
	kb, err := admit.NewKeyBuilder([]byte("benchmark secret, 16+ bytes"))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		lim  admit.Limit
		cost int64
	}{
		{"fixed_window", admit.Limit{Name: "api", Algorithm: admit.FixedWindow, Rate: 100, Period: time.Minute}, 1},
		{"gcra", admit.Limit{Name: "api", Algorithm: admit.GCRA, Rate: 100, Period: time.Minute, Burst: 10}, 1},
		{"concurrency/leases=1", admit.Limit{Name: "api", Algorithm: admit.Concurrency, Rate: 100, Period: time.Minute}, 1},
		{"sliding_window", admit.Limit{Name: "api", Algorithm: admit.SlidingWindow, Rate: 100, Period: time.Minute}, 1},
		{"sliding_window/rate=10^15", admit.Limit{Name: "api", Algorithm: admit.SlidingWindow, Rate: bound.MaxRate, Period: time.Minute}, bound.MaxRate},
		{"sliding_log/entries=1", admit.Limit{Name: "api", Algorithm: admit.SlidingLog, Rate: 100, Period: time.Minute}, 1},
		{"sliding_log/entries=100", admit.Limit{Name: "api", Algorithm: admit.SlidingLog, Rate: 100, Period: time.Minute}, 100},
		{"sliding_log/entries=128", admit.Limit{Name: "api", Algorithm: admit.SlidingLog, Rate: 128, Period: time.Minute}, 128},
		{"sliding_log/entries=129", admit.Limit{Name: "api", Algorithm: admit.SlidingLog, Rate: 129, Period: time.Minute}, 129},
		{"sliding_log/entries=1000", admit.Limit{Name: "api", Algorithm: admit.SlidingLog, Rate: 1000, Period: time.Minute}, 1000},
		{"sliding_log/entries=10000", admit.Limit{Name: "api", Algorithm: admit.SlidingLog, Rate: bound.MaxSlidingLogRate, Period: time.Minute}, bound.MaxSlidingLogRate},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var key string
			i := 0
			for b.Loop() {
				i++
				key, err = kb.Key(bc.lim, bound.DefaultVersion, admit.Subject{ID: b.Name() + strconv.Itoa(i)})
				if err != nil {
					b.Fatal(err)
				}
				if d, err := s.Take(context.Background(), admit.Request{Key: key, Limit: bc.lim, Cost: bc.cost}); err != nil || !d.Allowed {
					b.Fatalf("Take: %+v, %v", d, err)
				}
			}
			bytes, err := srv.Do(b, "MEMORY", "USAGE", key, "SAMPLES", "0").AsInt64()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(bytes), "bytes/key")
		})
	}
}

// BenchmarkClientWork measures the client's own work per decision, without the round trip: building
// a Take's keys and arguments and parsing the take script's reply (one real reply, from a
// harness-started Redis, parsed over and over). It is what redisstore adds to bare rueidis's
// EVALSHA besides bounding the call (BenchmarkBound).
func BenchmarkClientWork(b *testing.B) {
	srv := redistest.Start(b)
	s := open(b, srv.URL())
	rs := []admit.Request{{Key: "rl:bench:v1:{0}", Limit: benchLimit, Cost: 1}}
	var tokens [1]uint64
	keys, args := takeArgs(rs, s.tokens, tokens[:])
	reply, err := s.run(context.Background(), takeScript, keys, args)
	if err != nil {
		b.Fatal(err)
	}
	var ds [1]admit.Decision
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		var keyBuf [2]string
		var argsBuf [3 + takeArgsPerPolicy]string
		_, _ = appendTakeArgs(keyBuf[:0], argsBuf[:0], rs, s.tokens, tokens[:])
		if _, err := parseTake(reply, rs, ds[:], tokens[:]); err != nil {
			b.Fatal(err)
		}
	}
}
