package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/limittest"
	"github.com/admit-dev/admit/memstore"
)

// The sliding algorithms in Redis, at fixed times (takeAt): their stored state, exactly; the scripts
// against internal/algo on random states and against memstore on random requests; corrupt state;
// the window's bound against the log. Fixed times lie an hour or more ahead of the real clock:
// the scripts set expiries in absolute time (PEXPIREAT), and Redis would drop a key whose expiry
// has passed.

// aheadStart returns a Unix time in microseconds at least an hour ahead of now that starts a
// window of w.
func aheadStart(w time.Duration) int64 {
	W := w.Microseconds()
	return (time.Now().Add(time.Hour).UnixMicro()/W + 1) * W
}

// mustTakeAt decides r (without an ID) at Unix time at, in microseconds, with takeOneAt, and fails
// the test on an error.
func mustTakeAt(t *testing.T, s *Store, r admit.Request, at int64) admit.Decision {
	t.Helper()
	d, err := takeOneAt(s, r.Key, r.Limit, r.Cost, time.UnixMicro(at))
	if err != nil {
		t.Fatalf("take %d of %v at %d: %v", r.Cost, r.Limit, at, err)
	}
	return d
}

// setUp runs the commands of setup, each with the argument "KEY" replaced by key, and fails the test
// on an error.
func setUp(t *testing.T, srv *redistest.Server, key string, setup [][]string) {
	t.Helper()
	for _, cmd := range setup {
		args := slices.Clone(cmd)
		for i := range args {
			if args[i] == "KEY" {
				args[i] = key
			}
		}
		if err := srv.Do(t, args...).Error(); err != nil {
			t.Fatalf("%.5v: %v", args, err)
		}
	}
}

// dump returns the DUMP of key, or "" for no key.
func dump(t *testing.T, srv *redistest.Server, key string) string {
	t.Helper()
	v, err := srv.Do(t, "DUMP", key).ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		t.Fatalf("DUMP %s: %v", key, err)
	}
	return v
}

// windowApply makes the write of res on st, as a store does.
func windowApply(st *algo.SlidingWindowState, res algo.SlidingWindowResult, n int64) *algo.SlidingWindowState {
	switch res.Write {
	case algo.WriteCreate:
		s := res.State
		return &s
	case algo.WriteIncrement:
		return &algo.SlidingWindowState{Start: st.Start, Prev: st.Prev, Curr: st.Curr + n}
	}
	return st
}

// logApply makes the write of res for n units at now on log, as a store does.
func logApply(log []int64, res algo.SlidingLogResult, n, now int64) []int64 {
	if res.Write == algo.WriteNone {
		return log
	}
	return append(slices.Clone(log[res.Trim:]), slices.Repeat([]int64{now}, int(n))...)
}

// decisionOf returns the Decision that a result of algo reports.
func decisionOf(lim admit.Limit, allowed bool, remaining int64, retry, reset time.Duration) admit.Decision {
	return admit.Decision{Allowed: allowed, Limit: lim, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
}

// windowHash returns the sliding-window hash of key as algo's state, nil for no key, and its
// expiry time in Unix milliseconds.
func windowHash(t *testing.T, srv *redistest.Server, key string) (*algo.SlidingWindowState, int64) {
	t.Helper()
	h, err := srv.Do(t, "HGETALL", key).AsStrMap()
	if err != nil {
		t.Fatalf("HGETALL %s: %v", key, err)
	}
	if len(h) == 0 {
		return nil, 0
	}
	if len(h) != 3 {
		t.Fatalf("HGETALL %s = %v; want start, prev and curr", key, h)
	}
	var v [3]int64
	for i, f := range []string{"start", "prev", "curr"} {
		if v[i], err = strconv.ParseInt(h[f], 10, 64); err != nil {
			t.Fatalf("HGETALL %s = %v: %s: %v", key, h, f, err)
		}
	}
	at, err := srv.Do(t, "PEXPIRETIME", key).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return &algo.SlidingWindowState{Start: v[0] * 1000, Prev: v[1], Curr: v[2]}, at
}

// logSet returns the sliding-log sorted set of key, its scores as algo's log, after checking that
// every member is "<score>:<seq>" with seq numbering the units of one microsecond from 1; and its
// expiry time in Unix milliseconds.
func logSet(t *testing.T, srv *redistest.Server, key string) ([]int64, int64) {
	t.Helper()
	zs, err := srv.Do(t, "ZRANGE", key, "0", "-1", "WITHSCORES").AsZScores()
	if err != nil {
		t.Fatalf("ZRANGE %s: %v", key, err)
	}
	var log []int64
	seqs := map[int64][]int{}
	for _, z := range zs {
		score := int64(z.Score)
		at, seq, ok := strings.Cut(z.Member, ":")
		n, err := strconv.Atoi(seq)
		if !ok || at != strconv.FormatInt(score, 10) || err != nil || float64(score) != z.Score {
			t.Fatalf("ZRANGE %s: member %q scored %v; want \"<score>:<seq>\"", key, z.Member, z.Score)
		}
		log = append(log, score)
		seqs[score] = append(seqs[score], n)
	}
	for at, ns := range seqs {
		slices.Sort(ns)
		for i, n := range ns {
			if n != i+1 {
				t.Fatalf("ZRANGE %s: the members of %d number %v; want 1…%d", key, at, ns, len(ns))
			}
		}
	}
	exp, err := srv.Do(t, "PEXPIRETIME", key).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return log, exp
}

// The sliding window's hash, step by step at fixed times: three fields, HINCRBY within the window,
// the whole state anew with an expiry two windows after its start in a later one, nothing on a
// rejection or a peek; every Decision exactly algo's.
func TestSlidingWindowInRedis(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	const window = 10 * time.Second
	W := window.Microseconds()
	lim := admit.Limit{Algorithm: admit.SlidingWindow, Rate: 4, Period: window}
	start := aheadStart(window)
	key := newKey(t)
	var mirror *algo.SlidingWindowState
	for i, st := range []struct {
		at   time.Duration // since start
		n    int64
		want string // the Decision, briefly: allowed/rejected and remaining
	}{
		{2500 * time.Millisecond, 1, "allowed 3"},
		{2500 * time.Millisecond, 3, "allowed 0"},
		{2500 * time.Millisecond, 1, "rejected 0"},
		{12500 * time.Millisecond, 0, "allowed 1"},  // the 4 weigh ⌈4 × 3/4⌉ = 3
		{12500 * time.Millisecond, 1, "allowed 0"},  // rolls the hash: start 10 s, prev 4, curr 1
		{12500 * time.Millisecond, 1, "rejected 0"}, //
		{17500 * time.Millisecond, 2, "allowed 0"},  // ⌈4 × 1/4⌉ = 1, + 1 + 2
		{25*time.Second - time.Microsecond, 0, "allowed 2"},
		{25 * time.Second, 2, "allowed 0"},                   // the 3 of the last window weigh ⌈3 × 1/2⌉ = 2: rolls
		{40*time.Second - time.Microsecond, 4, "rejected 3"}, // the 2 weigh ⌈2 × 1µs/w⌉ = 1
		{40 * time.Second, 4, "allowed 0"},                   // two windows after: as missing
	} {
		now := start + st.at.Microseconds()
		res := algo.SlidingWindow(mirror, now, lim.Rate, window, st.n)
		want := decisionOf(lim, res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter)
		before := dump(t, srv, key)
		d := mustTakeAt(t, s, admit.Request{Key: key, Limit: lim, Cost: st.n}, now)
		if d != want {
			t.Fatalf("step %d (%v, n %d): %+v; algo %+v", i, st.at, st.n, d, want)
		}
		if got := map[bool]string{true: "allowed ", false: "rejected "}[d.Allowed] + strconv.FormatInt(d.Remaining, 10); got != st.want {
			t.Fatalf("step %d (%v, n %d): %s; want %s", i, st.at, st.n, got, st.want)
		}
		mirror = windowApply(mirror, res, st.n)
		if res.Write == algo.WriteNone {
			if after := dump(t, srv, key); after != before {
				t.Fatalf("step %d: a rejection or peek changed the key", i)
			}
			continue
		}
		got, exp := windowHash(t, srv, key)
		if got == nil || *got != *mirror || exp != (mirror.Start+2*W)/1000 {
			t.Fatalf("step %d: the hash holds %+v expiring at %d; want %+v expiring at %d, two windows after its start", i, got, exp, mirror, (mirror.Start+2*W)/1000)
		}
	}
}

// The sliding log's sorted set at fixed times: a member "<µs>:<seq>" per unit, unique across
// admissions in one microsecond and for a cost of several; entries that left the window trimmed by
// an admission only; the key expiring one window after the last admission; a rejection leaves it
// byte for byte and writes nothing.
func TestSlidingLogInRedis(t *testing.T) {
	srv := redistest.Start(t, "--notify-keyspace-events", "KA")
	s := openPatient(t, srv.URL())
	const window = 10 * time.Second
	W := window.Microseconds()
	lim := admit.Limit{Algorithm: admit.SlidingLog, Rate: 4, Period: window}
	t0 := aheadStart(window) + 1234
	key := newKey(t)
	var mirror []int64
	step := func(i int, now, n int64) admit.Decision {
		t.Helper()
		res := algo.SlidingLog(mirror, now, lim.Rate, window, n)
		d := mustTakeAt(t, s, admit.Request{Key: key, Limit: lim, Cost: n}, now)
		if want := decisionOf(lim, res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter); d != want {
			t.Fatalf("step %d (n %d at +%dµs): %+v; algo %+v", i, n, now-t0, d, want)
		}
		mirror = logApply(mirror, res, n, now)
		log, exp := logSet(t, srv, key)
		if !slices.Equal(log, mirror) {
			t.Fatalf("step %d: the log holds %v; want %v", i, log, mirror)
		}
		if res.Write != algo.WriteNone && exp != (now+W+999)/1000 {
			t.Fatalf("step %d: the log expires at %d; want %d, one window after the admission (rounded up to a millisecond)", i, exp, (now+W+999)/1000)
		}
		return d
	}
	step(0, t0, 2) // t0:1, t0:2
	step(1, t0, 1) // t0:3: the same microsecond
	if d := step(2, t0, 2); d.Allowed || d.RetryAfter != window {
		t.Fatalf("a cost of 2 with 3 of 4 logged: %+v; want rejected until the first admission's entries leave, a window from now", d)
	}
	step(3, t0+6_000_000, 1) // full: 4 in the window
	// 11 s on, t0's 3 entries have left and the one of 6 s remains: a cost of 4 is rejected, and the
	// rejection trims nothing.
	before := dump(t, srv, key)
	marker := key + ":marker"
	events := watchKeys(t, srv, marker, key)
	for i := range 10 {
		if d := step(4+i, t0+11_000_000, 4); d.Allowed || d.Remaining != 3 || d.RetryAfter != 5*time.Second {
			t.Fatalf("a cost of 4 with 1 of 4 in the window: %+v; want rejected, 3 left, until the entry of 6 s leaves in 5 s", d)
		}
		step(14+i, t0+11_000_000, 0)
	}
	if got := events.until(t, marker); len(got) != 0 {
		t.Fatalf("rejections and peeks caused keyspace events %v; want none", got)
	}
	if after := dump(t, srv, key); after != before {
		t.Fatal("rejections changed the log")
	}
	// An admission trims: t0's 3 entries go, 2 units are logged.
	step(30, t0+11_000_000, 2)
	if n, _ := srv.Do(t, "ZCARD", key).AsInt64(); n != 3 {
		t.Fatalf("after an admission 11 s on: %d entries; want 3 (the one of 6 s and 2 new)", n)
	}
}

// A sliding log at its largest rate: an admission of every unit at once logs 10,000 members, in
// batches the script's unpack can take, and the next admission finds them all.
func TestSlidingLogAtMaxRate(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	lim := admit.Limit{Algorithm: admit.SlidingLog, Rate: bound.MaxSlidingLogRate, Period: time.Minute}
	key := newKey(t)
	now := aheadStart(time.Minute)
	if d := mustTakeAt(t, s, admit.Request{Key: key, Limit: lim, Cost: lim.Rate - 1}, now); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("%d units at once: %+v", lim.Rate-1, d)
	}
	if d := mustTakeAt(t, s, admit.Request{Key: key, Limit: lim, Cost: 1}, now); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("the last unit: %+v", d)
	}
	if d := mustTakeAt(t, s, admit.Request{Key: key, Limit: lim, Cost: 1}, now+1); d.Allowed || d.RetryAfter != time.Minute {
		t.Fatalf("a unit more: %+v", d)
	}
	log, _ := logSet(t, srv, key)
	if int64(len(log)) != lim.Rate {
		t.Fatalf("%d entries; want %d", len(log), lim.Rate)
	}
}

// G3 for the sliding algorithms: state no script writes is an error, and left byte for byte.
func TestSlidingCorruptStateIsAnErrorAndLeftAlone(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	const window = time.Minute
	now := time.Now()
	start := strconv.FormatInt(now.UnixMilli()/window.Milliseconds()*window.Milliseconds(), 10) // this window's
	us := strconv.FormatInt(now.UnixMicro(), 10)
	entry := func(at string) []string { return []string{"ZADD", "KEY", at, at + ":1"} }
	many := []string{"ZADD", "KEY"}
	for i := range bound.MaxSlidingLogRate + 1 {
		at := strconv.FormatInt(now.UnixMicro()-int64(i), 10)
		many = append(many, at, at+":1")
	}
	expire := []string{"PEXPIRE", "KEY", "60000"}
	hset := func(fv ...string) []string { return append([]string{"HSET", "KEY"}, fv...) }
	for _, alg := range []struct {
		lim   admit.Limit
		cases map[string][][]string
	}{
		{admit.Limit{Algorithm: admit.SlidingWindow, Rate: 3, Period: window}, map[string][][]string{
			"string":               {{"SET", "KEY", "1", "PX", "60000"}},
			"sorted set":           {entry(us), expire},
			"missing field":        {hset("start", start, "curr", "1"), expire},
			"extra field":          {hset("start", start, "prev", "0", "curr", "1", "x", "1"), expire},
			"misspelt field":       {hset("start", start, "prev", "0", "cur", "1"), expire},
			"float":                {hset("start", start, "prev", "1.5", "curr", "1"), expire},
			"curr 0":               {hset("start", start, "prev", "0", "curr", "0"), expire},
			"negative prev":        {hset("start", start, "prev", "-1", "curr", "1"), expire},
			"above 10^15":          {hset("start", start, "prev", "0", "curr", "1000000000000001"), expire},
			"leading zero":         {hset("start", start, "prev", "00", "curr", "1"), expire},
			"text start":           {hset("start", "now", "prev", "0", "curr", "1"), expire},
			"start off the window": {hset("start", start+"1", "prev", "0", "curr", "1"), expire},
			"start in the future":  {hset("start", strconv.FormatInt(now.Add(10*window).UnixMilli()/60000*60000, 10), "prev", "0", "curr", "1"), expire},
			"no expiry":            {hset("start", start, "prev", "0", "curr", "1")},
		}},
		{admit.Limit{Algorithm: admit.SlidingLog, Rate: 3, Period: window}, map[string][][]string{
			"string":              {{"SET", "KEY", "1", "PX", "60000"}},
			"hash":                {hset("start", start, "prev", "0", "curr", "1"), expire},
			"member not a time":   {{"ZADD", "KEY", us, "x"}, expire},
			"member of seq 0":     {{"ZADD", "KEY", us, us + ":0"}, expire},
			"member of another":   {{"ZADD", "KEY", us, strconv.FormatInt(now.UnixMicro()-1, 10) + ":1"}, expire},
			"fractional score":    {{"ZADD", "KEY", us + ".5", us + ":1"}, expire},
			"negative score":      {{"ZADD", "KEY", "-5", "-5:1"}, expire},
			"entry in the future": {entry(strconv.FormatInt(now.Add(time.Hour).UnixMicro(), 10)), expire},
			"too many entries":    {many, expire},
			"no expiry":           {entry(us)},
		}},
	} {
		for name, setup := range alg.cases {
			t.Run(alg.lim.Algorithm.String()+"/"+name, func(t *testing.T) {
				key := newKey(t)
				setUp(t, srv, key, setup)
				before := dump(t, srv, key)
				ttl := pttl(t, srv, key)
				for _, n := range []int64{1, 0, 3} {
					d, err := s.Take(context.Background(), admit.Request{Key: key, Limit: alg.lim, Cost: n})
					if !errors.Is(err, admit.ErrCorruptState) || d.Allowed {
						t.Fatalf("Take(cost %d) = %+v, %v; want an error matching ErrCorruptState", n, d, err)
					}
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
}

// Defence in depth, for the sliding modules: arguments that slip past Go's validation are refused before any write.
func TestSlidingScriptsRefuseInvalidArguments(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	key := newKey(t)
	for _, argv := range [][]string{
		{"sliding_window", "0", "60000", "1"},
		{"sliding_window", "1000000000000001", "60000", "1"},
		{"sliding_window", "3", "0", "1"},
		{"sliding_window", "3", "31622400001", "1"},
		{"sliding_window", "3", "60000", "4"},
		{"sliding_window", "3", "60000", "-1"},
		{"sliding_window", "3", "60000"},
		{"sliding_log", "10001", "60000", "1"}, // above bound.MaxSlidingLogRate
		{"sliding_log", "0", "60000", "1"},
		{"sliding_log", "3", "0", "1"},
		{"sliding_log", "3", "60000", "4"},
		{"sliding_log", "3", "1.5", "1"},
		{"sliding_log", "3", "60000"},
	} {
		_, err := s.run(context.Background(), takeScript, []string{key}, append([]string{"1", ""}, argv...))
		if !errors.Is(err, admit.ErrInvalidRequest) {
			t.Errorf("ARGV %q: %v; want ErrInvalidRequest", argv, err)
		}
	}
	if n, _ := srv.Do(t, "EXISTS", key).AsInt64(); n != 0 {
		t.Fatal("a refused call created the key")
	}
}

// The sliding_window module decides as algo.SlidingWindow, exactly, on random states and times:
// counts up to 10^15 and windows up to 366 days, where the products reach 2^95 and the module's
// double arithmetic must still be exact; and it writes algo's state.
func TestSlidingWindowScriptAgreesWithAlgo(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	r := rand.New(rand.NewPCG(11, 12))
	seen := map[string]int{}
	for i := range 1500 {
		w := time.Duration(1+r.Int64N(120_000)) * time.Millisecond
		if i%4 == 0 {
			w = time.Duration(1+r.Int64N(bound.MaxPeriod.Milliseconds())) * time.Millisecond
		}
		W := w.Microseconds()
		limit := 1 + r.Int64N(20)
		if i%2 == 0 {
			limit = bound.MaxRate - r.Int64N(bound.MaxRate/2)
		}
		now := aheadStart(w) + r.Int64N(W)
		if i%10 == 0 {
			now -= now % W // a window's first microsecond
		}
		cur := now - now%W
		var st *algo.SlidingWindowState
		key := newKey(t)
		if r.IntN(6) != 0 {
			st = &algo.SlidingWindowState{Start: cur - W*r.Int64N(3), Prev: r.Int64N(limit + 1), Curr: 1 + r.Int64N(limit)}
			if r.IntN(4) == 0 {
				st.Prev, st.Curr = limit, limit
			}
			srv.Do(t, "HSET", key, "start", strconv.FormatInt(st.Start/1000, 10), "prev", strconv.FormatInt(st.Prev, 10), "curr", strconv.FormatInt(st.Curr, 10))
			srv.Do(t, "PEXPIRE", key, "86400000")
		}
		n := r.Int64N(limit + 1)
		lim := admit.Limit{Algorithm: admit.SlidingWindow, Rate: limit, Period: w}
		res := algo.SlidingWindow(st, now, limit, w, n)
		d := mustTakeAt(t, s, admit.Request{Key: key, Limit: lim, Cost: n}, now)
		if want := decisionOf(lim, res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter); d != want {
			t.Fatalf("%+v at %d (+%dµs), limit %d, n %d, window %v: script %+v; algo %+v", st, now, now-cur, limit, n, w, d, want)
		}
		seen[fmt.Sprint(res.Allowed, res.Write)]++
		if res.Write == algo.WriteNone {
			continue
		}
		want := windowApply(st, res, n)
		if got, exp := windowHash(t, srv, key); *got != *want || res.Write == algo.WriteCreate && exp != res.Expiry/1000 {
			t.Fatalf("%+v at %d, n %d, window %v: the script wrote %+v expiring at %d; algo %+v expiring at %d", st, now, n, w, got, exp, want, res.Expiry/1000)
		}
	}
	if len(seen) != 4 {
		t.Errorf("outcomes %v; want rejections, peeks, increments and new windows", seen)
	}
}

// The sliding_log module decides as algo.SlidingLog, exactly, on random logs and times, boundaries
// included, and writes algo's log.
func TestSlidingLogScriptAgreesWithAlgo(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	r := rand.New(rand.NewPCG(13, 14))
	seen := map[string]int{}
	for range 800 {
		w := time.Duration(1+r.Int64N(20_000)) * time.Millisecond
		W := w.Microseconds()
		now := aheadStart(w) + r.Int64N(W)
		key := newKey(t)
		var log []int64
		for range r.IntN(25) {
			at := now - r.Int64N(2*W)
			switch r.IntN(8) {
			case 0:
				at = now - W // left the window this microsecond
			case 1:
				at = now - W + 1 // its last microsecond in it
			case 2:
				at = now
			}
			log = append(log, at)
		}
		slices.Sort(log)
		if len(log) > 0 {
			seq := map[int64]int{}
			args := []string{"ZADD", key}
			for _, at := range log {
				seq[at]++
				args = append(args, strconv.FormatInt(at, 10), strconv.FormatInt(at, 10)+":"+strconv.Itoa(seq[at]))
			}
			srv.Do(t, args...)
			srv.Do(t, "PEXPIRE", key, "86400000")
		}
		limit := 1 + r.Int64N(20)
		n := r.Int64N(limit + 1)
		lim := admit.Limit{Algorithm: admit.SlidingLog, Rate: limit, Period: w}
		res := algo.SlidingLog(log, now, limit, w, n)
		d := mustTakeAt(t, s, admit.Request{Key: key, Limit: lim, Cost: n}, now)
		if want := decisionOf(lim, res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter); d != want {
			t.Fatalf("%v at %d, limit %d, n %d, window %v: script %+v; algo %+v", log, now, limit, n, w, d, want)
		}
		seen[fmt.Sprint(res.Allowed, res.Write, res.Trim > 0)]++
		got, _ := logSet(t, srv, key)
		if want := logApply(log, res, n, now); !slices.Equal(got, want) {
			t.Fatalf("%v at %d, n %d, window %v: the script left %v; algo %v", log, now, n, w, got, want)
		}
	}
	if len(seen) < 5 {
		t.Errorf("outcomes %v; want rejections, peeks, new logs, and appends with and without trimming", seen)
	}
}

// The sliding window stays within its documented bound against the sliding log (docs/sliding-window.md)
// in Redis: both keys take the same bursty traffic at fixed times; every Decision is algo's, the
// window's admissions never put more than limit + ⌊p·e/w⌋ ≤ 2·limit − 1 units in a window-long
// interval, and the log's never more than limit.
func TestSlidingWindowBoundAgainstLogInRedis(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	const limit, window = 10, time.Second
	W := window.Microseconds()
	swLim := admit.Limit{Algorithm: admit.SlidingWindow, Rate: limit, Period: window}
	slLim := admit.Limit{Algorithm: admit.SlidingLog, Rate: limit, Period: window}
	swKey, slKey := newKey(t), newKey(t)
	r := rand.New(rand.NewPCG(15, 16))
	now := aheadStart(window)
	var sw *algo.SlidingWindowState
	var swLog, slLog []int64
	in := func(log []int64, now int64) int64 { // entries in (now − w, now]
		return int64(len(log) - sort.Search(len(log), func(i int) bool { return log[i] > now-W }))
	}
	worst := int64(0)
	for i := range 1500 {
		switch r.IntN(20) {
		case 0:
			now += r.Int64N(2 * W)
		case 1, 2, 3:
			now += r.Int64N(W / 4)
		default:
			now += r.Int64N(W / 500)
		}
		n := int64(1)
		if r.IntN(4) == 0 {
			n += r.Int64N(3)
		}
		cur := now - now%W
		var p int64
		switch {
		case sw == nil:
		case sw.Start == cur:
			p = sw.Prev
		case sw.Start == cur-W:
			p = sw.Curr
		}
		e := now - cur
		res := algo.SlidingWindow(sw, now, limit, window, n)
		if d := mustTakeAt(t, s, admit.Request{Key: swKey, Limit: swLim, Cost: n}, now); d != decisionOf(swLim, res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter) {
			t.Fatalf("request %d: the window's script %+v; algo %+v", i, d, res)
		}
		sw = windowApply(sw, res, n)
		if res.Allowed {
			swLog = append(swLog, slices.Repeat([]int64{now}, int(n))...)
			held := in(swLog, now)
			if held > limit+p*e/W || held > 2*limit-1 {
				t.Fatalf("request %d: %d units admitted by the window in the last %v (p %d, e %dµs); want at most %d", i, held, window, p, e, limit+p*e/W)
			}
			worst = max(worst, held-limit)
		}
		lres := algo.SlidingLog(slLog, now, limit, window, n)
		if d := mustTakeAt(t, s, admit.Request{Key: slKey, Limit: slLim, Cost: n}, now); d != decisionOf(slLim, lres.Allowed, lres.Remaining, lres.RetryAfter, lres.ResetAfter) {
			t.Fatalf("request %d: the log's script %+v; algo %+v", i, d, lres)
		}
		slLog = logApply(slLog, lres, n, now)
		if in(slLog, now) > limit {
			t.Fatalf("request %d: the log holds %d units in the last %v", i, in(slLog, now), window)
		}
	}
	if worst <= 0 {
		t.Error("the window never admitted more than its limit in a window-long interval: the traffic does not test the bound")
	}
	t.Logf("the sliding window admitted at most %d units over its limit of %d in one window; the log none", worst, limit)
}

// memstore and redisstore decide the same random requests of sliding windows and logs — one to
// three policies, any cost, peeks, keys of two slots — identically, at the same fixed times.
func TestSlidingMemstoreAgreesWithRedis(t *testing.T) {
	srv := redistest.Start(t)
	rs := openPatient(t, srv.URL())
	clock := limittest.NewClock(time.UnixMicro(aheadStart(time.Hour) + 123_456))
	ms := memstore.New(memstore.Options{Now: clock.Now})
	t.Cleanup(func() { ms.Close() })
	r := rand.New(rand.NewPCG(17, 18))
	lims := []admit.Limit{
		{Name: "p0", Algorithm: admit.SlidingWindow, Rate: 5, Period: time.Second},
		{Name: "p1", Algorithm: admit.SlidingLog, Rate: 7, Period: 2 * time.Second},
		{Name: "p2", Algorithm: admit.SlidingWindow, Rate: 300, Period: 10 * time.Second},
		{Name: "p3", Algorithm: admit.SlidingLog, Rate: 20, Period: 700 * time.Millisecond},
	}
	slots := [2]string{newKey(t), newKey(t)}
	seen := map[string]int{}
	for step := range 2500 {
		if step%200 == 0 {
			slots = [2]string{newKey(t), newKey(t)}
		}
		switch r.IntN(10) {
		case 0:
			clock.Advance(time.Duration(r.Int64N(int64(3 * time.Second))))
		case 1, 2, 3:
			clock.Advance(time.Duration(r.Int64N(int64(100 * time.Millisecond))))
		}
		slot := slots[r.IntN(2)]
		var req []admit.Request
		for i, p := range r.Perm(len(lims))[:1+r.IntN(3)] {
			key := slot + ":p" + strconv.Itoa(p)
			if i > 0 && r.IntN(40) == 0 {
				key = slots[r.IntN(2)] + ":p" + strconv.Itoa(p)
			}
			cost := r.Int64N(lims[p].Rate/3 + 1)
			if r.IntN(20) == 0 {
				cost = lims[p].Rate
			}
			req = append(req, admit.Request{Key: key, Limit: lims[p], Cost: cost})
		}
		n := len(req)
		dm, dr := make([]admit.Decision, n), make([]admit.Decision, n)
		am, em := ms.TakeAll(context.Background(), req, dm)
		ar, er := rs.takeAt(context.Background(), req, dr, clock.Now())
		if kind(em) != kind(er) || am != ar {
			t.Fatalf("step %d, %+v: memstore %v, %v; redis %v, %v", step, req, am, em, ar, er)
		}
		switch {
		case em != nil:
			seen[kind(em)]++
			continue
		case am:
			seen["allowed"]++
		default:
			seen["rejected"]++
		}
		for i := range dm {
			if dm[i] != dr[i] {
				t.Fatalf("step %d, policy %d of %+v: memstore %+v; redis %+v", step, i, req, dm[i], dr[i])
			}
		}
	}
	for _, k := range []string{"allowed", "rejected", "invalid"} {
		if seen[k] < 10 {
			t.Errorf("the sequence had %d %s steps; want some of every kind (%v)", seen[k], k, seen)
		}
	}
	t.Logf("steps by outcome: %v", seen)
}

// G2 across algorithms: a rejection by a sliding log writes nothing to the fixed window and the
// sliding window decided with it, which would have admitted — no keyspace event, identical DUMPs.
func TestRejectionByOneAlgorithmWritesNothingToTheOthers(t *testing.T) {
	srv := redistest.Start(t, "--notify-keyspace-events", "KA")
	s := openPatient(t, srv.URL())
	slot := newKey(t)
	lims := []admit.Limit{
		{Name: "fw", Algorithm: admit.FixedWindow, Rate: 10, Period: time.Minute},
		{Name: "sw", Algorithm: admit.SlidingWindow, Rate: 10, Period: time.Minute},
		{Name: "sl", Algorithm: admit.SlidingLog, Rate: 2, Period: time.Minute},
	}
	keys := []string{slot + ":fw", slot + ":sw", slot + ":sl"}
	rs := requestsOf(keys, lims, 1, "")
	for range 2 {
		if allowed, err := s.TakeAll(context.Background(), rs, make([]admit.Decision, 3)); err != nil || !allowed {
			t.Fatalf("filling the log: %v, %v", allowed, err)
		}
	}
	before := dumps(t, srv, keys)
	marker := keys[0] + ":marker"
	events := watchKeys(t, srv, marker, keys...)
	for range 20 {
		ds := make([]admit.Decision, 3)
		allowed, err := s.TakeAll(context.Background(), rs, ds)
		if err != nil || allowed || !ds[0].Allowed || !ds[1].Allowed || ds[2].Allowed {
			t.Fatalf("a request the log alone rejects: %v, %v, %+v", allowed, err, ds)
		}
		if ds[0].Remaining != 8 || ds[1].Remaining != 8 {
			t.Fatalf("the window and the counter report %d and %d left; want 8 and 8, their keys as they are", ds[0].Remaining, ds[1].Remaining)
		}
	}
	if got := events.until(t, marker); len(got) != 0 {
		t.Fatalf("rejections caused keyspace events %v; want none", got)
	}
	for i, after := range dumps(t, srv, keys) {
		if after != before[i] {
			t.Errorf("DUMP of the %s key changed after rejections", lims[i].Name)
		}
	}
}

// A replayed sliding-window decision may report a ResetAfter up to two windows: at the longest
// window, more than MaxPeriod, which the record must still hold.
func TestSlidingWindowReplayOfTheLongestWindow(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	lim := admit.Limit{Algorithm: admit.SlidingWindow, Rate: 3, Period: bound.MaxPeriod}
	rs := []admit.Request{{Key: newKey(t), Limit: lim, Cost: 1, ID: "req-1"}}
	at := time.UnixMicro(aheadStart(time.Minute))
	first, again := make([]admit.Decision, 1), make([]admit.Decision, 1)
	if _, err := s.takeAt(context.Background(), rs, first, at); err != nil || first[0].ResetAfter <= bound.MaxPeriod {
		t.Fatalf("first: %+v, %v; want admitted with ResetAfter beyond MaxPeriod", first[0], err)
	}
	if _, err := s.takeAt(context.Background(), rs, again, at.Add(time.Second)); err != nil {
		t.Fatalf("retry: %v", err)
	}
	want := first[0]
	want.Replayed, want.Token = true, 0 // a replay holds nothing to settle
	if first[0].Token == 0 || again[0] != want {
		t.Fatalf("retry: %+v; want the first Decision replayed, %+v", again[0], want)
	}
}

// The sliding_window module's muldiv is exact where doubles are not: on random operands of both
// uses — ⌈p × (w − e)/w⌉ and ⌊r × w/p⌋, counts up to 10^15 and windows up to 366 days in
// microseconds, products up to 2^95 — it returns big.Int's quotient and remainder.
func TestSlidingWindowMulDivIsExact(t *testing.T) {
	srv := redistest.Start(t)
	src := constants() + "local CLOCK_FROM_ARGV = false\n" + integerSrc + preludeSrc + slidingWindowSrc + `
sliding_window_define()
local out = {}
for i = 1, #ARGV, 3 do
  local q, r = sliding_window.muldiv(tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]))
  out[#out + 1] = q
  out[#out + 1] = r
end
return out
`
	r := rand.New(rand.NewPCG(19, 20))
	maxW := bound.MaxPeriod.Microseconds()
	slow := 0
	for i := range 20 {
		var ops [][3]int64
		if i == 0 {
			// Operands whose quotient the doubles estimate one too low (and too high, below): found by
			// search, as random ones rarely are.
			ops = [][3]int64{
				{145154097126487, 2356664947440, 12307942681352},
				{756208263151844, 2904710226882, 3947260871657},
				{851849526686100, 3715019399482, 12149246976272},
				{989845260957429, 13609076301093, 14138286986002},
				{405533770005176, 4528416434486, 6824374662918},
			}
		}
		for range 1000 - len(ops) {
			W := 1 + r.Int64N(maxW)
			if r.IntN(2) == 0 {
				W = 1000 * (1 + r.Int64N(maxW/1000))
			}
			p := 1 + r.Int64N(bound.MaxRate)
			if r.IntN(2) == 0 { // the weight of the previous window: p × (w − e) / w
				ops = append(ops, [3]int64{p, 1 + r.Int64N(W), W})
			} else { // the wait: r × w / p, r < p
				ops = append(ops, [3]int64{r.Int64N(p), W, p})
			}
		}
		args := []string{"EVAL", src, "0"}
		for _, o := range ops {
			args = append(args, strconv.FormatInt(o[0], 10), strconv.FormatInt(o[1], 10), strconv.FormatInt(o[2], 10))
			if new(big.Int).Mul(big.NewInt(o[0]), big.NewInt(o[1])).Cmp(big.NewInt(1<<52)) >= 0 {
				slow++
			}
		}
		got, err := srv.Do(t, args...).AsIntSlice()
		if err != nil || len(got) != 2*len(ops) {
			t.Fatalf("EVAL: %v, %d values", err, len(got))
		}
		for i, o := range ops {
			q, m := new(big.Int).QuoRem(new(big.Int).Mul(big.NewInt(o[0]), big.NewInt(o[1])), big.NewInt(o[2]), new(big.Int))
			if got[2*i] != q.Int64() || got[2*i+1] != m.Int64() {
				t.Fatalf("muldiv(%d, %d, %d) = %d, %d; want %v, %v", o[0], o[1], o[2], got[2*i], got[2*i+1], q, m)
			}
		}
	}
	if slow < 10000 {
		t.Fatalf("%d of 20000 products at 2^52 or more; want most, to test the exact path", slow)
	}
}
