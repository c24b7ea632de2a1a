package limittest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
)

// The cases of Store.Reset, run for every algorithm: a reset key's state is gone, whatever wrote it,
// and nothing else is touched; keys are checked before any I/O. A reservation settled after a reset
// settles on the key as it is now: a refund gives back nothing the reset already gave back.

// resetCases are run for every algorithm, after the settle cases.
var resetCases = []sharedCase{
	{"Reset/StateGone", testResetStateGone},
	{"Reset/AbsentKeys", testResetAbsentKeys},
	{"Reset/Reservation", testResetReservation},
	{"Reset/Invalid", testResetInvalid},
	{"Reset/CancelledContext", testResetCancelledContext},
}

// fill takes the whole allowance of key under lim, a unit at a time, and checks that a unit more is
// rejected.
func fill(t *testing.T, s admit.Store, key string, lim admit.Limit) {
	t.Helper()
	for range lim.Capacity() {
		if d := take(t, s, key, lim, 1); !d.Allowed {
			t.Fatalf("filling %s under %v: rejected with %d remaining", key, lim, d.Remaining)
		}
	}
	if d := take(t, s, key, lim, 1); d.Allowed {
		t.Fatalf("a unit more than the allowance of %v was admitted", lim)
	}
}

// resetKeys calls s.Reset and fails the test on an error.
func resetKeys(t *testing.T, s admit.Store, keys ...string) {
	t.Helper()
	if err := s.Reset(t.Context(), keys); err != nil {
		t.Fatalf("Reset(%d keys): unexpected error: %v", len(keys), err)
	}
}

// checkFull reports, with t.Errorf, a key whose peek under lim does not show the whole allowance.
func checkFull(t *testing.T, s admit.Store, key string, lim admit.Limit, why string) {
	t.Helper()
	if d := take(t, s, key, lim, 0); !d.Allowed || d.Remaining != lim.Capacity() {
		t.Errorf("%s: peek = allowed %v, remaining %d; want the full allowance, %d", why, d.Allowed, d.Remaining, lim.Capacity())
	}
}

// checkEmpty reports, with t.Errorf, a key whose peek under lim shows any allowance left.
func checkEmpty(t *testing.T, s admit.Store, key string, lim admit.Limit, why string) {
	t.Helper()
	if d := take(t, s, key, lim, 0); d.Remaining != 0 {
		t.Errorf("%s: peek = remaining %d; want 0, the key untouched", why, d.Remaining)
	}
}

// A reset through one Store empties the key for another: its next Take is admitted with the whole
// allowance; a key of the same slot not named keeps its state.
func testResetStateGone(t *testing.T, b Backend, a *algorithm) {
	s1, s2 := b.Open(t), b.Open(t)
	lim := a.perMinute(3)
	tag := newSlot()
	key, other := newKey()+tag, newKey()+tag
	fill(t, s1, key, lim)
	fill(t, s1, other, lim)
	resetKeys(t, s2, key)
	checkFull(t, s1, key, lim, "after a reset")
	if d := take(t, s1, key, lim, 1); !d.Allowed || d.Remaining != lim.Capacity()-1 {
		t.Errorf("a Take after a reset: allowed %v, remaining %d; want allowed, %d", d.Allowed, d.Remaining, lim.Capacity()-1)
	}
	checkEmpty(t, s1, other, lim, "a key of the same slot not reset")
}

// Keys without state, and a key named twice, are no error, and change nothing else.
func testResetAbsentKeys(t *testing.T, b Backend, a *algorithm) {
	s := b.Open(t)
	lim := a.perMinute(3)
	full := newKey()
	fill(t, s, full, lim)
	missing := newKey()
	resetKeys(t, s, missing, missing, newKey()+newSlot())
	checkEmpty(t, s, full, lim, "a key not named in a reset of absent keys")
	checkFull(t, s, missing, lim, "an absent key reset")
}

// A reservation taken before a reset and settled after it settles on the key as it is then: a
// refund gives nothing back beyond the whole allowance, and an overrun consumes from the fresh key.
func testResetReservation(t *testing.T, b Backend, a *algorithm) {
	if !a.settles {
		// A lease is released, not settled: Reset/Leases of the concurrency algorithm.
		s := b.Open(t)
		lim := a.perMinute(3)
		key := newKey()
		d := take(t, s, key, lim, 1)
		resetKeys(t, s, key)
		release(t, s, key, lim, d.Token)
		checkFull(t, s, key, lim, "a lease released after a reset")
		return
	}
	s := b.Open(t)
	lim := a.perMinute(3)
	key := newKey()
	res := reserve(t, b, s, key, lim, 2, 1)
	resetKeys(t, s, key)
	if _, err := s.Settle(t.Context(), res, 0); err != nil {
		t.Fatalf("Settle of a reservation after a reset: %v", err)
	}
	checkFull(t, s, key, lim, "a refund after a reset")
	res = reserve(t, b, s, key, lim, 1, 2)
	resetKeys(t, s, key)
	if _, err := s.Settle(t.Context(), res, 2); err != nil {
		t.Fatalf("Settle of an overrun after a reset: %v", err)
	}
	if d := take(t, s, key, lim, 0); d.Remaining != lim.Capacity()-1 {
		t.Errorf("an overrun of 1 settled after a reset: peek remaining %d; want %d", d.Remaining, lim.Capacity()-1)
	}
}

// Invalid keys are refused with ErrInvalidRequest before any I/O: a valid key in the same call
// keeps its state.
func testResetInvalid(t *testing.T, b Backend, a *algorithm) {
	s := b.Open(t)
	lim := a.perMinute(3)
	key := newKey()
	fill(t, s, key, lim)
	tooMany := make([]string, bound.MaxResetKeys+1)
	for i := range tooMany {
		tooMany[i] = key
	}
	for name, keys := range map[string][]string{
		"none":          nil,
		"empty key":     {key, ""},
		"key too long":  {key, strings.Repeat("k", bound.MaxKeyLen+1)},
		"too many keys": tooMany,
	} {
		err := s.Reset(t.Context(), keys)
		if !errors.Is(err, admit.ErrInvalidRequest) || errors.Is(err, admit.ErrUnavailable) {
			t.Errorf("Reset of %s: %v; want an error matching admit.ErrInvalidRequest only", name, err)
		}
	}
	checkEmpty(t, s, key, lim, "a key named with invalid ones")
	longest := newKey()
	longest += strings.Repeat("k", bound.MaxKeyLen-len(longest))
	resetKeys(t, s, key, longest) // the bounds are inclusive
	checkFull(t, s, key, lim, "a reset with a key of the longest length")
}

// A reset with a done context resets nothing and reports ErrUnavailable and the context's error.
func testResetCancelledContext(t *testing.T, b Backend, a *algorithm) {
	s := b.Open(t)
	lim := a.perMinute(3)
	key := newKey()
	fill(t, s, key, lim)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Reset(ctx, []string{key}); !errors.Is(err, admit.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("Reset with a cancelled context: %v; want an error matching admit.ErrUnavailable and context.Canceled", err)
	}
	checkEmpty(t, s, key, lim, "a reset with a cancelled context")
}

// A reset frees a concurrency key's leases at once; a Release of one acquired before it does nothing,
// and leaves the leases acquired since.
func testResetLeases(t *testing.T, b Backend) {
	s := b.Open(t)
	lim := cc(3, time.Minute)
	key := newKey()
	var old []uint64
	for range 3 {
		old = append(old, take(t, s, key, lim, 1).Token)
	}
	resetKeys(t, s, key)
	checkFull(t, s, key, lim, "a full concurrency key reset")
	fresh := take(t, s, key, lim, 1)
	for _, tok := range old {
		release(t, s, key, lim, tok)
	}
	if d := take(t, s, key, lim, 0); d.Remaining != 2 {
		t.Errorf("after the Release of 3 leases from before the reset: remaining %d; want 2, the lease acquired since still held", d.Remaining)
	}
	release(t, s, key, lim, fresh.Token)
	checkFull(t, s, key, lim, "the lease acquired after the reset released")
}
