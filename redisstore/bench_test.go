package redisstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/callers"
	"github.com/admit-dev/admit/internal/redistest"
)

// benchLimit never rejects within a benchmark, so every call does the full admit path.
var benchLimit = admit.Limit{Algorithm: admit.FixedWindow, Rate: admit.MaxRate, Period: time.Hour}

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
