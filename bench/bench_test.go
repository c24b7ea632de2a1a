package bench

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/callers"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/redisstore"
)

// limit is never reached within a benchmark, so every call takes the admit path.
var limit = admit.Limit{Algorithm: admit.FixedWindow, Rate: admit.MaxRate, Period: time.Hour}

// keys spreads calls over 1024 keys.
var keys = func() []string {
	k := make([]string, 1024)
	for i := range k {
		k[i] = "rl:bench:v1:{" + strconv.Itoa(i) + "}"
	}
	return k
}()

// scriptArgs are the ARGV of fixed_window.lua for limit and a cost of 1.
var scriptArgs = []string{strconv.FormatInt(limit.Rate, 10), strconv.FormatInt(limit.Period.Milliseconds(), 10), "1"}

// fixedWindowScript returns the source of admit's fixed-window script, which the bare clients call.
func fixedWindowScript(b *testing.B) string {
	src, err := os.ReadFile("../redisstore/scripts/fixed_window.lua")
	if err != nil {
		b.Fatal(err)
	}
	return string(src)
}

// BenchmarkAdmitRedisstore measures admit's Redis store: validation, a timeout per decision,
// EVALSHA, and a checked reply.
func BenchmarkAdmitRedisstore(b *testing.B) {
	srv := redistest.Start(b)
	s, err := redisstore.New(redisstore.Config{URL: srv.URL()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	callers.Bench(b, func(i int) error {
		_, err := s.Take(ctx, keys[i%len(keys)], limit, 1)
		return err
	})
}

// BenchmarkReferenceRueidis is the reference: admit's script called by a bare rueidis EVALSHA, the
// client admit uses, with nothing around it.
func BenchmarkReferenceRueidis(b *testing.B) {
	srv := redistest.Start(b)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	sha, err := c.Do(ctx, c.B().ScriptLoad().Script(fixedWindowScript(b)).Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	callers.Bench(b, func(i int) error {
		return c.Do(ctx, c.B().Evalsha().Sha1(sha).Numkeys(1).Key(keys[i%len(keys)]).Arg(scriptArgs...).Build()).Error()
	})
}

// BenchmarkGoRedis calls admit's script with a bare go-redis EVALSHA (retries off, default pool).
func BenchmarkGoRedis(b *testing.B) {
	srv := redistest.Start(b)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	sha, err := c.ScriptLoad(ctx, fixedWindowScript(b)).Result()
	if err != nil {
		b.Fatal(err)
	}
	callers.Bench(b, func(i int) error {
		return c.EvalSha(ctx, sha, []string{keys[i%len(keys)]}, scriptArgs[0], scriptArgs[1], scriptArgs[2]).Err()
	})
}

// BenchmarkRedisRate measures go-redis/redis_rate, the popular GCRA limiter on go-redis (another
// algorithm, one script call per decision too), with a rate it never reaches.
func BenchmarkRedisRate(b *testing.B) {
	srv := redistest.Start(b)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer c.Close()
	l := redis_rate.NewLimiter(c)
	ctx := context.Background()
	lim := redis_rate.PerHour(1_000_000_000)
	callers.Bench(b, func(i int) error {
		_, err := l.Allow(ctx, keys[i%len(keys)], lim)
		return err
	})
}
