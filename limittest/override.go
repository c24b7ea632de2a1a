package limittest

import (
	"context"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
)

// The cases of per-subject overrides (admit.Override), run for every algorithm as <algorithm>/Override/…:
// an Override changes the next decision of a Request whose OverrideKey is its key, on every Store of
// the backend, and reports it (Decision.Overridden, Decision.Limit); it expires by itself; deleting it
// restores the Limit's own numbers; a Reset keeps it. GCRA's clamp, a bucket filled under other
// numbers, is gcra/Override/Clamp. The cases of the methods themselves — listing in pages, counting,
// bad input, TakeAll of several Requests some overridden — are Overrides/…, once.

// overrideCases are run for every algorithm, after the reset cases.
var overrideCases = []sharedCase{
	{"Override/ChangesTheNextDecision", testOverrideChangesTheNextDecision},
	{"Override/Expires", testOverrideExpires},
	{"Override/DeleteRestores", testOverrideDeleteRestores},
	{"Override/ResetKeepsIt", testOverrideResetKeepsIt},
}

// overrideRequestCases are run once, after the request model's cases.
var overrideRequestCases = []algorithmCase{
	{"Overrides/Listing", testOverridesListing},
	{"Overrides/Count", testOverrideCount},
	{"Overrides/Invalid", testOverridesInvalid},
	{"Overrides/TakeAll", testOverridesTakeAll},
}

// overrideKeyOf returns the override key of policy in key's hash slot, as KeyBuilder.OverrideKey
// makes one: key's {hash tag}, or, for a key without one, the whole key as the tag.
func overrideKeyOf(policy, key string) string {
	prefix := "rl:" + policy + ":o:"
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open:], '}'); end > 1 {
			return prefix + key[open:open+end+1]
		}
	}
	return prefix + "{" + key + "}"
}

// newPolicy returns a policy name no other subtest, test run or process uses: its Overrides are the
// case's alone, even on a shared backend.
func newPolicy() string {
	var b [8]byte
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return "ov" + hex.EncodeToString(b[:])
}

// overriddenLimit returns lim with o's numbers, as a Store decides under them: o's Rate, and for
// GCRA its Burst when o sets one.
func overriddenLimit(lim admit.Limit, o admit.Override) admit.Limit {
	lim.Rate = o.Rate
	if lim.Algorithm == admit.GCRA && o.Burst > 0 {
		lim.Burst = o.Burst
	}
	return lim
}

// doubling returns an Override at okey that doubles the capacity of lim, a Limit of the algorithm:
// twice its Rate, or for GCRA, whose backlog is a time, twice its burst at the same Rate (so that the
// units it has admitted weigh as much under the Override).
func doubling(okey string, lim admit.Limit) admit.Override {
	if lim.Algorithm == admit.GCRA {
		return admit.Override{Key: okey, Rate: lim.Rate, Burst: 2 * lim.Capacity(), Reason: "limittest: doubled"}
	}
	return admit.Override{Key: okey, Rate: 2 * lim.Rate, Reason: "limittest: doubled"}
}

// setOverride calls s.SetOverride and fails the test on an error.
func setOverride(t *testing.T, s admit.Store, o admit.Override) {
	t.Helper()
	if err := s.SetOverride(t.Context(), o); err != nil {
		t.Fatalf("SetOverride(%+v): unexpected error: %v", o, err)
	}
}

// deleteOverride calls s.DeleteOverride, fails the test on an error, and reports whether there was one.
func deleteOverride(t *testing.T, s admit.Store, key string) bool {
	t.Helper()
	existed, err := s.DeleteOverride(t.Context(), key)
	if err != nil {
		t.Fatalf("DeleteOverride(%q): unexpected error: %v", key, err)
	}
	return existed
}

// takeOver takes n units of key under lim with override key okey, fails the test on an error, and
// checks that the Decision is one under want (lim, or lim with an Override's numbers), overridden
// as said.
func takeOver(t *testing.T, s admit.Store, key, okey string, lim, want admit.Limit, n int64, overridden bool) admit.Decision {
	t.Helper()
	d, err := s.Take(t.Context(), admit.Request{Key: key, Limit: lim, Cost: n, OverrideKey: okey})
	if err != nil {
		t.Fatalf("Take(n=%d) under %v with override key %q: unexpected error: %v", n, lim, okey, err)
	}
	checkDecision(t, d, want, n)
	checkToken(t, d, n)
	if d.Overridden != overridden {
		t.Errorf("Take(n=%d) under %v: Overridden = %v; want %v", n, lim, d.Overridden, overridden)
	}
	return d
}

// fillOver fills key under lim, a unit at a time, with override key okey and no Override stored.
func fillOver(t *testing.T, s admit.Store, key, okey string, lim admit.Limit) {
	t.Helper()
	for range lim.Capacity() {
		if d := takeOver(t, s, key, okey, lim, lim, 1, false); !d.Allowed {
			t.Fatalf("filling %s under %v: rejected with %d remaining", key, lim, d.Remaining)
		}
	}
	if d := takeOver(t, s, key, okey, lim, lim, 1, false); d.Allowed {
		t.Fatalf("a unit more than the allowance of %v was admitted", lim)
	}
}

// storeNow returns the time of the backend's Stores: its clock when it tells it, else the real one.
func storeNow(t *testing.T, b Backend) time.Time {
	if c, ok := b.(ClockBackend); ok {
		return c.Now(t)
	}
	return time.Now()
}

// A filled key with an Override set (through another Store) is decided under the Override's
// numbers at once, with its counters kept; a Request without the OverrideKey is not.
func testOverrideChangesTheNextDecision(t *testing.T, b Backend, a *algorithm) {
	s1, s2 := b.Open(t), b.Open(t)
	lim := a.perMinute(3)
	key := newKey()
	okey := overrideKeyOf(lim.Name, key)
	fillOver(t, s1, key, okey, lim)
	o := doubling(okey, lim)
	setOverride(t, s2, o)
	want := overriddenLimit(lim, o)
	if d := takeOver(t, s1, key, okey, lim, want, 1, true); !d.Allowed || d.Remaining != 2 {
		t.Errorf("a Take under an Override of capacity 6 after 3 units: allowed %v, remaining %d; want allowed, 2 (the counters kept)", d.Allowed, d.Remaining)
	}
	if lim.Algorithm == admit.GCRA {
		// 4 units of 20 s are further ahead than the Limit's own bucket of 60 s: corrupt without
		// the OverrideKey, which alone clamps (gcra/Override/Clamp).
		if _, err := s1.Take(t.Context(), admit.Request{Key: key, Limit: lim}); !errors.Is(err, admit.ErrCorruptState) {
			t.Errorf("a peek without the OverrideKey of a bucket further ahead than its burst: %v; want an error matching ErrCorruptState", err)
		}
	} else if d := take(t, s1, key, lim, 0); d.Remaining != 0 || d.Overridden {
		t.Errorf("a peek without the OverrideKey: remaining %d, overridden %v; want the Limit's own numbers: 0 left", d.Remaining, d.Overridden)
	}
	if got, ok, err := s1.Override(t.Context(), okey); err != nil || !ok || got.Rate != o.Rate || got.Burst != o.Burst || got.Reason != o.Reason || !got.Expires.IsZero() {
		t.Errorf("Override(%q) = %+v, %v, %v; want what was set, %+v", okey, got, ok, err, o)
	}
}

// overrideTTL is how long the Override of the Expires case lives: short, as a real-time backend
// waits for it.
const overrideTTL = time.Second

// An Override set to expire decides until then, and is gone by itself after: the Limit's own
// numbers decide again, and Override finds none. On a real-time backend the first decision counts
// only when it came within the Override's life; the case starts again otherwise.
func testOverrideExpires(t *testing.T, b Backend, a *algorithm) {
	s := b.Open(t)
	lim := a.perMinute(3)
	for attempt := 1; ; attempt++ {
		key := newKey()
		okey := overrideKeyOf(lim.Name, key)
		start := storeNow(t, b)
		o := doubling(okey, lim)
		o.Expires = start.Add(overrideTTL)
		setOverride(t, s, o)
		d, err := s.Take(t.Context(), admit.Request{Key: key, Limit: lim, Cost: 1, OverrideKey: okey})
		if err != nil {
			t.Fatalf("Take under an Override: %v", err)
		}
		if storeNow(t, b).Sub(start) >= overrideTTL/2 {
			if attempt == attempts {
				t.Fatalf("in %d attempts, the machine never took a unit within %v of setting an Override", attempts, overrideTTL/2)
			}
			continue // the Override may have expired meanwhile: again, on new keys
		}
		want := overriddenLimit(lim, o)
		checkDecision(t, d, want, 1)
		if !d.Overridden {
			t.Errorf("a Take within the Override's life: not overridden")
		}
		if !d.Allowed || d.Remaining != 2*lim.Capacity()-1 {
			t.Errorf("a Take under an Override of capacity %d: allowed %v, remaining %d; want allowed, %d", 2*lim.Capacity(), d.Allowed, d.Remaining, 2*lim.Capacity()-1)
		}
		b.Sleep(t, overrideTTL+10*time.Millisecond)
		if d := takeOver(t, s, key, okey, lim, lim, 0, false); !d.Allowed || d.Remaining != lim.Capacity()-1 {
			t.Errorf("a peek after the Override expired: allowed %v, remaining %d; want the Limit's own numbers, %d left", d.Allowed, d.Remaining, lim.Capacity()-1)
		}
		if got, ok, err := s.Override(t.Context(), okey); err != nil || ok {
			t.Errorf("Override(%q) after it expired = %+v, %v, %v; want none", okey, got, ok, err)
		}
		return
	}
}

// Deleting an Override restores the Limit's own numbers at once, and reports that there was one;
// deleting it again reports none.
func testOverrideDeleteRestores(t *testing.T, b Backend, a *algorithm) {
	s := b.Open(t)
	lim := a.perMinute(3)
	key := newKey()
	okey := overrideKeyOf(lim.Name, key)
	o := doubling(okey, lim)
	setOverride(t, s, o)
	want := overriddenLimit(lim, o)
	for i := range lim.Capacity() + 1 { // one unit more than the Limit's own capacity
		if d := takeOver(t, s, key, okey, lim, want, 1, true); !d.Allowed {
			t.Fatalf("unit %d of %d under an Override of capacity %d: rejected", i+1, lim.Capacity()+1, want.Capacity())
		}
	}
	if !deleteOverride(t, s, okey) {
		t.Errorf("DeleteOverride of a stored Override reported none")
	}
	if d := takeOver(t, s, key, okey, lim, lim, 1, false); d.Allowed {
		t.Errorf("a Take after the Override was deleted, %d units taken under a Limit of %d: admitted", lim.Capacity()+1, lim.Capacity())
	}
	if deleteOverride(t, s, okey) {
		t.Errorf("DeleteOverride of a deleted Override reported one")
	}
	if got, ok, err := s.Override(t.Context(), okey); err != nil || ok {
		t.Errorf("Override(%q) after it was deleted = %+v, %v, %v; want none", okey, got, ok, err)
	}
}

// Store.Reset deletes the state of a subject's keys, not its Override: the reset key is fresh under
// the Override's numbers.
func testOverrideResetKeepsIt(t *testing.T, b Backend, a *algorithm) {
	s := b.Open(t)
	lim := a.perMinute(3)
	key := newKey()
	okey := overrideKeyOf(lim.Name, key)
	o := doubling(okey, lim)
	setOverride(t, s, o)
	want := overriddenLimit(lim, o)
	takeOver(t, s, key, okey, lim, want, 1, true)
	resetKeys(t, s, key)
	if _, ok, err := s.Override(t.Context(), okey); err != nil || !ok {
		t.Fatalf("Override(%q) after a Reset of the subject's keys: %v, %v; want it kept", okey, ok, err)
	}
	if d := takeOver(t, s, key, okey, lim, want, 0, true); !d.Allowed || d.Remaining != want.Capacity() {
		t.Errorf("a peek after a Reset: allowed %v, remaining %d; want the Override's whole capacity, %d", d.Allowed, d.Remaining, want.Capacity())
	}
}

// GCRA's state is a time meaningful at one emission interval: a bucket filled under an Override's
// larger burst is, once the Override is deleted, an empty bucket under the Limit's own numbers for a
// Request with the OverrideKey — clamped, not corrupt — and corrupt for a Request without one; a
// smaller burst set over a fuller bucket clamps likewise. Every figure is exact on any backend.
func testOverrideGCRAClamp(t *testing.T, b Backend) {
	s := b.Open(t)
	lim := gc(3, time.Minute, 3) // T = 20 s, τ = 60 s
	key := newKey()
	okey := overrideKeyOf(lim.Name, key)
	o := admit.Override{Key: okey, Rate: 3, Burst: 30}
	setOverride(t, s, o)
	for i := range 10 { // a unit at a time: a Request's cost is checked against its own Limit
		if d := takeOver(t, s, key, okey, lim, overriddenLimit(lim, o), 1, true); !d.Allowed {
			t.Fatalf("unit %d of 10 under a burst of 30: rejected", i+1)
		}
	}
	deleteOverride(t, s, okey)
	d := takeOver(t, s, key, okey, lim, lim, 0, false)
	if d.Remaining != 0 || d.ResetAfter != time.Minute {
		t.Errorf("a peek after the Override was deleted, 200 s of backlog under τ = 60 s: remaining %d, reset after %v; want an empty bucket: 0, 1m0s", d.Remaining, d.ResetAfter)
	}
	d = takeOver(t, s, key, okey, lim, lim, 1, false)
	if d.Allowed || d.RetryAfter != 20*time.Second {
		t.Errorf("a unit after the Override was deleted: allowed %v, retry after %v; want rejected, one emission interval: 20s", d.Allowed, d.RetryAfter)
	}
	if _, err := s.Take(t.Context(), admit.Request{Key: key, Limit: lim, Cost: 0}); !errors.Is(err, admit.ErrCorruptState) {
		t.Errorf("a peek without the OverrideKey of a bucket further ahead than its burst: %v; want an error matching ErrCorruptState", err)
	}
	// A smaller burst over a fuller bucket.
	big := gc(3, time.Minute, 30)
	key2 := newKey()
	okey2 := overrideKeyOf(big.Name, key2)
	takeOver(t, s, key2, okey2, big, big, 10, false)
	small := admit.Override{Key: okey2, Rate: 3, Burst: 3}
	setOverride(t, s, small)
	if d := takeOver(t, s, key2, okey2, big, overriddenLimit(big, small), 0, true); d.Remaining != 0 || d.ResetAfter != time.Minute {
		t.Errorf("a peek under a burst of 3 of a bucket 200 s behind: remaining %d, reset after %v; want an empty bucket: 0, 1m0s", d.Remaining, d.ResetAfter)
	}
}

// 2,500 Overrides of a policy list in three pages of at most 1,000, each exactly once, in key
// order, with what was set; the last page's cursor is "", and the cursor of another policy or a
// page of 0 or 1,001 is an invalid request.
func testOverridesListing(t *testing.T, b Backend) {
	s := b.Open(t)
	policy := newPolicy()
	const total = 2500
	want := make(map[string]admit.Override, total)
	for i := range total {
		o := admit.Override{Key: overrideKeyOf(policy, newKey()), Rate: int64(1 + i), Burst: int64(i % 3), Reason: "ticket " + strconv.Itoa(i)}
		if i%2 == 0 {
			o.Expires = storeNow(t, b).Add(time.Hour).Truncate(time.Millisecond)
		}
		setOverride(t, s, o)
		want[o.Key] = o
	}
	setOverride(t, s, admit.Override{Key: overrideKeyOf(newPolicy(), newKey()), Rate: 1}) // another policy's
	var listed []string
	cursor, pages := "", 0
	for {
		page, next, err := s.Overrides(t.Context(), policy, cursor, 1000)
		if err != nil {
			t.Fatalf("Overrides page %d: %v", pages+1, err)
		}
		pages++
		if next != "" && len(page) != 1000 {
			t.Errorf("page %d of %d Overrides, not the last: %d listed; want 1000", pages, total, len(page))
		}
		for _, o := range page {
			listed = append(listed, o.Key)
			w, ok := want[o.Key]
			if !ok {
				t.Fatalf("page %d lists %q, not an Override of the policy", pages, o.Key)
			}
			if o.Rate != w.Rate || o.Burst != w.Burst || o.Reason != w.Reason || !o.Expires.Equal(w.Expires) {
				t.Errorf("listed %+v; want what was set, %+v", o, w)
			}
		}
		if next == "" || pages > total {
			break
		}
		cursor = next
	}
	if pages != 3 || len(listed) != total {
		t.Errorf("%d Overrides in pages of 1000: %d pages, %d listed; want 3 pages, every one", total, pages, len(listed))
	}
	if !slices.IsSorted(listed) {
		t.Errorf("the listing is not in key order")
	}
	if len(slices.Compact(slices.Clone(listed))) != len(listed) {
		t.Errorf("the listing repeats Overrides")
	}
	for _, bad := range []struct {
		cursor string
		n      int
	}{
		{overrideKeyOf(newPolicy(), newKey()), 10}, // another policy's key
		{"rl:x", 10},
		{"", 0},
		{"", validateMaxPage + 1},
	} {
		if _, _, err := s.Overrides(t.Context(), policy, bad.cursor, bad.n); !errors.Is(err, admit.ErrInvalidRequest) {
			t.Errorf("Overrides(cursor %q, n %d): %v; want an error matching ErrInvalidRequest", bad.cursor, bad.n, err)
		}
	}
	if _, _, err := s.Overrides(t.Context(), "not:a:policy", "", 10); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Errorf("Overrides of policy \"not:a:policy\": %v; want an error matching ErrInvalidRequest", err)
	}
}

// validateMaxPage is the most Overrides a page lists (Store.Overrides).
const validateMaxPage = 1000

// OverrideCount counts a policy's Overrides: every one set, less those deleted; one that expired
// counts at most until a listing has met it. A policy without any counts 0.
func testOverrideCount(t *testing.T, b Backend) {
	s := b.Open(t)
	for attempt := 1; ; attempt++ {
		policy := newPolicy()
		start := storeNow(t, b)
		var keys []string
		for i := range 5 {
			o := admit.Override{Key: overrideKeyOf(policy, newKey()), Rate: 5}
			if i >= 3 {
				o.Expires = start.Add(overrideTTL)
			}
			setOverride(t, s, o)
			keys = append(keys, o.Key)
		}
		n, err := s.OverrideCount(t.Context(), policy)
		if err != nil {
			t.Fatal(err)
		}
		if storeNow(t, b).Sub(start) >= overrideTTL/2 {
			if attempt == attempts {
				t.Fatalf("in %d attempts, the machine never set and counted 5 Overrides within %v", attempts, overrideTTL/2)
			}
			continue
		}
		if n != 5 {
			t.Errorf("OverrideCount of 5 Overrides set: %d", n)
		}
		deleteOverride(t, s, keys[0])
		b.Sleep(t, overrideTTL+10*time.Millisecond)
		if n, err := s.OverrideCount(t.Context(), policy); err != nil || n < 2 || n > 4 {
			t.Errorf("OverrideCount of 2 live, 2 expired: %d, %v; want 2 to 4", n, err)
		}
		if page, _, err := s.Overrides(t.Context(), policy, "", 10); err != nil || len(page) != 2 {
			t.Errorf("Overrides of 2 live, 2 expired: %d listed, %v; want 2", len(page), err)
		}
		if n, err := s.OverrideCount(t.Context(), policy); err != nil || n != 2 {
			t.Errorf("OverrideCount once a listing met the expired ones: %d, %v; want 2", n, err)
		}
		if n, err := s.OverrideCount(t.Context(), newPolicy()); err != nil || n != 0 {
			t.Errorf("OverrideCount of a policy without Overrides: %d, %v; want 0", n, err)
		}
		if _, err := s.OverrideCount(t.Context(), "not:a:policy"); !errors.Is(err, admit.ErrInvalidRequest) {
			t.Errorf("OverrideCount of policy \"not:a:policy\": %v; want an error matching ErrInvalidRequest", err)
		}
		return
	}
}

// An Override that fails the checks is an invalid request, and stores nothing; so is a key that is
// not an override key for the other methods, and a Request whose OverrideKey is not in its key's
// slot. The bounds themselves are accepted. A done context stores nothing.
func testOverridesInvalid(t *testing.T, b Backend) {
	s := b.Open(t)
	policy := newPolicy()
	key := overrideKeyOf(policy, newKey())
	now := storeNow(t, b)
	for name, o := range map[string]admit.Override{
		"rate 0":            {Key: key, Rate: 0},
		"rate above":        {Key: key, Rate: bound.MaxRate + 1},
		"burst below":       {Key: key, Rate: 1, Burst: -1},
		"burst above":       {Key: key, Rate: 1, Burst: bound.MaxRate + 1},
		"reason 201 bytes":  {Key: key, Rate: 1, Reason: strings.Repeat("r", 201)},
		"expired":           {Key: key, Rate: 1, Expires: now.Add(-time.Minute)},
		"empty key":         {Rate: 1},
		"state key":         {Key: "rl:" + policy + ":v1-fw60000:{abc}", Rate: 1},
		"key without a tag": {Key: "rl:" + policy + ":o:abc", Rate: 1},
	} {
		if err := s.SetOverride(t.Context(), o); !errors.Is(err, admit.ErrInvalidRequest) {
			t.Errorf("SetOverride, %s: %v; want an error matching ErrInvalidRequest", name, err)
		}
	}
	if n, err := s.OverrideCount(t.Context(), policy); err != nil || n != 0 {
		t.Errorf("OverrideCount after invalid Overrides only: %d, %v; want 0, nothing stored", n, err)
	}
	if _, ok, err := s.Override(t.Context(), key); err != nil || ok {
		t.Errorf("Override(%q) after invalid Overrides only: %v, %v; want none", key, ok, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.SetOverride(ctx, admit.Override{Key: key, Rate: 1}); !errors.Is(err, admit.ErrUnavailable) {
		t.Errorf("SetOverride with a done context: %v; want an error matching ErrUnavailable", err)
	}
	if _, ok, _ := s.Override(t.Context(), key); ok {
		t.Errorf("SetOverride with a done context stored the Override")
	}
	setOverride(t, s, admit.Override{Key: key, Rate: bound.MaxRate, Burst: bound.MaxRate, Reason: strings.Repeat("r", 200)})
	for _, bad := range []string{"", "rl:" + policy + ":v1:{abc}", strings.Repeat("k", bound.MaxKeyLen+1)} {
		if _, _, err := s.Override(t.Context(), bad); !errors.Is(err, admit.ErrInvalidRequest) {
			t.Errorf("Override(%q): %v; want an error matching ErrInvalidRequest", bad, err)
		}
		if _, err := s.DeleteOverride(t.Context(), bad); !errors.Is(err, admit.ErrInvalidRequest) {
			t.Errorf("DeleteOverride(%q): %v; want an error matching ErrInvalidRequest", bad, err)
		}
	}
	// Numbers the Request's Limit cannot take: a cost above the Override's burst.
	g := admit.Limit{Name: policy, Algorithm: admit.GCRA, Rate: 9, Period: time.Minute}
	gkey := newKey()
	setOverride(t, s, admit.Override{Key: overrideKeyOf(policy, gkey), Rate: 9, Burst: 2})
	if _, err := s.Take(t.Context(), admit.Request{Key: gkey, Limit: g, Cost: 5, OverrideKey: overrideKeyOf(policy, gkey)}); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Errorf("a cost of 5 under an Override of burst 2: %v; want an error matching ErrInvalidRequest", err)
	}
	deleteOverride(t, s, overrideKeyOf(policy, gkey))
	checkFull(t, s, gkey, g, "after a refused Take under an Override")
	lim := admit.Limit{Name: policy, Algorithm: admit.FixedWindow, Rate: 3, Period: time.Minute}
	state := newKey() + newSlot()
	other := overrideKeyOf(policy, newKey()+newSlot())
	if _, err := s.Take(t.Context(), admit.Request{Key: state, Limit: lim, Cost: 1, OverrideKey: other}); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Errorf("a Take whose OverrideKey is in another slot: %v; want an error matching ErrInvalidRequest", err)
	}
	if _, err := s.Take(t.Context(), admit.Request{Key: state, Limit: lim, Cost: 1, OverrideKey: "rl:" + policy + ":v1:" + newSlot()}); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Errorf("a Take whose OverrideKey is not an override key: %v; want an error matching ErrInvalidRequest", err)
	}
}

// TakeAll of several Requests, some overridden, decides each under its own numbers and reports which
// were overridden, all-or-nothing as ever: a rejection of one that is not overridden rejects all.
func testOverridesTakeAll(t *testing.T, b Backend) {
	s := b.Open(t)
	lims, keys := policies(1, 1, 1)
	rs := make([]admit.Request, len(lims))
	for i := range rs {
		rs[i] = admit.Request{Key: keys[i], Limit: lims[i], Cost: 1, OverrideKey: overrideKeyOf(lims[i].Name, keys[i])}
	}
	if allowed, _ := takeAll(t, s, rs); !allowed {
		t.Fatalf("the first unit of three policies of 1: rejected")
	}
	for _, i := range []int{0, 2} {
		setOverride(t, s, admit.Override{Key: rs[i].OverrideKey, Rate: 2})
	}
	ds := make([]admit.Decision, len(rs))
	allowed, err := s.TakeAll(t.Context(), rs, ds)
	if err != nil {
		t.Fatal(err)
	}
	if allowed {
		t.Errorf("a second unit, policy 1 not overridden and full: admitted")
	}
	for i, d := range ds {
		over := i != 1
		want := lims[i]
		if over {
			want.Rate = 2
		}
		checkDecision(t, d, want, 1)
		if d.Overridden != over || d.Limit != want {
			t.Errorf("policy %d: overridden %v, Limit %+v; want %v, %+v", i, d.Overridden, d.Limit, over, want)
		}
		if over && (!d.Allowed || d.Remaining != 1) {
			t.Errorf("policy %d, overridden to 2, rejected by another: allowed %v, remaining %d; want its key as it is: allowed, 1", i, d.Allowed, d.Remaining)
		}
	}
	setOverride(t, s, admit.Override{Key: rs[1].OverrideKey, Rate: 2})
	if allowed, err = s.TakeAll(t.Context(), rs, ds); err != nil || !allowed {
		t.Fatalf("a second unit, every policy overridden to 2: %v, %v; want admitted", allowed, err)
	}
	for i, d := range ds {
		if !d.Overridden || d.Limit.Rate != 2 || d.Remaining != 0 {
			t.Errorf("policy %d: overridden %v, rate %d, remaining %d; want overridden, 2, 0", i, d.Overridden, d.Limit.Rate, d.Remaining)
		}
	}
}
