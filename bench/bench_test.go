package bench

import (
	"context"
	"strconv"
	"strings"
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
var limit = admit.Limit{Name: "bench", Algorithm: admit.FixedWindow, Rate: admit.MaxRate, Period: time.Hour}

// keys spreads calls over 1024 keys.
var keys = func() []string {
	k := make([]string, 1024)
	for i := range k {
		k[i] = "rl:bench:v1:{" + strconv.Itoa(i) + "}"
	}
	return k
}()

// takeCommand returns the SHA and the ARGV of the EVALSHA that redisstore sends to srv for a Take of
// one unit of limit, read from srv's slow log, which records every command while it runs. The ARGV
// is the same for every key. The script is loaded on srv when takeCommand returns, so a bare client
// can call exactly what admit calls, whatever the way redisstore assembles its script and its
// arguments.
func takeCommand(b *testing.B, srv *redistest.Server) (sha string, argv []string) {
	b.Helper()
	s, err := redisstore.New(redisstore.Config{URL: srv.URL()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	srv.Do(b, "CONFIG", "SET", "slowlog-log-slower-than", "0")
	srv.Do(b, "SLOWLOG", "RESET")
	_, err = s.Take(context.Background(), admit.Request{Key: keys[0], Limit: limit, Cost: 1})
	entries, logErr := srv.Do(b, "SLOWLOG", "GET", "128").ToArray()
	srv.Do(b, "CONFIG", "SET", "slowlog-log-slower-than", "10000") // the default: the benchmarks run unlogged
	if err != nil || logErr != nil {
		b.Fatalf("Take: %v; SLOWLOG GET: %v", err, logErr)
	}
	for _, e := range entries { // newest first
		fields, err := e.ToArray()
		if err != nil || len(fields) < 4 {
			continue
		}
		args, err := fields[3].AsStrSlice() // id, time, duration, then the command's arguments
		if err == nil && len(args) >= 4 && strings.EqualFold(args[0], "EVALSHA") && args[2] == "1" && args[3] == keys[0] {
			return args[1], args[4:]
		}
	}
	b.Fatalf("no EVALSHA of %s among the %d commands in the slow log", keys[0], len(entries))
	return "", nil
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

// BenchmarkReferenceRueidis is the reference: the EVALSHA that admit's Take sends, by a bare rueidis
// client, the client admit uses, with nothing around it.
func BenchmarkReferenceRueidis(b *testing.B) {
	srv := redistest.Start(b)
	sha, argv := takeCommand(b, srv)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	callers.Bench(b, func(i int) error {
		return c.Do(ctx, c.B().Evalsha().Sha1(sha).Numkeys(1).Key(keys[i%len(keys)]).Arg(argv...).Build()).Error()
	})
}

// BenchmarkGoRedis sends the EVALSHA that admit's Take sends with a bare go-redis client (retries
// off, default pool).
func BenchmarkGoRedis(b *testing.B) {
	srv := redistest.Start(b)
	sha, argv := takeCommand(b, srv)
	args := make([]any, len(argv))
	for i, a := range argv {
		args[i] = a
	}
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
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
