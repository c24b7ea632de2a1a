package limittest

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
)

// The cases of the request model that do not depend on one algorithm: several policies decided
// together (G2 of docs/guarantees.md), idempotent retries (docs/keys.md, "Idempotency records"), and the operations no algorithm supports yet.

// requestCases are run once, after every algorithm's.
var requestCases = []algorithmCase{
	{"MultiPolicy/AllOrNothing", testAllOrNothing},
	{"MultiPolicy/Concurrent", testMultiConcurrent},
	{"MultiPolicy/TakeIsTakeAllOfOne", testTakeIsTakeAllOfOne},
	{"MultiPolicy/Invalid", testMultiInvalid},
	{"MultiPolicy/Shadow/RejectsNothing", testShadowRejectsNothing},
	{"MultiPolicy/Shadow/AllShadow", testAllShadow},
	{"Tiers/ShapeDecidesTheCounter", testTierShapes},
	{"Idempotency/Replay", testReplay},
	{"Idempotency/ReplayOfSeveral", testReplayOfSeveral},
	{"Idempotency/ReuseIsInvalid", testIDReuse},
	{"Idempotency/RejectionIsNotRecorded", testRejectionNotRecorded},
	{"Idempotency/RecordExpires", testRecordExpires},
	{"Idempotency/ScopedToTheSlot", testIDScopedToSlot},
	{"Idempotency/Concurrent", testReplayConcurrent},
	{"MultiProcess", testProcesses},
}

// policies returns n fixed-window Limits of the given rates per minute, named p0, p1, …, and a key
// for each in one new hash slot.
func policies(rates ...int64) ([]admit.Limit, []string) {
	slot := newSlot()
	lims := make([]admit.Limit, len(rates))
	keys := make([]string, len(rates))
	for i, r := range rates {
		lims[i] = admit.Limit{Name: "p" + strconv.Itoa(i), Algorithm: admit.FixedWindow, Rate: r, Period: time.Minute}
		keys[i] = "rl:limittest:" + slot + ":p" + strconv.Itoa(i)
	}
	return lims, keys
}

// requests returns a Request of cost n and ID id for each key under its Limit.
func requests(lims []admit.Limit, keys []string, n int64, id string) []admit.Request {
	rs := make([]admit.Request, len(keys))
	for i := range keys {
		rs[i] = admit.Request{Key: keys[i], Limit: lims[i], Cost: n, ID: id}
	}
	return rs
}

// takeAllUnchecked calls s.TakeAll and fails the test on an error, without checking the Decisions
// as takeAll does (in a rejected request, a policy that would have admitted reports its key as it
// is, as a peek does, though its Request has a cost), and returns them.
func takeAllUnchecked(t *testing.T, s admit.Store, rs []admit.Request) (bool, []admit.Decision) {
	t.Helper()
	ds := make([]admit.Decision, len(rs))
	allowed, err := s.TakeAll(t.Context(), rs, ds)
	if err != nil {
		t.Fatalf("TakeAll of %d requests: unexpected error: %v", len(rs), err)
	}
	return allowed, ds
}

// takeAll calls s.TakeAll, fails the test on an error, checks that the result agrees with the
// Decisions and that each Decision keeps its invariants, and returns them.
func takeAll(t *testing.T, s admit.Store, rs []admit.Request) (bool, []admit.Decision) {
	t.Helper()
	allowed, ds := takeAllUnchecked(t, s, rs)
	all := true
	for i, d := range ds {
		all = all && (d.Allowed || rs[i].Limit.Shadow) // a shadow rejection rejects nothing
		if rs[i].ID == "" {
			checkDecision(t, d, rs[i].Limit, rs[i].Cost)
		} else if d.Limit != rs[i].Limit {
			t.Errorf("request %d: Decision.Limit = %+v; want %+v", i, d.Limit, rs[i].Limit)
		}
	}
	if allowed != all {
		t.Fatalf("TakeAll reported allowed %v; its Decisions say %v", allowed, all)
	}
	for i, d := range ds {
		if all && !d.Replayed {
			checkToken(t, d, rs[i].Cost)
		}
	}
	return allowed, ds
}

// remaining peeks every key and returns what each has left.
func remaining(t *testing.T, s admit.Store, lims []admit.Limit, keys []string) []int64 {
	t.Helper()
	_, ds := takeAll(t, s, requests(lims, keys, 0, ""))
	left := make([]int64, len(ds))
	for i, d := range ds {
		left[i] = d.Remaining
	}
	return left
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func testAllOrNothing(t *testing.T, b Backend) {
	s := b.Open(t)
	lims, keys := policies(2, 5, 10)
	for i, want := range [][]int64{{1, 4, 9}, {0, 3, 8}} {
		allowed, ds := takeAll(t, s, requests(lims, keys, 1, ""))
		if !allowed {
			t.Fatalf("take %d of 3 policies with room: rejected: %+v", i, ds)
		}
		if got := []int64{ds[0].Remaining, ds[1].Remaining, ds[2].Remaining}; !equal(got, want) {
			t.Fatalf("take %d: remaining %v; want %v", i, got, want)
		}
	}
	// p0 is full: every later request is rejected by p0 alone, and consumes nothing anywhere.
	for range 5 {
		allowed, ds := takeAll(t, s, requests(lims, keys, 1, ""))
		if allowed || ds[0].Allowed || !ds[1].Allowed || !ds[2].Allowed {
			t.Fatalf("take with p0 full: allowed %v, per policy %v %v %v; want only p0 rejecting", allowed, ds[0].Allowed, ds[1].Allowed, ds[2].Allowed)
		}
		if i := admit.Deciding(ds); i != 0 {
			t.Fatalf("Deciding = %d; want 0, the policy that rejected", i)
		}
		if ds[1].Remaining != 3 || ds[2].Remaining != 8 {
			t.Fatalf("take with p0 full: p1 and p2 report remaining %d and %d; want 3 and 8, their keys as they are (nothing was consumed)",
				ds[1].Remaining, ds[2].Remaining)
		}
	}
	if got := remaining(t, s, lims, keys); !equal(got, []int64{0, 3, 8}) {
		t.Fatalf("after 5 rejections by p0: remaining %v; want [0 3 8]: a rejection by one policy consumes nothing from the others", got)
	}
	// A cost that fits p0 no longer, p1 and p2 still: the same.
	rs := requests(lims, keys, 4, "")
	rs[0].Cost = 1
	if allowed, _ := takeAll(t, s, rs); allowed {
		t.Fatal("take with p0 full: allowed")
	}
	if got := remaining(t, s, lims, keys); !equal(got, []int64{0, 3, 8}) {
		t.Fatalf("after a rejection: remaining %v; want [0 3 8]", got)
	}
	// The other policies alone still admit.
	if allowed, _ := takeAll(t, s, requests(lims[1:], keys[1:], 3, "")); !allowed {
		t.Fatal("p1 and p2 without p0: rejected")
	}
	if got := remaining(t, s, lims, keys); !equal(got, []int64{0, 0, 5}) {
		t.Fatalf("remaining %v; want [0 0 5]", got)
	}
}

func testMultiConcurrent(t *testing.T, b Backend) {
	const goroutines = 40
	lims, keys := policies(3, 5)
	stores := [2]admit.Store{b.Open(t), b.Open(t)}
	admitted := raceCount(goroutines, func(i int) bool {
		ds := make([]admit.Decision, 2)
		allowed, err := stores[i%2].TakeAll(t.Context(), requests(lims, keys, 1, ""), ds)
		if err != nil {
			t.Errorf("TakeAll: %v", err)
			return false
		}
		return allowed
	})
	if admitted != 3 {
		t.Fatalf("%d goroutines took one unit of 3/min and 5/min together: %d admitted; want exactly 3", goroutines, admitted)
	}
	if got := remaining(t, stores[0], lims, keys); !equal(got, []int64{0, 2}) {
		t.Fatalf("remaining %v; want [0 2]: only the 3 admissions consumed", got)
	}
}

func testTakeIsTakeAllOfOne(t *testing.T, b Backend) {
	s := b.Open(t)
	lims, keys := policies(2)
	r := admit.Request{Key: keys[0], Limit: lims[0], Cost: 1}
	d1 := take(t, s, r.Key, r.Limit, 1)
	_, ds := takeAll(t, s, []admit.Request{r})
	d2 := ds[0]
	if !d1.Allowed || d1.Remaining != 1 || !d2.Allowed || d2.Remaining != 0 {
		t.Fatalf("Take then TakeAll of one: %+v, %+v; want remaining 1 then 0 on one counter", d1, d2)
	}
	if d := take(t, s, r.Key, r.Limit, 1); d.Allowed {
		t.Fatalf("a third take of 2/min: %+v", d)
	}
}

func testMultiInvalid(t *testing.T, b Backend) {
	s := b.Open(t)
	lims, keys := policies(3, 3)
	other := newKey() // in its own slot
	tooMany := make([]admit.Request, bound.MaxRequests+1)
	for i := range tooMany {
		tooMany[i] = admit.Request{Key: keys[0] + ":" + strconv.Itoa(i), Limit: lims[0], Cost: 1} // all in keys[0]'s slot
	}
	for _, tc := range []struct {
		name string
		rs   []admit.Request
		nds  int
	}{
		{"none", nil, 0},
		{"too_many", tooMany, len(tooMany)},
		{"duplicate_key", []admit.Request{{Key: keys[0], Limit: lims[0], Cost: 1}, {Key: keys[0], Limit: lims[1], Cost: 1}}, 2},
		{"two_slots", []admit.Request{{Key: keys[0], Limit: lims[0], Cost: 1}, {Key: other, Limit: lims[1], Cost: 1}}, 2},
		{"two_ids", []admit.Request{{Key: keys[0], Limit: lims[0], Cost: 1, ID: "a"}, {Key: keys[1], Limit: lims[1], Cost: 1, ID: "b"}}, 2},
		{"one_id", []admit.Request{{Key: keys[0], Limit: lims[0], Cost: 1, ID: "a"}, {Key: keys[1], Limit: lims[1], Cost: 1}}, 2},
		{"invalid_member", []admit.Request{{Key: keys[0], Limit: lims[0], Cost: 1}, {Key: keys[1], Limit: lims[1], Cost: 4}}, 2},
		{"decisions_short", requests(lims, keys, 1, ""), 1},
		{"id_too_long", requests(lims, keys, 1, strings.Repeat("i", bound.MaxIDLen+1)), 2},
		{"id_with_untaggable_key", []admit.Request{{Key: "rl:limittest:x}" + newKey(), Limit: lims[0], Cost: 1, ID: "a"}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := make([]admit.Decision, tc.nds)
			allowed, err := s.TakeAll(t.Context(), tc.rs, ds)
			if allowed || !errors.Is(err, admit.ErrInvalidRequest) || errors.Is(err, admit.ErrUnavailable) {
				t.Fatalf("TakeAll = %v, %v; want an error matching ErrInvalidRequest only", allowed, err)
			}
		})
	}
	// Nothing was written by any of them.
	if got := remaining(t, s, lims, keys); !equal(got, []int64{3, 3}) {
		t.Fatalf("after invalid requests: remaining %v; want [3 3]", got)
	}
	if d := take(t, s, other, lims[1], 0); d.Remaining != 3 {
		t.Fatalf("after invalid requests: %s has %d left; want 3", other, d.Remaining)
	}
}

// newID returns a request ID that no other subtest, test run or process uses.
func newID() string { return "id-" + newKey() }

// checkReplay fails t unless ds replays first: the same Decisions, each marked Replayed.
func checkReplay(t *testing.T, first, ds []admit.Decision) {
	t.Helper()
	for i := range ds {
		want := first[i]
		want.Replayed = true
		if want.Limit.Algorithm != admit.Concurrency {
			want.Token = 0 // a replay holds nothing to settle; a lease keeps the token the ID names
		}
		if ds[i] != want {
			t.Fatalf("retry, policy %d: %+v; want the first Decision, replayed: %+v", i, ds[i], want)
		}
	}
}

func testReplay(t *testing.T, b Backend) {
	s1, s2 := b.Open(t), b.Open(t)
	lims, keys := policies(3)
	id := newID()
	rs := requests(lims, keys, 2, id)
	allowed, first := takeAll(t, s1, rs)
	if !allowed || first[0].Replayed || first[0].Remaining != 1 {
		t.Fatalf("first request with an ID: %+v; want allowed, not replayed, remaining 1", first[0])
	}
	for _, s := range []admit.Store{s1, s2, s1} {
		allowed, ds := takeAll(t, s, rs)
		if !allowed {
			t.Fatal("a retry of an admitted request: rejected")
		}
		checkReplay(t, first, ds)
	}
	if d := take(t, s1, keys[0], lims[0], 0); d.Remaining != 1 {
		t.Fatalf("after 3 retries: remaining %d; want 1: a replay consumes nothing", d.Remaining)
	}
	// Take replays as TakeAll does.
	d, err := s2.Take(t.Context(), rs[0])
	if err != nil {
		t.Fatal(err)
	}
	checkReplay(t, first, []admit.Decision{d})
}

func testReplayOfSeveral(t *testing.T, b Backend) {
	s := b.Open(t)
	lims, keys := policies(3, 10)
	rs := requests(lims, keys, 1, newID())
	_, first := takeAll(t, s, rs)
	_, ds := takeAll(t, s, rs)
	checkReplay(t, first, ds)
	if got := remaining(t, s, lims, keys); !equal(got, []int64{2, 9}) {
		t.Fatalf("after a request and its retry: remaining %v; want [2 9]", got)
	}
}

func testIDReuse(t *testing.T, b Backend) {
	s := b.Open(t)
	lims, keys := policies(5, 5)
	id := newID()
	takeAll(t, s, requests(lims, keys, 1, id))
	for _, tc := range []struct {
		name string
		rs   []admit.Request
	}{
		{"other_cost", requests(lims, keys, 2, id)},
		{"fewer_policies", requests(lims[:1], keys[:1], 1, id)},
		{"other_limit", func() []admit.Request { rs := requests(lims, keys, 1, id); rs[1].Limit.Rate = 6; return rs }()},
		{"other_key", func() []admit.Request {
			rs := requests(lims, keys, 1, id)
			rs[1].Key += "x"
			return rs
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := make([]admit.Decision, len(tc.rs))
			allowed, err := s.TakeAll(t.Context(), tc.rs, ds)
			if allowed || !errors.Is(err, admit.ErrInvalidRequest) || errors.Is(err, admit.ErrUnavailable) {
				t.Fatalf("the ID of an admitted request reused for another: %v, %v; want ErrInvalidRequest, never the old answer", allowed, err)
			}
		})
	}
	if got := remaining(t, s, lims, keys); !equal(got, []int64{4, 4}) {
		t.Fatalf("after refused reuses: remaining %v; want [4 4]", got)
	}
}

func testRejectionNotRecorded(t *testing.T, b Backend) {
	const short = 200 * time.Millisecond
	s := b.Open(t)
	lims := []admit.Limit{
		{Name: "short", Algorithm: admit.FixedWindow, Rate: 1, Period: short},
		{Name: "long", Algorithm: admit.FixedWindow, Rate: 5, Period: time.Minute},
	}
	// The rejection comes within the short window of the admission.
	timed(t, b, short/2, func(tm *timing) {
		slot := newSlot()
		keys := []string{"rl:limittest:" + slot + ":short", "rl:limittest:" + slot + ":long"}
		tm.run(s, keys[0], lims[0], []step{{n: 1, allowed: true, remaining: 0, fresh: true}})
		rs := requests(lims, keys, 1, newID())
		var allowed bool
		var ds []admit.Decision
		tm.do(func() { allowed, ds = takeAll(t, s, rs) })
		if allowed || ds[0].Allowed || ds[0].Replayed {
			t.Fatalf("a request with an ID that the full short window rejects: %+v; want rejected", ds)
		}
		tm.sleep(short + short/4)
		// Its retry after Retry-After, within the long window, is decided afresh: admitted, not a
		// replayed 429.
		if allowed, ds := takeAll(t, s, rs); !allowed || ds[0].Replayed || ds[1].Replayed || ds[1].Remaining != 4 {
			t.Fatalf("the retry of a rejected request once the short window ended: %+v; want admitted afresh", ds)
		}
	})
}

func testRecordExpires(t *testing.T, b Backend) {
	const short, long = 100 * time.Millisecond, 400 * time.Millisecond
	s := b.Open(t)
	lims := []admit.Limit{
		{Name: "short", Algorithm: admit.FixedWindow, Rate: 5, Period: short},
		{Name: "long", Algorithm: admit.FixedWindow, Rate: 5, Period: long},
	}
	// The retry comes within the long window of the first request.
	timed(t, b, long/2, func(tm *timing) {
		slot := newSlot()
		keys := []string{"rl:limittest:" + slot + ":short", "rl:limittest:" + slot + ":long"}
		rs := requests(lims, keys, 1, newID())
		var first, ds []admit.Decision
		tm.do(func() { _, first = takeAll(t, s, rs) })
		tm.sleep(short + short/4)
		// Past the short window, within the long one: still a replay.
		tm.do(func() { _, ds = takeAll(t, s, rs) })
		checkReplay(t, first, ds)
		tm.sleep(long)
		// Past the longest window: the record is gone, and the request is decided afresh.
		if allowed, ds := takeAll(t, s, rs); !allowed || ds[0].Replayed || ds[1].Replayed || ds[1].Remaining != 4 {
			t.Fatalf("the same ID after the longest window: %+v; want decided afresh", ds)
		}
	})
}

func testIDScopedToSlot(t *testing.T, b Backend) {
	s := b.Open(t)
	id := newID()
	limsA, keysA := policies(3)
	limsB, keysB := policies(3)
	_, a := takeAll(t, s, requests(limsA, keysA, 1, id))
	// Another subject (another slot) with the same ID: its own request, decided on its own.
	_, bs := takeAll(t, s, requests(limsB, keysB, 2, id))
	if !bs[0].Allowed || bs[0].Replayed || bs[0].Remaining != 1 {
		t.Fatalf("the same ID in another slot: %+v; want a fresh decision", bs[0])
	}
	_, again := takeAll(t, s, requests(limsA, keysA, 1, id))
	checkReplay(t, a, again)
}

func testReplayConcurrent(t *testing.T, b Backend) {
	const goroutines = 20
	stores := [2]admit.Store{b.Open(t), b.Open(t)}
	lims, keys := policies(10)
	rs := requests(lims, keys, 3, newID())
	fresh := raceCount(goroutines, func(i int) bool {
		ds := make([]admit.Decision, 1)
		allowed, err := stores[i%2].TakeAll(t.Context(), rs, ds)
		switch {
		case err != nil:
			t.Errorf("TakeAll: %v", err)
		case !allowed || ds[0].Remaining != 7:
			t.Errorf("a copy of one request: %+v; want allowed with 7 left", ds[0])
		default:
			return !ds[0].Replayed
		}
		return false
	})
	if fresh != 1 {
		t.Fatalf("%d copies of one request at once: %d decided afresh; want exactly 1, the others replayed", goroutines, fresh)
	}
	if d := take(t, stores[0], keys[0], lims[0], 0); d.Remaining != 7 {
		t.Fatalf("remaining %d; want 7: one request of cost 3, consumed once", d.Remaining)
	}
}

// testTierShapes moves one subject between the tiers of a policy (admit.Limit.Tier), through a
// Limiter: the tier is not in the key, so a tier of the same shape (a fixed window's other limit)
// finds the subject's counter, and one of another shape (another window; a GCRA bucket of another
// rate) starts afresh.
func testTierShapes(t *testing.T, b Backend) {
	own := admit.Limit{Name: "limittest", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Minute}
	pro, hourly := own, own
	pro.Tier, pro.Rate = "pro", 5
	hourly.Tier, hourly.Period = "hourly", time.Hour
	bucket := admit.Limit{Name: "limittest", Algorithm: admit.GCRA, Rate: 2, Period: time.Minute}
	faster := bucket
	faster.Tier, faster.Rate = "faster", 4
	s := b.Open(t)
	fixed := admit.NewLimiter(s, keyBuilder(t), own, pro, hourly)
	gcra := admit.NewLimiter(s, keyBuilder(t), bucket, faster)
	subject := newKey()
	for i, c := range []struct {
		limiter   *admit.Limiter
		tier      string
		allowed   bool
		remaining int64
		why       string
	}{
		{fixed, "", true, 1, "fresh"},
		{fixed, "", true, 0, "the limit reached"},
		{fixed, "", false, 0, "over the limit of 2"},
		{fixed, "pro", true, 2, "the same counter, 2 used, under a limit of 5"},
		{fixed, "", false, 0, "back down: 3 used of 2"},
		{fixed, "hourly", true, 1, "another window: a counter of its own, fresh"},
		{gcra, "", true, 1, "a fresh bucket"},
		{gcra, "", true, 0, "the bucket empty"},
		{gcra, "faster", true, 3, "another rate: a bucket of its own, fresh"},
	} {
		d, err := c.limiter.Allow(t.Context(), admit.Subject{ID: subject, Tier: c.tier})
		if err != nil {
			t.Fatalf("call %d (tier %q): unexpected error: %v", i, c.tier, err)
		}
		if d.Allowed != c.allowed || d.Remaining != c.remaining || d.Limit.Tier != c.tier {
			t.Fatalf("call %d (tier %q) = allowed %v, remaining %d under tier %q; want allowed %v, remaining %d: %s",
				i, c.tier, d.Allowed, d.Remaining, d.Limit.Tier, c.allowed, c.remaining, c.why)
		}
	}
}
