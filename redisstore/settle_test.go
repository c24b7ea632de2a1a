package redisstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/limittest"
	"github.com/admit-dev/admit/memstore"
)

// testSettleScript is the settle script as a test assembles it: it reads the time, in Unix
// microseconds, from its last argument.
var testSettleScript = newScript("settle-test", assemble(settleSrc, true))

// settleAt is Settle with the time fixed at at, through testSettleScript.
func (s *Store) settleAt(ctx context.Context, res admit.Reservation, actual int64, at time.Time) (admit.Decision, error) {
	if err := res.Validate(actual); err != nil {
		return admit.Decision{}, err
	}
	keys, args := settleArgs(&res, actual)
	reply, err := s.run(ctx, testSettleScript, keys, append(args, strconv.FormatInt(at.UnixMicro(), 10)))
	if err != nil {
		return admit.Decision{}, err
	}
	return parseSettle(reply, res.Request.Limit)
}

// The Redis store and memstore, on one sequence of reservations and settlements at the same instants,
// make the same decisions: refunds, overruns, windows that end between a reservation and its
// settlement, several reservations in one microsecond (a sliding log's members of one time). Each
// store settles its own reservations, with its own tokens; an aligned window's tokens, its end in Unix
// milliseconds, are the same in both. (A fixed window from the first admission reads Redis's own clock
// through its TTL, so its time cannot be fixed: the conformance suite covers it.)
func TestSettleMemstoreAgreesWithRedis(t *testing.T) {
	srv := redistest.Start(t)
	rs := openPatient(t, srv.URL())
	ms := time.Millisecond
	for _, lim := range []admit.Limit{
		{Algorithm: admit.FixedWindow, Rate: 10, Period: 300 * ms, Aligned: true},
		{Algorithm: admit.SlidingWindow, Rate: 10, Period: 300 * ms},
		{Algorithm: admit.SlidingLog, Rate: 10, Period: 300 * ms},
		{Algorithm: admit.GCRA, Rate: 10, Period: 300 * ms, Burst: 6},
	} {
		t.Run(lim.String(), func(t *testing.T) {
			base := time.UnixMicro(aheadStart(time.Minute))
			clock := limittest.NewClock(base.Add(-time.Hour))
			mem := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
			t.Cleanup(func() { mem.Close() })
			r := rand.New(rand.NewPCG(7, uint64(lim.Algorithm)))
			key := newKey(t)
			type held struct{ mem, redis admit.Reservation }
			var reservations []held
			now := base
			outcomes := map[string]int{}
			for step := range 1500 {
				now = now.Add(time.Duration(r.IntN(11)) * ms) // 0 … 10 ms: some steps share an instant
				clock.Advance(now.Sub(clock.Now()))
				if len(reservations) == 0 || r.IntN(2) == 0 {
					n := 1 + r.Int64N(4)
					req := admit.Request{Key: key, Limit: lim, Cost: n}
					dm, em := mem.Take(context.Background(), req)
					var drs [1]admit.Decision
					_, er := rs.takeAt(context.Background(), []admit.Request{req}, drs[:], now)
					dr := drs[0]
					if em != nil || er != nil || dm.Allowed != dr.Allowed || dm.Remaining != dr.Remaining ||
						dm.RetryAfter != dr.RetryAfter || dm.ResetAfter != dr.ResetAfter || (dm.Token != 0) != (dr.Token != 0) {
						t.Fatalf("step %d: reserve %d: memstore %+v, %v; redis %+v, %v", step, n, dm, em, dr, er)
					}
					if lim.Aligned && dm.Token != dr.Token {
						t.Fatalf("step %d: an aligned window's tokens: memstore %d, redis %d; want both its end", step, dm.Token, dr.Token)
					}
					if dm.Allowed {
						reservations = append(reservations, held{admit.Reservation{Request: req, Token: dm.Token}, admit.Reservation{Request: req, Token: dr.Token}})
						outcomes["reserved"]++
					}
					continue
				}
				i := r.IntN(len(reservations))
				h := reservations[i]
				reservations = append(reservations[:i], reservations[i+1:]...)
				actual := r.Int64N(h.mem.Request.Cost + 4)
				dm, em := mem.Settle(context.Background(), h.mem, actual)
				dr, er := rs.settleAt(context.Background(), h.redis, actual, now)
				if em != nil || er != nil || dm != dr {
					t.Fatalf("step %d: settle %d reserved at %d: memstore %+v, %v; redis %+v, %v", step, h.mem.Request.Cost, actual, dm, em, dr, er)
				}
				switch {
				case actual < h.mem.Request.Cost:
					outcomes["refund"]++
				case actual > h.mem.Request.Cost && dm.Allowed:
					outcomes["overrun"]++
				case actual > h.mem.Request.Cost:
					outcomes["overrun cut short"]++
				}
				// The stores hold the same state: a peek of either says so.
				pm, err := takeOneAt(rs, key, lim, 0, now)
				if err != nil || dr.Allowed && (pm.Remaining != dr.Remaining || pm.ResetAfter != dr.ResetAfter) {
					t.Fatalf("step %d: a peek after settling: %+v, %v; the settlement said %+v", step, pm, err, dr)
				}
			}
			for _, o := range []string{"reserved", "refund", "overrun", "overrun cut short"} {
				if outcomes[o] == 0 {
					t.Errorf("outcomes %v: no %s", outcomes, o)
				}
			}
		})
	}
}

// G3 for settling: a key whose state no admit script writes is an error, and is left byte-for-byte
// unchanged, whatever the settlement.
func TestSettleCorruptStateIsLeftAlone(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	fw := admit.Limit{Algorithm: admit.FixedWindow, Rate: 10, Period: time.Minute}
	gc := admit.Limit{Algorithm: admit.GCRA, Rate: 10, Period: time.Minute}
	for _, tc := range []struct {
		name  string
		lim   admit.Limit
		setup [][]string // commands on the key, which is appended to each
	}{
		{"fixed_window_zero", fw, [][]string{{"SET", "0", "PX", "10000"}}},
		{"fixed_window_no_expiry", fw, [][]string{{"SET", "5"}}},
		{"fixed_window_text", fw, [][]string{{"SET", "five", "PX", "10000"}}},
		{"gcra_no_expiry", gc, [][]string{{"SET", strconv.FormatInt(time.Now().Add(time.Second).UnixMicro(), 10)}}},
		{"sliding_window_stray_field", admit.Limit{Algorithm: admit.SlidingWindow, Rate: 10, Period: time.Minute},
			[][]string{{"HSET", "start", "0", "prev", "0", "curr", "1", "x", "1"}, {"PEXPIRE", "60000"}}},
		{"sliding_log_future_entry", admit.Limit{Algorithm: admit.SlidingLog, Rate: 10, Period: time.Minute},
			[][]string{{"ZADD", "99999999999999999", "99999999999999999:1"}, {"PEXPIRE", "60000"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := newKey(t)
			for _, c := range tc.setup {
				args := append([]string{c[0], key}, c[1:]...)
				if err := srv.Do(t, args...).Error(); err != nil {
					t.Fatalf("%v: %v", args, err)
				}
			}
			before := dump(t, srv, key)
			for _, actual := range []int64{0, 2, 9} {
				res := admit.Reservation{Request: admit.Request{Key: key, Limit: tc.lim, Cost: 2}, Token: 1}
				d, err := s.Settle(context.Background(), res, actual)
				if !errors.Is(err, admit.ErrCorruptState) || d.Allowed {
					t.Fatalf("Settle at %d: %+v, %v; want ErrCorruptState", actual, d, err)
				}
			}
			if after := dump(t, srv, key); after != before {
				t.Fatal("settling changed corrupt state")
			}
		})
	}
}

// A fixed window's token is its key's absolute expiry, which admissions leave alone; a window started
// after the first one ended has another. The window is short, so an attempt that took half of it or
// more (a slow machine) says nothing and is made again on a fresh key.
func TestFixedWindowTokenIsTheWindowEnd(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 10, Period: 200 * time.Millisecond}
	var key string
	var first admit.Decision
	for attempt := 1; ; attempt++ {
		key = newKey(t)
		start := time.Now()
		first = take(t, s, key, lim, 2)
		second := take(t, s, key, lim, 3)
		at, err := srv.Do(t, "PEXPIRETIME", key).AsInt64()
		if time.Since(start) >= lim.Period/2 && attempt < 20 {
			continue // too slow to be sure the window outlived the two admissions and the read
		}
		if err != nil || first.Token == 0 || first.Token != second.Token || first.Token != uint64(at) {
			t.Fatalf("two admissions in one window: tokens %d and %d, PEXPIRETIME %d (%v); want all equal", first.Token, second.Token, at, err)
		}
		break
	}
	// Wait, patiently, for Redis to end the window, then start another.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if at, err := srv.Do(t, "PEXPIRETIME", key).AsInt64(); err == nil && at == -2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the window never ended")
		}
	}
	if third := take(t, s, key, lim, 1); third.Token <= first.Token {
		t.Fatalf("an admission in a later window: token %d; want after the first window's %d", third.Token, first.Token)
	}
}

// A sliding log's refund removes the members of the highest sequence numbers of its time, so that an
// admission later in the same microsecond numbers its own after those left: no member is overwritten,
// and every unit counts.
func TestSlidingLogRefundKeepsMembersUnique(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	lim := admit.Limit{Algorithm: admit.SlidingLog, Rate: 10, Period: time.Minute}
	key := newKey(t)
	at := time.UnixMicro(aheadStart(time.Minute) + 1234)
	var ds [1]admit.Decision
	req := admit.Request{Key: key, Limit: lim, Cost: 3}
	if _, err := s.takeAt(context.Background(), []admit.Request{req}, ds[:], at); err != nil || ds[0].Token != uint64(at.UnixMicro()) {
		t.Fatalf("reserve 3: %+v, %v; want the admission's time as the token", ds[0], err)
	}
	if d, err := s.settleAt(context.Background(), admit.Reservation{Request: req, Token: ds[0].Token}, 1, at); err != nil || d.Remaining != 9 {
		t.Fatalf("settle at 1: %+v, %v; want 9 left", d, err)
	}
	if d := mustTakeAt(t, s, admit.Request{Key: key, Limit: lim, Cost: 4}, at.UnixMicro()); !d.Allowed || d.Remaining != 5 {
		t.Fatalf("take 4 in the same microsecond: %+v; want 5 left", d)
	}
	members, err := srv.Do(t, "ZRANGE", key, "0", "-1").AsStrSlice()
	if err != nil || len(members) != 5 {
		t.Fatalf("the log holds %v (%v); want 5 members", members, err)
	}
	want := map[string]bool{}
	for i := 1; i <= 5; i++ {
		want[strconv.FormatInt(at.UnixMicro(), 10)+":"+strconv.Itoa(i)] = true
	}
	for _, m := range members {
		if !want[m] {
			t.Fatalf("the log holds %v; want <t>:1 … <t>:5", members)
		}
	}
}

// A settlement that changes nothing writes nothing — no keyspace event but Redis's own expiries, the
// same DUMP: one at the reserved cost, an overrun on a full key (of a minute, which nothing drains
// meanwhile), a refund whose window (of 50 ms) the key no longer holds.
func TestSettleWritesNothingWhenNothingChanges(t *testing.T) {
	srv := redistest.Start(t, "--notify-keyspace-events", "KA")
	s := openPatient(t, srv.URL())
	for _, lim := range []admit.Limit{
		{Algorithm: admit.FixedWindow, Rate: 3, Period: 50 * time.Millisecond},
		{Algorithm: admit.FixedWindow, Rate: 3, Period: 50 * time.Millisecond, Aligned: true},
		{Algorithm: admit.SlidingWindow, Rate: 3, Period: 50 * time.Millisecond},
		{Algorithm: admit.SlidingLog, Rate: 3, Period: 50 * time.Millisecond},
		{Algorithm: admit.GCRA, Rate: 3, Period: 60 * time.Millisecond},
	} {
		t.Run(lim.String(), func(t *testing.T) {
			full, replaced := newKey(t), newKey(t)
			long := lim
			long.Period = time.Minute
			reserve := func(key string, lim admit.Limit, n int64) admit.Reservation {
				d := take(t, s, key, lim, n)
				if !d.Allowed || d.Token == 0 {
					t.Fatalf("reserve %d: %+v", n, d)
				}
				return admit.Reservation{Request: admit.Request{Key: key, Limit: lim, Cost: n}, Token: d.Token}
			}
			old := reserve(replaced, lim, 2)
			time.Sleep(lim.MaxWait() + 10*time.Millisecond) // old's window is over, and weighs nothing
			take(t, s, replaced, lim, 1)
			res := reserve(full, long, 3)
			marker := full + ":marker"
			before := dump(t, srv, full) // replaced's may expire meanwhile: its events tell
			events := watchKeys(t, srv, marker, full, replaced)
			for _, c := range []struct {
				res    admit.Reservation
				actual int64
			}{{res, 3}, {res, 5}, {old, 0}} {
				if _, err := s.Settle(context.Background(), c.res, c.actual); err != nil {
					t.Fatalf("settle at %d: %v", c.actual, err)
				}
			}
			for _, e := range events.until(t, marker) {
				if e != "expired" {
					t.Fatalf("settlements that change nothing caused a keyspace event %q; want none", e)
				}
			}
			if dump(t, srv, full) != before {
				t.Fatal("settlements that change nothing changed the full key's DUMP")
			}
		})
	}
}
