package redisstore

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/redistest"
)

// The concurrency module in Redis, at fixed times (takeAt) an hour or more ahead of the real clock,
// as the sliding modules are tested: its stored leases, exactly; the script against internal/algo;
// corrupt state; and Release.

// leaseSet reads a concurrency key's sorted set as leases, ordered by expiry and then token, and its
// PTTL.
func leaseSet(t *testing.T, srv *redistest.Server, key string) ([]algo.Lease, int64) {
	t.Helper()
	zs, err := srv.Do(t, "ZRANGE", key, "0", "-1", "WITHSCORES").AsZScores()
	if err != nil {
		t.Fatalf("ZRANGE %s: %v", key, err)
	}
	var leases []algo.Lease
	for _, z := range zs {
		tok, err := strconv.ParseUint(z.Member, 10, 64)
		if err != nil || float64(int64(z.Score)) != z.Score {
			t.Fatalf("lease %q scored %v: not a token and an integer expiry", z.Member, z.Score)
		}
		leases = append(leases, algo.Lease{Token: tok, Expiry: int64(z.Score)})
	}
	return sorted(leases), pttl(t, srv, key)
}

// sorted returns a copy of leases ordered by expiry and then token, as ZRANGE orders members of one
// score.
func sorted(leases []algo.Lease) []algo.Lease {
	return slices.SortedFunc(slices.Values(leases), func(a, b algo.Lease) int {
		if a.Expiry != b.Expiry {
			return cmp.Compare(a.Expiry, b.Expiry)
		}
		return cmp.Compare(a.Token, b.Token)
	})
}

// The script decides as algo.Concurrency does, on random sequences of acquires, peeks and releases
// at random times, and stores exactly the leases the transition keeps.
func TestConcurrencyScriptAgreesWithAlgo(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		lim := admit.Limit{Algorithm: admit.Concurrency, Rate: 1 + rng.Int64N(4), Period: time.Duration(1+rng.IntN(500)) * time.Millisecond}
		key := newKey(t)
		at := time.Now().Add(time.Hour).UnixMicro() + rng.Int64N(1000)
		var model []algo.Lease
		for step := range 40 {
			at += rng.Int64N(lim.Period.Microseconds() / 2)
			if len(model) > 0 && rng.IntN(4) == 0 {
				tok := model[rng.IntN(len(model))].Token
				if err := s.Release(context.Background(), admit.Lease{Key: key, Limit: lim, Token: tok}); err != nil {
					t.Fatal(err)
				}
				model, _ = algo.RemoveLease(model, tok)
				continue
			}
			n := rng.Int64N(2)
			res := algo.Concurrency(model, at, lim.Rate, lim.Period, n)
			d := mustTakeAt(t, s, admit.Request{Key: key, Limit: lim, Cost: n}, at)
			want := admit.Decision{Allowed: res.Allowed, Limit: lim, Remaining: res.Remaining, RetryAfter: res.RetryAfter, ResetAfter: res.ResetAfter, Token: d.Token}
			if d != want || (res.Write != algo.WriteNone) != (d.Token != 0) {
				t.Fatalf("round %d, step %d: take %d under %v on %v at %d = %+v; want %+v", round, step, n, lim, model, at, d, want)
			}
			if res.Write != algo.WriteNone {
				model = algo.AddLease(model, res.Trim, algo.Lease{Token: d.Token, Expiry: res.Expiry})
			}
			got, ttl := leaseSet(t, srv, key)
			if len(model) == 0 {
				continue // a missing key; an emptied one is deleted by ZREM
			}
			if !slices.Equal(got, sorted(model)) || ttl <= 0 {
				t.Fatalf("round %d, step %d: stored %v (PTTL %d); want %v with an expiry", round, step, got, ttl, model)
			}
		}
	}
}

// An admission removes the expired leases and sets the key to expire with its last lease; a
// rejection removes nothing, not even expired leases, and leaves the key byte for byte.
func TestConcurrencyStateInRedis(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	lim := admit.Limit{Algorithm: admit.Concurrency, Rate: 2, Period: 10 * time.Second}
	key := newKey(t)
	at := time.Now().Add(time.Hour).UnixMicro()
	a := mustTakeAt(t, s, admit.Request{Key: key, Limit: lim, Cost: 1}, at)
	b := mustTakeAt(t, s, admit.Request{Key: key, Limit: lim, Cost: 1}, at+4_000_000)
	leases, _ := leaseSet(t, srv, key)
	if want := []algo.Lease{{Token: a.Token, Expiry: at + 10_000_000}, {Token: b.Token, Expiry: at + 14_000_000}}; !slices.Equal(leases, want) {
		t.Fatalf("leases %v; want %v", leases, want)
	}
	expireAt, err := srv.Do(t, "PEXPIRETIME", key).AsInt64()
	if err != nil || expireAt != (at+14_000_000+999)/1000 {
		t.Fatalf("PEXPIRETIME %d, %v; want the last lease's expiry, %d ms", expireAt, err, (at+14_000_000+999)/1000)
	}
	// At 12 s, the first lease has expired: a peek and a rejection under a limit of 1 leave it.
	one := lim
	one.Rate = 1
	before := dump(t, srv, key)
	if d := mustTakeAt(t, s, admit.Request{Key: key, Limit: one, Cost: 1}, at+12_000_000); d.Allowed || d.RetryAfter != 2*time.Second {
		t.Fatalf("take under a limit of 1 with one live lease: %+v; want rejected for 2s", d)
	}
	if d := mustTakeAt(t, s, admit.Request{Key: key, Limit: lim, Cost: 0}, at+12_000_000); !d.Allowed || d.Remaining != 1 || d.ResetAfter != 2*time.Second {
		t.Fatalf("peek with one live lease: %+v; want 1 left, ResetAfter 2s", d)
	}
	if dump(t, srv, key) != before {
		t.Fatal("a rejection or a peek changed the key")
	}
	// An admission removes it.
	c := mustTakeAt(t, s, admit.Request{Key: key, Limit: lim, Cost: 1}, at+12_000_000)
	leases, _ = leaseSet(t, srv, key)
	if want := []algo.Lease{{Token: b.Token, Expiry: at + 14_000_000}, {Token: c.Token, Expiry: at + 22_000_000}}; !slices.Equal(leases, want) {
		t.Fatalf("after an admission at 12s: leases %v; want %v", leases, want)
	}
}

// G3 for concurrency: state no script writes is an error, and left byte for byte, by Take and
// by Release.
func TestConcurrencyCorruptStateIsAnErrorAndLeftAlone(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	lim := admit.Limit{Algorithm: admit.Concurrency, Rate: 3, Period: time.Minute}
	now := time.Now()
	soon := strconv.FormatInt(now.Add(30*time.Second).UnixMicro(), 10)
	expire := []string{"PEXPIRE", "KEY", "60000"}
	many := []string{"ZADD", "KEY"}
	for i := range bound.MaxConcurrency + 1 {
		many = append(many, soon, strconv.FormatInt(i+1, 10))
	}
	for name, setup := range map[string][][]string{
		"string":                 {{"SET", "KEY", "1", "PX", "60000"}},
		"hash":                   {{"HSET", "KEY", "a", "1"}, expire},
		"member not a token":     {{"ZADD", "KEY", soon, "x"}, expire},
		"member 0":               {{"ZADD", "KEY", soon, "0"}, expire},
		"member above 2^64-1":    {{"ZADD", "KEY", soon, "18446744073709551616"}, expire},
		"member with a sign":     {{"ZADD", "KEY", soon, "+7"}, expire},
		"fractional score":       {{"ZADD", "KEY", soon + ".5", "7"}, expire},
		"negative score":         {{"ZADD", "KEY", "-5", "7"}, expire},
		"lease beyond MaxPeriod": {{"ZADD", "KEY", strconv.FormatInt(now.Add(bound.MaxPeriod+time.Hour).UnixMicro(), 10), "7"}, expire},
		"too many leases":        {many, expire},
		"no expiry":              {{"ZADD", "KEY", soon, "7"}},
	} {
		t.Run(name, func(t *testing.T) {
			key := newKey(t)
			setUp(t, srv, key, setup)
			before, ttl := dump(t, srv, key), pttl(t, srv, key)
			for _, n := range []int64{1, 0} {
				d, err := s.Take(context.Background(), admit.Request{Key: key, Limit: lim, Cost: n})
				if !errors.Is(err, admit.ErrCorruptState) || d.Allowed || d.Token != 0 {
					t.Fatalf("Take(cost %d) = %+v, %v; want an error matching ErrCorruptState", n, d, err)
				}
			}
			err := s.Release(context.Background(), admit.Lease{Key: key, Limit: lim, Token: 1 << 62}) // held by none
			wrongType := name == "string" || name == "hash"
			if wrongType != errors.Is(err, admit.ErrCorruptState) || !wrongType && err != nil {
				t.Fatalf("Release = %v; want ErrCorruptState for a key that is not a sorted set, else nil (a token it does not hold)", err)
			}
			if dump(t, srv, key) != before {
				t.Fatal("the corrupt key was changed")
			}
			if after := pttl(t, srv, key); after > ttl || (ttl == -1) != (after == -1) {
				t.Fatalf("PTTL went from %d to %d", ttl, after)
			}
		})
	}
}

// Defence in depth, for the concurrency module and the release script: arguments that slip past Go's validation
// are refused before any write.
func TestConcurrencyScriptsRefuseInvalidArguments(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	key := newKey(t)
	for name, args := range map[string][]string{
		"cost 2":            {"1", "", "", "concurrency", "3", "60000", "2", "7"},
		"no token":          {"1", "", "", "concurrency", "3", "60000", "1", "0"},
		"token for a peek":  {"1", "", "", "concurrency", "3", "60000", "0", "7"},
		"token not decimal": {"1", "", "", "concurrency", "3", "60000", "1", "0x7"},
		"token above 2^64":  {"1", "", "", "concurrency", "3", "60000", "1", "18446744073709551616"},
		"limit above max":   {"1", "", "", "concurrency", strconv.FormatInt(bound.MaxConcurrency+1, 10), "60000", "1", "7"},
		"missing token":     {"1", "", "", "concurrency", "3", "60000", "1"},
		"lease TTL of 0 ms": {"1", "", "", "concurrency", "3", "0", "1", "7"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := s.run(context.Background(), takeScript, []string{key}, args); !errors.Is(err, admit.ErrInvalidRequest) {
				t.Fatalf("take %v: %v; want ErrInvalidRequest", args, err)
			}
		})
	}
	for name, args := range map[string][]string{
		"token 0":         {"0"},
		"token text":      {"x"},
		"two tokens":      {"7", "8"},
		"token above max": {"18446744073709551616"},
	} {
		t.Run("release/"+name, func(t *testing.T) {
			if _, err := s.run(context.Background(), releaseScript, []string{key}, args); !errors.Is(err, admit.ErrInvalidRequest) {
				t.Fatalf("release %v: %v; want ErrInvalidRequest", args, err)
			}
		})
	}
	if n, err := srv.Do(t, "EXISTS", key).AsInt64(); err != nil || n != 0 {
		t.Fatalf("EXISTS after refused calls: %d, %v; want 0", n, err)
	}
}

// Release loads its script on NOSCRIPT, and releases exactly once.
func TestReleaseAfterScriptFlush(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	lim := admit.Limit{Algorithm: admit.Concurrency, Rate: 1, Period: time.Minute}
	key := newKey(t)
	d := take(t, s, key, lim, 1)
	if err := srv.Do(t, "SCRIPT", "FLUSH").Error(); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(context.Background(), admit.Lease{Key: key, Limit: lim, Token: d.Token}); err != nil {
		t.Fatalf("Release after SCRIPT FLUSH: %v", err)
	}
	if d := take(t, s, key, lim, 1); !d.Allowed {
		t.Fatalf("take after the release: %+v; want allowed", d)
	}
}

// Release of a Store whose Redis is gone fails fast, matching ErrUnavailable.
func TestReleaseUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	url := srv.URL()
	s := open(t, url)
	srv.Stop(t)
	lim := admit.Limit{Algorithm: admit.Concurrency, Rate: 1, Period: time.Minute}
	err := s.Release(context.Background(), admit.Lease{Key: newKey(t), Limit: lim, Token: 7})
	if !errors.Is(err, admit.ErrUnavailable) {
		t.Fatalf("Release with Redis gone: %v; want ErrUnavailable", err)
	}
}

// TestConcurrencyMemoryUsage logs the MEMORY USAGE of a concurrency key at a few lease counts, for
// docs/concurrency.md: the leases are written as the script writes them (a random token, an expiry in
// Unix µs), in batches, and one Take under the largest limit checks the key is a valid one. It
// asserts nothing about the sizes (docs/development.md).
func TestConcurrencyMemoryUsage(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	lim := admit.Limit{Algorithm: admit.Concurrency, Rate: bound.MaxConcurrency, Period: time.Minute}
	key := newKey(t)
	expiry := time.Now().Add(30 * time.Second).UnixMicro()
	held := int64(0)
	for _, n := range []int64{1, 10, 100, 128, 129, 1000, 10_000, bound.MaxConcurrency - 1} {
		for held < n {
			args := []string{"ZADD", key}
			for ; held < n && len(args) < 2002; held++ {
				args = append(args, strconv.FormatInt(expiry+held, 10), strconv.FormatUint(rand.Uint64()|1, 10))
			}
			srv.Do(t, args...)
		}
		srv.Do(t, "PEXPIRE", key, "60000")
		if d := take(t, s, key, lim, 0); d.Remaining != lim.Rate-n {
			t.Fatalf("%d leases written: peek %+v", n, d)
		}
		bytes, err := srv.Do(t, "MEMORY", "USAGE", key, "SAMPLES", "0").AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%6d leases: MEMORY USAGE %8d bytes (%d per lease)", n, bytes, bytes/n)
	}
	// The last lease, by the script itself.
	if d := take(t, s, key, lim, 1); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("the last lease: %+v", d)
	}
	bytes, _ := srv.Do(t, "MEMORY", "USAGE", key, "SAMPLES", "0").AsInt64()
	t.Logf("%6d leases: MEMORY USAGE %8d bytes (%d per lease)", bound.MaxConcurrency, bytes, bytes/bound.MaxConcurrency)
}
