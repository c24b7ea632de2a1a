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
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/internal/slot"
	"github.com/admit-dev/admit/limittest"
	"github.com/admit-dev/admit/memstore"
)

// slotKeys returns n keys in one new hash slot, and a fixed-window Limit per minute of each rate.
func slotKeys(t *testing.T, rates ...int64) ([]string, []admit.Limit) {
	t.Helper()
	slot := newKey(t) // rl:test:v1:{…}
	keys := make([]string, len(rates))
	lims := make([]admit.Limit, len(rates))
	for i, r := range rates {
		keys[i] = slot + ":p" + strconv.Itoa(i)
		lims[i] = admit.Limit{Name: "p" + strconv.Itoa(i), Algorithm: admit.FixedWindow, Rate: r, Period: time.Minute}
	}
	return keys, lims
}

func requestsOf(keys []string, lims []admit.Limit, cost int64, id string) []admit.Request {
	rs := make([]admit.Request, len(keys))
	for i := range keys {
		rs[i] = admit.Request{Key: keys[i], Limit: lims[i], Cost: cost, ID: id}
	}
	return rs
}

// dumps returns the DUMP of each key.
func dumps(t *testing.T, srv *redistest.Server, keys []string) []string {
	t.Helper()
	out := make([]string, len(keys))
	for i, k := range keys {
		v, err := srv.Do(t, "DUMP", k).ToString()
		if err != nil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		out[i] = v
	}
	return out
}

// G2 across policies: a rejection by one of three policies writes nothing to any of the three keys
// — no keyspace event, identical DUMPs — and leaves no idempotency record.
func TestRejectionByOnePolicyWritesNothing(t *testing.T) {
	srv := redistest.Start(t, "--notify-keyspace-events", "KA")
	s := openPatient(t, srv.URL())
	keys, lims := slotKeys(t, 2, 5, 10)
	for range 2 {
		if allowed, err := s.TakeAll(context.Background(), requestsOf(keys, lims, 1, ""), make([]admit.Decision, 3)); err != nil || !allowed {
			t.Fatalf("filling p0: %v, %v", allowed, err)
		}
	}
	before := dumps(t, srv, keys)
	ttls := make([]int64, len(keys))
	for i, k := range keys {
		ttls[i] = pttl(t, srv, k)
	}
	marker := keys[0] + ":marker"
	events := watchKeys(t, srv, marker, keys...)
	for i := range 30 {
		id := ""
		if i%2 == 1 {
			id = "retry-" + strconv.Itoa(i)
		}
		ds := make([]admit.Decision, 3)
		allowed, err := s.TakeAll(context.Background(), requestsOf(keys, lims, 1, id), ds)
		if err != nil || allowed || ds[0].Allowed || !ds[1].Allowed || !ds[2].Allowed {
			t.Fatalf("a request that p0 alone rejects: %v, %v, %+v", allowed, err, ds)
		}
		if id != "" {
			if n, _ := srv.Do(t, "EXISTS", algo.RecordKey(keys[0], id)).AsInt64(); n != 0 {
				t.Fatal("a rejected request with an ID left a record")
			}
		}
	}
	if got := events.until(t, marker); len(got) != 0 {
		t.Fatalf("rejections caused keyspace events %v; want none", got)
	}
	after := dumps(t, srv, keys)
	for i := range keys {
		if after[i] != before[i] {
			t.Errorf("DUMP of %s changed after rejections", keys[i])
		}
		if ttl := pttl(t, srv, keys[i]); ttl > ttls[i] {
			t.Errorf("PTTL of %s grew from %d to %d", keys[i], ttls[i], ttl)
		}
	}
}

// Corrupt state under any one policy fails the whole request and writes nothing to the others; a
// corrupt record fails a request with its ID.
func TestCorruptStateInOnePolicy(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	keys, lims := slotKeys(t, 3, 3, 3)
	srv.Do(t, "SET", keys[1], "abc", "PX", "60000")
	for _, id := range []string{"", "with-id"} {
		_, err := s.TakeAll(context.Background(), requestsOf(keys, lims, 1, id), make([]admit.Decision, 3))
		if !errors.Is(err, admit.ErrCorruptState) {
			t.Fatalf("ID %q: TakeAll over a corrupt key: %v; want ErrCorruptState", id, err)
		}
	}
	for _, k := range []string{keys[0], keys[2]} {
		if n, _ := srv.Do(t, "EXISTS", k).AsInt64(); n != 0 {
			t.Fatalf("a failed request created %s", k)
		}
	}
	keys, lims = slotKeys(t, 3)
	srv.Do(t, "SET", algo.RecordKey(keys[0], "r1"), "not a record", "PX", "60000")
	if _, err := s.TakeAll(context.Background(), requestsOf(keys, lims, 1, "r1"), make([]admit.Decision, 1)); !errors.Is(err, admit.ErrCorruptState) {
		t.Fatalf("a request whose record is corrupt: %v; want ErrCorruptState", err)
	}
	srv.Do(t, "RPUSH", algo.RecordKey(keys[0], "r2"), "x")
	if _, err := s.TakeAll(context.Background(), requestsOf(keys, lims, 1, "r2"), make([]admit.Decision, 1)); !errors.Is(err, admit.ErrCorruptState) {
		t.Fatalf("a request whose record is a list: %v; want ErrCorruptState", err)
	}
	if n, _ := srv.Do(t, "EXISTS", keys[0]).AsInt64(); n != 0 {
		t.Fatal("a failed request created its key")
	}
}

// slot.Of is Redis Cluster's own: CLUSTER KEYSLOT agrees on random keys, braces included.
func TestSlotMatchesRedis(t *testing.T) {
	srv := redistest.Start(t, "--cluster-enabled", "yes")
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab{}{}:x\x00\xff"
	for i := range 500 {
		b := make([]byte, r.IntN(12))
		for j := range b {
			b[j] = alphabet[r.IntN(len(alphabet))]
		}
		key := string(b)
		if i < 3 {
			key = []string{"foo", "{user1000}.following", "rl:demo:v1-fw10000:{0123456789abcdef0123456789abcdef}"}[i]
		}
		want, err := srv.Do(t, "CLUSTER", "KEYSLOT", key).AsInt64()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", key, err)
		}
		if got := slot.Of(key); int64(got) != want {
			t.Errorf("Slot(%q) = %d; Redis says %d", key, got, want)
		}
	}
}

// The script decides as internal/algo, the executable spec, on every state a key may hold: valid
// counts and windows at their bounds, and every corrupt shape. Each probe pipelines PTTL and the
// script, so the script sees the TTL that algo is given (within the millisecond or two that may pass
// between them).
func TestScriptAgreesWithAlgo(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	c := srv.Client(t)
	const window = 60_000
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 10, Period: window * time.Millisecond}
	take(t, s, newKey(t), lim, 0) // loads the script
	decided, corrupt := 0, 0
	defer func() {
		if decided == 0 || corrupt == 0 {
			t.Errorf("%d states decided and %d corrupt; want both kinds", decided, corrupt)
		}
	}()
	for _, count := range []string{"1", "9", "10", "11", strconv.FormatInt(algo.MaxCount, 10), strconv.FormatInt(algo.MaxCount+1, 10), "0", "-1", "1.0", "x"} {
		for _, ttl := range []int64{-1, 1000, window, window + 50} { // +50: a millisecond passing cannot make it valid
			for _, n := range []int64{0, 1, 2, 10} {
				name := fmt.Sprintf("count %s, PTTL %d, cost %d", count, ttl, n)
				key := newKey(t)
				set := c.B().Arbitrary("SET", key, count).Build()
				if ttl > 0 {
					set = c.B().Arbitrary("SET", key, count, "PX", strconv.FormatInt(ttl, 10)).Build()
				}
				keys, args := testArgs([]admit.Request{{Key: key, Limit: lim, Cost: n}})
				res := c.DoMulti(context.Background(), set, c.B().Pttl().Key(key).Build(),
					c.B().Evalsha().Sha1(takeScript.sha).Numkeys(1).Key(keys...).Arg(args...).Build())
				seen, err := res[1].AsInt64()
				if err != nil {
					t.Fatalf("%s: PTTL: %v", name, err)
				}
				var ds [1]admit.Decision
				msg, err := res[2].ToMessage()
				if err == nil {
					_, err = parseTake(msg, []admit.Request{{Key: key, Limit: lim, Cost: n}}, ds[:], make([]uint64, bound.MaxRequests))
				} else {
					err = scriptError(err)
				}

				v, perr := strconv.ParseInt(count, 10, 64)
				st := algo.FixedWindowState{Count: v, TTL: time.Duration(seen) * time.Millisecond}
				cerr := algo.CheckFixedWindow(st, lim.Period)
				if perr != nil || count != strconv.FormatInt(v, 10) {
					cerr = algo.ErrCountOutOfRange // not a plain decimal integer
				}
				if seen == -1 && cerr == nil {
					cerr = algo.ErrNoExpiry
				}
				if cerr != nil {
					if !errors.Is(err, admit.ErrCorruptState) {
						t.Errorf("%s: algo says corrupt (%v); the script: %+v, %v", name, cerr, ds[0], err)
					}
					corrupt++
					continue
				}
				decided++
				want := algo.FixedWindow(&st, lim.Rate, lim.Period, n)
				d := ds[0]
				if err != nil || d.Allowed != want.Allowed || d.Remaining != want.Remaining {
					t.Errorf("%s: script %+v, %v; algo %+v", name, d, err, want)
					continue
				}
				for _, p := range [][2]time.Duration{{d.RetryAfter, want.RetryAfter}, {d.ResetAfter, want.ResetAfter}} {
					if p[0] > p[1] || p[0] < p[1]-5*time.Millisecond {
						t.Errorf("%s: script retry/reset %v, %v; algo %v, %v (within 5ms)", name, d.RetryAfter, d.ResetAfter, want.RetryAfter, want.ResetAfter)
					}
				}
			}
		}
	}
}

// memstore and redisstore decide the same random sequences of requests — one to three policies,
// any cost, peeks, IDs repeated or reused, invalid mixes of slots — identically: the same errors, the
// same Decisions (ResetAfter within the real time the sequence took, for Redis's clock runs).
func TestMemstoreAgreesWithRedis(t *testing.T) {
	srv := redistest.Start(t)
	rs := openPatient(t, srv.URL())
	clock := limittest.NewClock(time.Unix(1_700_000_000, 0))
	ms := memstore.New(memstore.Options{Now: clock.Now})
	t.Cleanup(func() { ms.Close() })
	start := time.Now()

	r := rand.New(rand.NewPCG(3, 4))
	slots := [2]string{newKey(t), newKey(t)}
	rates := []int64{5, 50, 500}
	var ids []string
	var last []admit.Request
	seen := map[string]int{}
	for step := range 2000 {
		if step%100 == 0 { // fresh keys now and then, so the sequence does not only fill them
			slots = [2]string{newKey(t), newKey(t)}
		}
		var req []admit.Request
		switch r.IntN(8) {
		case 0, 1: // a retry of the last request, or a reuse of an ID
			if last != nil && last[0].ID != "" {
				req = append([]admit.Request(nil), last...)
				break
			}
			fallthrough
		default:
			n := 1 + r.IntN(3)
			slot := slots[r.IntN(2)]
			id := ""
			switch r.IntN(4) {
			case 0:
				id = "id-" + strconv.Itoa(step)
				ids = append(ids, id)
			case 1:
				if len(ids) > 0 {
					id = ids[r.IntN(len(ids))] // most likely reused for another request
				}
			}
			for i, p := range r.Perm(3)[:n] {
				key := slot + ":p" + strconv.Itoa(p)
				if i > 0 && r.IntN(30) == 0 {
					key = slots[r.IntN(2)] + ":p" + strconv.Itoa(p) // sometimes another slot
				}
				lim := admit.Limit{Name: "p" + strconv.Itoa(p), Algorithm: admit.FixedWindow, Rate: rates[p], Period: time.Minute}
				cost := r.Int64N(lim.Rate/10 + 1)
				if r.IntN(20) == 0 {
					cost = lim.Rate // the bounds
				}
				req = append(req, admit.Request{Key: key, Limit: lim, Cost: cost, ID: id})
			}
		}
		last = req
		n := len(req)
		dm, dr := make([]admit.Decision, n), make([]admit.Decision, n)
		am, em := ms.TakeAll(context.Background(), req, dm)
		ar, er := rs.TakeAll(context.Background(), req, dr)
		if kind(em) != kind(er) || am != ar {
			t.Fatalf("step %d, %+v: memstore %v, %v; redis %v, %v", step, req, am, em, ar, er)
		}
		switch {
		case em != nil:
			seen[kind(em)]++
			continue
		case dm[0].Replayed:
			seen["replayed"]++
		case am:
			seen["allowed"]++
		default:
			seen["rejected"]++
		}
		slack := time.Since(start) + 5*time.Millisecond
		for i := range dm {
			m, d := dm[i], dr[i]
			if m.Allowed != d.Allowed || m.Remaining != d.Remaining || m.Replayed != d.Replayed || m.Limit != d.Limit {
				t.Fatalf("step %d, policy %d of %+v: memstore %+v; redis %+v", step, i, req, m, d)
			}
			if d.ResetAfter > m.ResetAfter || d.ResetAfter < m.ResetAfter-slack || d.RetryAfter > m.RetryAfter || d.RetryAfter < m.RetryAfter-slack {
				t.Fatalf("step %d, policy %d: memstore reset %v retry %v; redis reset %v retry %v (slack %v)", step, i, m.ResetAfter, m.RetryAfter, d.ResetAfter, d.RetryAfter, slack)
			}
		}
	}
	for _, k := range []string{"allowed", "rejected", "replayed", "invalid"} {
		if seen[k] < 10 {
			t.Errorf("the sequence had %d %s steps; want some of every kind (%v)", seen[k], k, seen)
		}
	}
	t.Logf("steps by outcome: %v", seen)
}

// kind names the class of err: nil, invalid, corrupt or unavailable.
func kind(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, admit.ErrInvalidLimit), errors.Is(err, admit.ErrInvalidRequest):
		return "invalid"
	case errors.Is(err, admit.ErrCorruptState):
		return "corrupt"
	}
	return "unavailable"
}
