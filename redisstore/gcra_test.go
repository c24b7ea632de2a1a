package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
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

func gcraLimit(rate int64, period time.Duration, burst int64) admit.Limit {
	return admit.Limit{Name: "g", Algorithm: admit.GCRA, Rate: rate, Period: period, Burst: burst}
}

// gcraLimits are Limits at GCRA's bounds and between them.
var gcraLimits = []admit.Limit{
	gcraLimit(3, 30*time.Second, 0),                                          // T = 10 s
	gcraLimit(3, 10*time.Second, 0),                                          // T = 3,333,334 µs: rounded up
	gcraLimit(1, time.Minute, 5),                                             // a burst above the rate
	gcraLimit(10, time.Second, 1),                                            // a burst below the rate
	gcraLimit(1000, time.Millisecond, 7),                                     // T = 1 µs
	gcraLimit(250_000, time.Second, bound.MaxRate),                           // T = 4 µs, τ = 4·10^15 µs: a TAT near 2^53
	gcraLimit(1, bound.MaxPeriod, int64(bound.MaxTolerance/bound.MaxPeriod)), // T = 366 days, τ just under 2^52 µs
	gcraLimit(bound.MaxPeriod.Microseconds(), bound.MaxPeriod, 1_000_000),    // the highest rate
}

// The script decides as internal/algo, the executable spec, at a fixed time, on every state a key
// may hold: missing, emptied, part-full, full, and every corrupt shape; for a request with an override
// key, a TAT too far ahead or expiring too late is a full bucket (the clamp), the rest as without. Each probe pipelines SET, PTTL
// and the script, so the script sees the expiry algo is given (a margin of 50 ms keeps the cases at a
// bound on their side of it); an admission must write exactly algo's TAT with the expiry GCRAExpiry
// gives, and anything else must leave the key byte for byte as it was.
func TestGCRAScriptAgreesWithAlgo(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	c := srv.Client(t)
	ctx := context.Background()
	const margin = 50 // ms
	if _, err := s.takeAt(ctx, []admit.Request{{Key: newKey(t), Limit: gcraLimits[0]}}, make([]admit.Decision, 1), time.Now()); err != nil {
		t.Fatal(err) // loads the test assembly
	}
	r := rand.New(rand.NewPCG(7, 8))
	seen := map[string]int{}
	for _, lim := range gcraLimits {
		if err := lim.Validate(); err != nil {
			t.Fatal(err)
		}
		interval := lim.EmissionInterval().Microseconds()
		tolerance := lim.Capacity() * interval
		maxTTL := algo.GCRAExpiry(tolerance).Milliseconds()
		at := time.Now().UnixMicro()
		type state struct {
			name  string
			value string // "" with ttl 0: no key
			ttl   int64  // PX in ms; 0 for none
			typ   string // "list" or "hash" for a key of another type
		}
		tat := func(offset int64) string { return strconv.FormatInt(at+offset, 10) }
		// A state corrupt whatever its expiry gets a long one, so that it cannot expire between the
		// DUMPs before and after the script.
		const longTTL = 60_000
		const shortExpiry = 50 // ms: a state that may expire while the pipeline runs on a busy machine
		expiry := func(offset int64) int64 { return algo.GCRAExpiry(max(offset, 0)).Milliseconds() }
		states := []state{
			{name: "missing"},
			{"emptied long ago", tat(-5_000_000), expiry(0), ""},
			{"emptied now", tat(0), expiry(0), ""},
			{"1 µs ahead", tat(1), expiry(1), ""},
			{"a third full", tat(tolerance / 3), expiry(tolerance / 3), ""},
			{"one interval short of full", tat(tolerance - interval), expiry(tolerance - interval), ""},
			{"full", tat(tolerance), expiry(tolerance), ""},
			{"TAT 1", "1", expiry(0), ""},
			{"corrupt: beyond full", tat(tolerance + 1), expiry(tolerance), ""},
			{"corrupt: no expiry", tat(interval), 0, ""},
			{"corrupt: expiry beyond a full bucket", tat(interval), maxTTL + margin, ""},
			{"corrupt: text", "abc", longTTL, ""},
			{"corrupt: float", tat(1) + ".5", longTTL, ""},
			{"corrupt: zero", "0", longTTL, ""},
			{"corrupt: negative", "-" + tat(0), longTTL, ""},
			{"corrupt: leading zero", "0" + tat(1), longTTL, ""},
			{"corrupt: exponent", "1e15", longTTL, ""},
			{"corrupt: empty", "", longTTL, ""},
			{"corrupt: 2^53", strconv.FormatInt(algo.MaxTAT+1, 10), longTTL, ""},
			{"corrupt: 17 digits", "10000000000000000", longTTL, ""},
			{"corrupt: list", "1", longTTL, "list"},
			{"corrupt: hash", "1", longTTL, "hash"},
		}
		for _, st := range states {
			for i, n := range []int64{0, 1, lim.Capacity(), 1 + r.Int64N(lim.Capacity()), 0, 1, lim.Capacity()} {
				ov := i >= 4 // a request with an override key (no Override stored): the clamp
				name := fmt.Sprintf("%v, %s, cost %d, override key %v", lim, st.name, n, ov)
				attempt := 1
			again: // a state of a short expiry that expired before the script: the case again
				key := newKey(t)
				rs := []admit.Request{{Key: key, Limit: lim, Cost: n}}
				if ov {
					rs[0].OverrideKey = overrideKeyOf("test", key)
				}
				keys, args := testArgs(rs)
				args = append(args, strconv.FormatInt(at, 10))
				var cmds rueidis.Commands
				switch {
				case st.name == "missing":
				case st.typ == "list":
					cmds = append(cmds, c.B().Arbitrary("RPUSH", key, st.value).Build(), c.B().Arbitrary("PEXPIRE", key, strconv.FormatInt(st.ttl, 10)).Build())
				case st.typ == "hash":
					cmds = append(cmds, c.B().Arbitrary("HSET", key, "tat", st.value).Build(), c.B().Arbitrary("PEXPIRE", key, strconv.FormatInt(st.ttl, 10)).Build())
				case st.ttl == 0:
					cmds = append(cmds, c.B().Arbitrary("SET", key, st.value).Build())
				default:
					cmds = append(cmds, c.B().Arbitrary("SET", key, st.value, "PX", strconv.FormatInt(st.ttl, 10)).Build())
				}
				cmds = append(cmds, c.B().Pttl().Key(key).Build(), c.B().Arbitrary("DUMP", key).Build(),
					c.B().Evalsha().Sha1(testTakeScript.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build(),
					c.B().Get().Key(key).Build(), c.B().Pttl().Key(key).Build(), c.B().Arbitrary("DUMP", key).Build())
				res := c.DoMulti(ctx, cmds...)
				res = res[len(res)-6:]
				ttl, err := res[0].AsInt64()
				if err != nil {
					t.Fatalf("%s: PTTL: %v", name, err)
				}
				dumpBefore, _ := res[1].ToString()
				var ds [1]admit.Decision
				msg, err := res[2].ToMessage()
				if err == nil {
					_, err = parseTake(msg, rs, ds[:], make([]uint64, bound.MaxRequests))
				} else {
					err = scriptError(err)
				}
				after, _ := res[3].ToString()
				ttlAfter, _ := res[4].AsInt64()
				dumpAfter, _ := res[5].ToString()

				// What algo makes of the same state.
				var want error
				stored := int64(0)
				switch {
				case ttl == -2: // missing (or expired before the script: decided as missing either way)
				case st.typ != "":
					want = errors.New("another type")
				default:
					v, perr := strconv.ParseInt(st.value, 10, 64)
					if perr != nil || st.value != strconv.FormatInt(v, 10) {
						v = -1 // not a plain decimal integer
					}
					want = algo.CheckGCRA(algo.GCRAState{TAT: v, TTL: time.Duration(ttl) * time.Millisecond}, at, lim)
					stored = v
					if ov && (errors.Is(want, algo.ErrTATTooFar) || errors.Is(want, algo.ErrTATExpiryTooLong)) {
						want, stored = nil, at+tolerance // clamped: a full bucket (docs/redis.md, "Overrides")
						seen["clamped"]++
					}
				}
				if want != nil && err == nil && ttl >= 0 && ttl < shortExpiry && attempt < 5 {
					// The pipeline ran on a busy machine: its state, of an expiry of a few
					// milliseconds, may have expired between its PTTL and the script, which then
					// decided a missing key. The case again, on a new key.
					t.Logf("%s: attempt %d: decided as missing a state of PTTL %d ms: again", name, attempt, ttl)
					attempt++
					goto again
				}
				if want != nil {
					seen["corrupt"]++
					if !errors.Is(err, admit.ErrCorruptState) {
						t.Errorf("%s: algo says corrupt (%v); the script: %+v, %v", name, want, ds[0], err)
					}
					if dumpAfter != dumpBefore && ttlAfter != -2 { // -2: it expired by itself (a short expiry)
						t.Errorf("%s: the corrupt key was changed", name)
					}
					continue
				}
				seen["decided"]++
				w := algo.GCRA(stored, at, lim, n)
				d := ds[0]
				if err != nil || d.Allowed != w.Allowed || d.Remaining != w.Remaining || d.RetryAfter != w.RetryAfter || d.ResetAfter != w.ResetAfter {
					t.Errorf("%s: script %+v, %v; algo %+v", name, d, err, w)
					continue
				}
				if !w.Write {
					if dumpAfter != dumpBefore {
						t.Errorf("%s: a rejection or a peek changed the key", name)
					}
					continue
				}
				seen["written"]++
				wantTTL := algo.GCRAExpiry(w.TAT - at).Milliseconds()
				if after != strconv.FormatInt(w.TAT, 10) || ttlAfter > wantTTL || ttlAfter < wantTTL-margin {
					t.Errorf("%s: the admission wrote %q with PTTL %d; want %d with PTTL %d", name, after, ttlAfter, w.TAT, wantTTL)
				}
				if ttlAfter == wantTTL {
					seen["expiry exact"]++ // PTTL read in the millisecond of the write
				}
			}
		}
	}
	if seen["corrupt"] == 0 || seen["decided"] == 0 || seen["written"] == 0 {
		t.Errorf("cases by outcome %v; want corrupt, decided and written ones", seen)
	}
	// The pipelined PTTL mostly runs in the millisecond of the write, and then sees the whole expiry:
	// a script that wrote a millisecond less would never show it.
	if seen["expiry exact"] < seen["written"]/2 {
		t.Errorf("%d of %d admissions showed PTTL = GCRAExpiry right after the write; want most", seen["expiry exact"], seen["written"])
	}
	if seen["clamped"] == 0 {
		t.Error("no state was clamped under an override key")
	}
	t.Logf("cases by outcome: %v", seen)
}

// The script accepts exactly the GCRA Limits and costs that Go accepts: its bounds (interval ≥ 1 µs,
// rounding under 1%, burst × interval ≤ 2^52 µs, cost ≤ burst) are Go's, rendered.
func TestGCRAScriptBoundsAreGos(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	r := rand.New(rand.NewPCG(9, 10))
	lims := append([]admit.Limit(nil), gcraLimits...)
	for _, l := range []admit.Limit{
		gcraLimit(1001, time.Millisecond, 0), gcraLimit(300_000, time.Second, 0), gcraLimit(999, time.Millisecond, 0),
		gcraLimit(1, time.Second, 4_503_599_628), gcraLimit(1, time.Second, 4_503_599_627), gcraLimit(1, time.Minute, 75_059_994),
		gcraLimit(3, time.Millisecond, 0), gcraLimit(7, time.Millisecond, 0), gcraLimit(1, time.Millisecond, 1),
	} {
		lims = append(lims, l)
	}
	for range 300 {
		p := time.Duration(1+r.Int64N(bound.MaxPeriod.Milliseconds())) * time.Millisecond
		rate := 1 + r.Int64N(2*p.Microseconds())
		if r.IntN(2) == 0 {
			rate = 1 + r.Int64N(1000)
		}
		lims = append(lims, gcraLimit(rate, p, r.Int64N(1<<uint(r.IntN(50)))))
	}
	accepted, refused := 0, 0
	for _, lim := range lims {
		for _, cost := range []int64{lim.Capacity(), lim.Capacity() + 1} {
			rq := admit.Request{Key: newKey(t), Limit: lim, Cost: cost}
			goErr := rq.Validate()
			if lim.Validate() != nil && (lim.Rate < 1 || lim.Rate > bound.MaxRate || lim.Burst < 0 || lim.Burst > bound.MaxRate) {
				continue // arguments the script cannot be sent as Go sends them
			}
			keys, args := testArgs([]admit.Request{rq})
			_, err := s.run(context.Background(), takeScript, keys, args)
			switch {
			case goErr == nil && err != nil:
				t.Errorf("%v, cost %d: the script refuses it (%v); Go accepts it", lim, cost, err)
			case goErr != nil && !errors.Is(err, admit.ErrInvalidRequest):
				t.Errorf("%v, cost %d: the script: %v; want ErrInvalidRequest, as Go refuses it (%v)", lim, cost, err, goErr)
			case goErr == nil:
				accepted++
			default:
				refused++
			}
		}
	}
	if accepted < 50 || refused < 50 {
		t.Errorf("%d accepted and %d refused; want many of each", accepted, refused)
	}
}

// memstore and the script decide the same random sequences of one to three GCRA policies at once,
// any cost, peeks, rejections, at the same fixed times — memstore on a fake clock, Redis through the
// test assembly — with identical Decisions, to the millisecond. The intervals are long (10 s and more)
// so that no key's real expiry in Redis passes during the test.
func TestGCRAMemstoreAgreesWithRedis(t *testing.T) {
	srv := redistest.Start(t)
	rs := openPatient(t, srv.URL())
	start := time.Unix(1_800_000_000, 0)
	clock := limittest.NewClock(start)
	ms := memstore.New(memstore.Options{Now: clock.Now})
	t.Cleanup(func() { ms.Close() })
	r := rand.New(rand.NewPCG(11, 12))
	lims := []admit.Limit{
		gcraLimit(3, 30*time.Second, 0),
		gcraLimit(7, time.Minute+3*time.Millisecond, 12), // T = 8,571,858 µs: rounded up
		gcraLimit(50, time.Hour, 5),
	}
	seen := map[string]int{}
	slot := newKey(t)
	for step := range 1500 {
		if step%300 == 0 {
			slot = newKey(t)
		}
		clock.Advance(time.Duration(r.Int64N(20_000_000)) * time.Microsecond)
		var req []admit.Request
		for _, p := range r.Perm(3)[:1+r.IntN(3)] {
			lim := lims[p]
			cost := r.Int64N(lim.Capacity() + 1)
			if r.IntN(4) == 0 {
				cost = min(1, cost)
			}
			req = append(req, admit.Request{Key: slot + ":p" + strconv.Itoa(p), Limit: lim, Cost: cost})
		}
		dm, dr := make([]admit.Decision, len(req)), make([]admit.Decision, len(req))
		am, em := ms.TakeAll(context.Background(), req, dm)
		ar, er := rs.takeAt(context.Background(), req, dr, clock.Now())
		if em != nil || er != nil || am != ar {
			t.Fatalf("step %d, %+v: memstore %v, %v; redis %v, %v", step, req, am, em, ar, er)
		}
		for i := range dm {
			if dm[i] != dr[i] {
				t.Fatalf("step %d, policy %d of %+v: memstore %+v; redis %+v", step, i, req, dm[i], dr[i])
			}
		}
		if am {
			seen["allowed"]++
		} else {
			seen["rejected"]++
		}
	}
	if seen["allowed"] < 100 || seen["rejected"] < 100 {
		t.Errorf("steps by outcome %v; want many of each", seen)
	}
	t.Logf("steps by outcome: %v", seen)
}

// G2 for GCRA: rejections and peeks issue no write — no keyspace event, an identical DUMP, an
// unextended TTL.
func TestGCRARejectionsAreReadOnly(t *testing.T) {
	srv := redistest.Start(t, "--notify-keyspace-events", "KA")
	s := openPatient(t, srv.URL())
	key := newKey(t)
	marker := key + ":marker"
	lim := gcraLimit(3, time.Minute, 0)
	take(t, s, key, lim, 3)
	dumpBefore, err := srv.Do(t, "DUMP", key).ToString()
	if err != nil {
		t.Fatal(err)
	}
	ttlBefore := pttl(t, srv, key)
	events := watchKeyspace(t, srv, key, marker)
	for range 50 {
		if d := take(t, s, key, lim, 1); d.Allowed {
			t.Fatal("a request on a full bucket was allowed")
		}
		take(t, s, key, lim, 0)
	}
	if got := events.until(t, marker); len(got) != 0 {
		t.Fatalf("rejections and peeks caused keyspace events %v, want none", got)
	}
	if dumpAfter, _ := srv.Do(t, "DUMP", key).ToString(); dumpAfter != dumpBefore {
		t.Fatal("DUMP of the key changed after rejections")
	}
	if ttlAfter := pttl(t, srv, key); ttlAfter > ttlBefore {
		t.Fatalf("PTTL grew from %d to %d after rejections", ttlBefore, ttlAfter)
	}
}

// An admission writes one key: the TAT as a decimal string of Unix microseconds, with an expiry just
// after it — what docs/gcra.md shows.
func TestGCRAStateInRedis(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	key := newKey(t)
	lim := gcraLimit(10, time.Second, 20) // T = 100 ms
	before := time.Now().UnixMicro()
	if d := take(t, s, key, lim, 5); !d.Allowed || d.Remaining != 15 || d.ResetAfter != 500*time.Millisecond {
		t.Fatalf("Take(5) = %+v; want allowed, 15 remaining, ResetAfter 500ms", d)
	}
	after := time.Now().UnixMicro()
	v, ttl := state(t, srv, key)
	tat, err := strconv.ParseInt(v, 10, 64)
	if err != nil || tat < before+500_000 || tat > after+500_000 {
		t.Fatalf("the key holds %q; want the TAT, now + 500 ms in Unix µs, within [%d, %d]", v, before+500_000, after+500_000)
	}
	if ttl <= 0 || ttl > 501 {
		t.Fatalf("PTTL %d; want the 500 ms to the TAT, and at most 1 ms more", ttl)
	}
}

// A request with an ID is replayed under GCRA too, whatever its ResetAfter: a bucket that takes two
// years to empty is recorded and replayed, not called corrupt.
func TestGCRAReplayOfALongReset(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	lim := gcraLimit(1, bound.MaxPeriod, 2) // τ = 732 days
	rs := []admit.Request{{Key: newKey(t), Limit: lim, Cost: 2, ID: "long"}}
	first, again := make([]admit.Decision, 1), make([]admit.Decision, 1)
	if allowed, err := s.TakeAll(context.Background(), rs, first); err != nil || !allowed || first[0].ResetAfter != 2*bound.MaxPeriod {
		t.Fatalf("first: %v, %v, %+v; want allowed, ResetAfter %v", allowed, err, first[0], 2*bound.MaxPeriod)
	}
	if allowed, err := s.TakeAll(context.Background(), rs, again); err != nil || !allowed || !again[0].Replayed || again[0].ResetAfter != first[0].ResetAfter {
		t.Fatalf("retry: %v, %v, %+v; want the first Decision replayed", allowed, err, again[0])
	}
}
