package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/limittest"
	"github.com/admit-dev/admit/memstore"
)

// Aligned fixed windows, decided at fixed times through the test assembly (takeAt), so every figure
// is exact. The times lie in the future of the real clock: an aligned key expires at an absolute
// time (PXAT), which Redis's own clock must not have passed while the test runs.

// nextDay returns the next midnight UTC after now: a multiple of every window up to a day.
func nextDay() time.Time {
	const day = 24 * time.Hour
	return time.UnixMilli((time.Now().UnixMilli()/day.Milliseconds() + 1) * day.Milliseconds()).UTC()
}

// takeOneAt decides one request at the fixed time at.
//
// The Decision it returns has no Token, but for a concurrency lease, so that tests compare it with
// algo's transitions, which make none; it fails instead when the script reported a token where it holds nothing, or none for an
// admission of n ≥ 1 (settle_test.go checks the tokens themselves).
func takeOneAt(s *Store, key string, lim admit.Limit, n int64, at time.Time) (admit.Decision, error) {
	var ds [1]admit.Decision
	_, err := s.takeAt(context.Background(), []admit.Request{{Key: key, Limit: lim, Cost: n}}, ds[:], at)
	if err == nil && (ds[0].Token != 0) != (ds[0].Allowed && n > 0) {
		return admit.Decision{}, fmt.Errorf("Take(n=%d) = %+v: a token exactly for an admission that consumed", n, ds[0])
	}
	if lim.Algorithm != admit.Concurrency {
		ds[0].Token = 0 // the tests of windows compare Decisions with internal/algo's, which have none
	}
	return ds[0], err
}

var alignedSecond = admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Second, Aligned: true}

func TestAlignedWindowAt(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	base := nextDay()
	a, b := newKey(t), newKey(t)
	ms, us := time.Millisecond, time.Microsecond
	for i, st := range []struct {
		at                     time.Duration // since base, a boundary
		key                    string
		n                      int64
		allowed                bool
		remaining              int64
		retryAfter, resetAfter time.Duration
	}{
		// The first admission 250 ms into a window gets its remaining 750 ms, not a whole second.
		{250 * ms, a, 1, true, 2, 0, 750 * ms},
		// Another key, started later in the same window, ends with it.
		{750 * ms, b, 3, true, 0, 0, 250 * ms},
		{750 * ms, a, 2, true, 0, 0, 250 * ms},
		// Redis counts whole milliseconds: 999.5 ms is in the millisecond 999, which the window still holds.
		{999*ms + 500*us, a, 1, false, 0, ms, ms},
		{999 * ms, b, 0, true, 0, 0, ms},
		// At the boundary both keys start afresh — though Redis has not yet expired them (their expiry
		// is the boundary, and the real clock is a day before it): 6 units within a millisecond.
		{time.Second, a, 3, true, 0, 0, time.Second},
		{time.Second, b, 0, true, 3, 0, 0},
		{time.Second, b, 3, true, 0, 0, time.Second},
		{1999 * ms, a, 1, false, 0, ms, ms},
		{2 * time.Second, a, 1, true, 2, 0, time.Second},
		// A key left alone for windows is missing, then starts in the window of now.
		{5*time.Second + 400*ms, b, 0, true, 3, 0, 0},
		{5*time.Second + 400*ms, b, 2, true, 1, 0, 600 * ms},
	} {
		d, err := takeOneAt(s, st.key, alignedSecond, st.n, base.Add(st.at))
		want := admit.Decision{Allowed: st.allowed, Limit: alignedSecond, Remaining: st.remaining, RetryAfter: st.retryAfter, ResetAfter: st.resetAfter}
		if err != nil || d != want {
			t.Fatalf("step %d, %v after a boundary: Take(n=%d) = %+v, %v; want %+v", i, st.at, st.n, d, err, want)
		}
	}
	// The key expires at its window's end, exactly: PEXPIRETIME is the boundary.
	for _, k := range []string{a, b} {
		want := map[string]int64{a: base.Add(3 * time.Second).UnixMilli(), b: base.Add(6 * time.Second).UnixMilli()}[k]
		if at, err := srv.Do(t, "PEXPIRETIME", k).AsInt64(); err != nil || at != want {
			t.Errorf("PEXPIRETIME = %d, %v; want the end of its window, %d", at, err, want)
		}
	}
}

// With Redis's own clock (the production script), an admission's key expires at a multiple of the
// window in Unix milliseconds, within one window of now, and ResetAfter is the time to that end.
func TestAlignedWindowOnRedisTime(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	for _, w := range []time.Duration{time.Millisecond, 7 * time.Millisecond, 1500 * time.Millisecond, time.Minute, time.Hour} {
		lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: w, Aligned: true}
		key := newKey(t)
		before := redisNow(t, srv)
		d := take(t, s, key, lim, 1)
		after := redisNow(t, srv)
		at, err := srv.Do(t, "PEXPIRETIME", key).AsInt64()
		switch {
		case err != nil:
			t.Fatalf("PEXPIRETIME: %v", err)
		case at == -2 && w < 10*time.Millisecond:
			continue // a window of a few ms may well have ended already
		case at%w.Milliseconds() != 0:
			t.Errorf("window %v: the key expires at %d ms, not a multiple of the window", w, at)
		case at <= before.UnixMilli() || at > after.UnixMilli()+w.Milliseconds():
			t.Errorf("window %v: the key expires at %d ms; want after %d and within a window of %d", w, at, before.UnixMilli(), after.UnixMilli())
		case d.ResetAfter < time.Duration(at-after.UnixMilli())*time.Millisecond || d.ResetAfter > time.Duration(at-before.UnixMilli())*time.Millisecond:
			t.Errorf("window %v: ResetAfter %v; want the time from the decision to the expiry at %d (Redis time %d … %d)", w, d.ResetAfter, at, before.UnixMilli(), after.UnixMilli())
		}
	}
}

// redisNow returns Redis's TIME.
func redisNow(t *testing.T, srv *redistest.Server) time.Time {
	t.Helper()
	v, err := srv.Do(t, "TIME").AsStrSlice()
	if err != nil || len(v) != 2 {
		t.Fatalf("TIME: %v, %v", v, err)
	}
	sec, err1 := strconv.ParseInt(v[0], 10, 64)
	usec, err2 := strconv.ParseInt(v[1], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("TIME: %v", v)
	}
	return time.UnixMicro(sec*1_000_000 + usec)
}

// The script decides aligned windows as internal/algo, the executable spec, on every state a key may
// hold at a fixed time: expiries before, at and after now, at and after the window's end, none.
func TestAlignedScriptAgreesWithAlgo(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	const w = 10 * time.Second
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 10, Period: w, Aligned: true}
	now := nextDay().Add(4 * time.Second) // 6 s before the window ends
	end := nextDay().Add(w)
	decided, corrupt, ended := 0, 0, 0
	for _, count := range []string{"1", "9", "10", "11", strconv.FormatInt(algo.MaxCount, 10), strconv.FormatInt(algo.MaxCount+1, 10), "0", "-1", "1.0", "x"} {
		for _, expiry := range []time.Time{{}, now.Add(-5 * time.Millisecond), now, now.Add(time.Millisecond), end.Add(-100 * time.Millisecond), end, end.Add(time.Millisecond), end.Add(w)} {
			for _, n := range []int64{0, 1, 2, 10} {
				name := fmt.Sprintf("count %s, expiry %v after now, cost %d", count, expiry.Sub(now), n)
				if expiry.IsZero() {
					name = fmt.Sprintf("count %s, no expiry, cost %d", count, n)
				}
				key := newKey(t)
				set := []string{"SET", key, count}
				if !expiry.IsZero() {
					set = append(set, "PXAT", strconv.FormatInt(expiry.UnixMilli(), 10))
				}
				if err := srv.Do(t, set...).Error(); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				d, err := takeOneAt(s, key, lim, n, now)

				v, perr := strconv.ParseInt(count, 10, 64)
				ttl := expiry.Sub(now)
				var st *algo.FixedWindowState
				var cerr error
				switch {
				case perr != nil || count != strconv.FormatInt(v, 10):
					cerr = algo.ErrCountOutOfRange // not a plain decimal integer
				case expiry.IsZero():
					cerr = algo.CheckAlignedWindow(algo.FixedWindowState{Count: v, TTL: -1}, w, now.UnixMicro())
				case ttl <= 0:
					cerr = algo.CheckAlignedWindow(algo.FixedWindowState{Count: v, TTL: time.Nanosecond}, w, now.UnixMicro())
					// An ended key is missing, unless its value could never have been written.
				default:
					st = &algo.FixedWindowState{Count: v, TTL: ttl}
					cerr = algo.CheckAlignedWindow(*st, w, now.UnixMicro())
				}
				if cerr != nil {
					if !errors.Is(err, admit.ErrCorruptState) {
						t.Errorf("%s: algo says corrupt (%v); the script: %+v, %v", name, cerr, d, err)
					}
					corrupt++
					continue
				}
				if st == nil {
					ended++
				}
				decided++
				want := algo.AlignedWindow(st, lim.Rate, w, now.UnixMicro(), n)
				got := admit.Decision{Allowed: want.Allowed, Limit: lim, Remaining: want.Remaining, RetryAfter: want.RetryAfter, ResetAfter: want.ResetAfter}
				if err != nil || d != got {
					t.Errorf("%s: script %+v, %v; algo %+v", name, d, err, want)
				}
			}
		}
	}
	if decided == 0 || corrupt == 0 || ended == 0 {
		t.Errorf("%d states decided (%d of them ended) and %d corrupt; want every kind", decided, ended, corrupt)
	}
}

// G3 for aligned windows: state no aligned window writes is an error, and it is left byte-for-byte
// unchanged, expiry included.
func TestAlignedCorruptStateIsLeftAlone(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	now := nextDay().Add(400 * time.Millisecond)
	end := nextDay().Add(time.Second).UnixMilli()
	pxat := func(d time.Duration) string { return strconv.FormatInt(end+d.Milliseconds(), 10) }
	for _, tc := range []struct {
		name  string
		setup [][]string // commands that build the state; KEY stands for the key
	}{
		{"text", [][]string{{"SET", "KEY", "abc", "PXAT", pxat(0)}}},
		{"zero", [][]string{{"SET", "KEY", "0", "PXAT", pxat(0)}}},
		{"no expiry", [][]string{{"SET", "KEY", "1"}}},
		{"persisted", [][]string{{"SET", "KEY", "2", "PXAT", pxat(0)}, {"PERSIST", "KEY"}}},
		{"expiry a millisecond after the window's end", [][]string{{"SET", "KEY", "1", "PXAT", pxat(time.Millisecond)}}},
		{"expiry an hour after it", [][]string{{"SET", "KEY", "1", "PXAT", pxat(time.Hour)}}},
		{"list", [][]string{{"RPUSH", "KEY", "1"}, {"PEXPIREAT", "KEY", pxat(0)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := newKey(t)
			for _, cmd := range tc.setup {
				args := append([]string(nil), cmd...)
				for i := range args {
					if args[i] == "KEY" {
						args[i] = key
					}
				}
				if err := srv.Do(t, args...).Error(); err != nil {
					t.Fatalf("%v: %v", args, err)
				}
			}
			before, _ := srv.Do(t, "DUMP", key).ToString()
			atBefore, _ := srv.Do(t, "PEXPIRETIME", key).AsInt64()
			for _, n := range []int64{1, 0, 3} {
				d, err := takeOneAt(s, key, alignedSecond, n, now)
				if !errors.Is(err, admit.ErrCorruptState) || d.Allowed {
					t.Fatalf("Take(n=%d) = %+v, %v; want an error matching ErrCorruptState", n, d, err)
				}
			}
			after, _ := srv.Do(t, "DUMP", key).ToString()
			atAfter, _ := srv.Do(t, "PEXPIRETIME", key).AsInt64()
			if after != before || atAfter != atBefore {
				t.Fatalf("the corrupt key changed: expiry %d → %d, DUMP equal %v", atBefore, atAfter, after == before)
			}
		})
	}
}

// memstore and redisstore decide the same random sequence of aligned requests at the same fixed
// times — whole milliseconds, which both count exactly — identically, ResetAfter included.
func TestAlignedMemstoreAgreesWithRedis(t *testing.T) {
	srv := redistest.Start(t)
	rs := openPatient(t, srv.URL())
	base := nextDay()
	clock := limittest.NewClock(base.Add(-time.Hour))
	ms := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	t.Cleanup(func() { ms.Close() })

	r := rand.New(rand.NewPCG(5, 6))
	keys := [3]string{newKey(t), newKey(t), newKey(t)}
	lims := [3]admit.Limit{
		{Algorithm: admit.FixedWindow, Rate: 5, Period: 100 * time.Millisecond, Aligned: true},
		{Algorithm: admit.FixedWindow, Rate: 20, Period: 1500 * time.Millisecond, Aligned: true},
		{Algorithm: admit.FixedWindow, Rate: 1, Period: 7 * time.Millisecond, Aligned: true},
	}
	now := base
	outcomes := map[string]int{}
	for step := range 3000 {
		now = now.Add(time.Duration(r.IntN(15)) * time.Millisecond)
		clock.Advance(now.Sub(clock.Now()))
		k := r.IntN(len(keys))
		n := r.Int64N(lims[k].Rate/2 + 2)
		req := admit.Request{Key: keys[k], Limit: lims[k], Cost: n}
		dm, em := ms.Take(context.Background(), req)
		var drs [1]admit.Decision
		_, er := rs.takeAt(context.Background(), []admit.Request{req}, drs[:], now)
		dr := drs[0]
		// Both stores' tokens of an aligned window are its end in Unix milliseconds: they agree too.
		if kind(em) != kind(er) || dm != dr {
			t.Fatalf("step %d, %v after a boundary, %+v: memstore %+v, %v; redis %+v, %v", step, now.Sub(base), req, dm, em, dr, er)
		}
		switch {
		case em != nil:
			outcomes[kind(em)]++
		case dm.Allowed:
			outcomes["allowed"]++
		default:
			outcomes["rejected"]++
		}
	}
	if outcomes["allowed"] < 100 || outcomes["rejected"] < 100 {
		t.Errorf("outcomes %v; want many of each", outcomes)
	}
}
