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
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/callers"
	"github.com/admit-dev/admit/internal/luasource"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/redisstore"
)

// limit is never reached within a benchmark, so every call takes the admit path.
var limit = admit.Limit{Name: "bench", Algorithm: admit.FixedWindow, Rate: bound.MaxRate, Period: time.Hour}

// keys spreads calls over 1024 keys.
var keys = func() []string {
	k := make([]string, 1024)
	for i := range k {
		k[i] = "rl:bench:v1:{" + strconv.Itoa(i) + "}"
	}
	return k
}()

// takeArgs are the ARGV of redisstore's take script for one unit of limit, with no request ID, as
// scripts/take.lua documents them: the policy count, an empty fingerprint, an empty shadow mask, then
// the algorithm and its arguments (limit, window in milliseconds, cost, aligned 0 or 1). A drift from what the script
// accepts fails the reference benchmarks with its ADMIT_INVALID reply.
var takeArgs = []string{"1", "", "", limit.Algorithm.String(),
	strconv.FormatInt(limit.Rate, 10), strconv.FormatInt(limit.Period.Milliseconds(), 10), "1", "0"}

// takeScript returns the source of redisstore's take script, the one its Take calls, which the bare
// clients call too.
func takeScript(b *testing.B) string {
	src, ok := luasource.Lookup("take")
	if !ok {
		b.Fatal(`redisstore has no "take" script`)
	}
	return src
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
		_, err := s.Take(ctx, admit.Request{Key: keys[i%len(keys)], Limit: limit, Cost: 1})
		return err
	})
}

// BenchmarkReferenceRueidis is the reference: admit's take script called by a bare rueidis EVALSHA,
// the client admit uses, with nothing around it.
func BenchmarkReferenceRueidis(b *testing.B) {
	srv := redistest.Start(b)
	c, sha := bareRueidis(b, srv, takeScript(b))
	ctx := context.Background()
	callers.Bench(b, func(i int) error {
		return c.Do(ctx, c.B().Evalsha().Sha1(sha).Numkeys(1).Key(keys[i%len(keys)]).Arg(takeArgs...).Build()).Error()
	})
}

// BenchmarkRueidisCommandTimeout is BenchmarkReferenceRueidis with each call bounded as
// redisstore bounds it, by context.WithTimeout of the store's default command timeout: what an
// application calling rueidis bare writes to get the same guarantee, and what that guarantee costs a
// bare client (a timer and a context per call, and a select on its Done channel inside rueidis).
func BenchmarkRueidisCommandTimeout(b *testing.B) {
	srv := redistest.Start(b)
	c, sha := bareRueidis(b, srv, takeScript(b))
	callers.Bench(b, func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), redisstore.DefaultCommandTimeout)
		defer cancel()
		return c.Do(ctx, c.B().Evalsha().Sha1(sha).Numkeys(1).Key(keys[i%len(keys)]).Arg(takeArgs...).Build()).Error()
	})
}

// BenchmarkPreviousScriptRueidis calls, by bare rueidis EVALSHA, the single-purpose fixed-window
// script redisstore used before the take script (testdata/fixed_window_before_take.lua): the
// single-policy path before and after the request model, in one run.
func BenchmarkPreviousScriptRueidis(b *testing.B) {
	src, err := os.ReadFile("testdata/fixed_window_before_take.lua")
	if err != nil {
		b.Fatal(err)
	}
	srv := redistest.Start(b)
	c, sha := bareRueidis(b, srv, string(src))
	ctx := context.Background()
	args := takeArgs[4:7] // limit, window, cost
	callers.Bench(b, func(i int) error {
		return c.Do(ctx, c.B().Evalsha().Sha1(sha).Numkeys(1).Key(keys[i%len(keys)]).Arg(args...).Build()).Error()
	})
}

// BenchmarkGoRedis calls admit's take script with a bare go-redis EVALSHA (retries off, default
// pool).
func BenchmarkGoRedis(b *testing.B) {
	srv := redistest.Start(b)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	sha, err := c.ScriptLoad(ctx, takeScript(b)).Result()
	if err != nil {
		b.Fatal(err)
	}
	args := make([]any, len(takeArgs))
	for i, a := range takeArgs {
		args[i] = a
	}
	callers.Bench(b, func(i int) error {
		return c.EvalSha(ctx, sha, []string{keys[i%len(keys)]}, args...).Err()
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

// bareRueidis returns a bare rueidis client of srv, closed at b's cleanup, and the SHA1 of src,
// loaded on srv.
func bareRueidis(b *testing.B, srv *redistest.Server, src string) (rueidis.Client, string) {
	b.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	sha, err := c.Do(context.Background(), c.B().ScriptLoad().Script(src).Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	return c, sha
}
