package redisstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/callers"
	"github.com/admit-dev/admit/internal/redistest"
)

// benchLimit never rejects within a benchmark, so every call does the full admit path.
var benchLimit = admit.Limit{Algorithm: admit.FixedWindow, Rate: admit.MaxRate, Period: time.Hour}

// BenchmarkTake measures Store.Take on a harness-started Redis, over 1024 keys.
func BenchmarkTake(b *testing.B) {
	srv := redistest.Start(b)
	s := open(b, srv.URL())
	keys := benchKeys(1024)
	for _, n := range callers.Counts {
		b.Run(callers.Name(n), func(b *testing.B) {
			b.ReportAllocs()
			callers.Run(b, n, func(i int) error {
				_, err := s.Take(context.Background(), keys[i%len(keys)], benchLimit, 1)
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
	for _, n := range callers.Counts {
		b.Run(callers.Name(n), func(b *testing.B) {
			b.ReportAllocs()
			callers.Run(b, n, func(i int) error {
				cmd := c.B().Evalsha().Sha1(fixedWindow.sha).Numkeys(1).Key(keys[i%len(keys)]).Arg(args...).Build()
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
