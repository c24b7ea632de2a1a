package limittest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
)

// The cases of reserve, then settle (docs/reserve-settle.md), run for every algorithm that settles: a Take
// reserves an estimate and reports a token naming the window its units were counted in; Settle at
// the actual cost gives the difference back to that window only, never to a later one, or consumes
// what is left of an overrun; a reservation never settled stays consumed.

// settleCases are run for every algorithm whose settles is set, after the shared cases.
var settleCases = []sharedCase{
	{"Settle/Refund", testSettleRefund},
	{"Settle/RefundIsBounded", testSettleRefundIsBounded},
	{"Settle/Overrun", testSettleOverrun},
	{"Settle/WindowReplaced", testSettleWindowReplaced},
	{"Settle/Invalid", testSettleInvalid},
	{"Settle/CorruptState", testSettleCorruptState},
}

// reserve takes n units of key under lim as a reservation, fails the test unless it is admitted with
// the given remaining and a token, and returns the Reservation.
func reserve(t *testing.T, b Backend, s admit.Store, key string, lim admit.Limit, n, remaining int64) admit.Reservation {
	t.Helper()
	d := takeTimed(t, b, s, key, lim, n)
	if !d.Allowed || d.Remaining != remaining {
		t.Fatalf("reserving %d units under %v: allowed %v, remaining %d; want allowed, remaining %d", n, lim, d.Allowed, d.Remaining, remaining)
	}
	return admit.Reservation{Request: admit.Request{Key: key, Limit: lim, Cost: n}, Token: d.Token}
}

// settleAt calls s.Settle, fails the test on an error, checks the invariants of a settled Decision
// and that it reports allowed and remaining, then that a peek of the key agrees (why says why it
// must), and returns the Decision.
func settleAt(t *testing.T, s admit.Store, res admit.Reservation, actual int64, allowed bool, remaining int64, why string) admit.Decision {
	t.Helper()
	d, err := s.Settle(t.Context(), res, actual)
	if err != nil {
		t.Fatalf("Settle of %d reserved units at %d under %v: unexpected error: %v", res.Request.Cost, actual, res.Request.Limit, err)
	}
	lim := res.Request.Limit
	switch {
	case d.Limit != lim:
		t.Errorf("Settle: Decision.Limit = %+v; want the Limit reserved under, %+v", d.Limit, lim)
	case d.Token != 0 || d.Replayed:
		t.Errorf("Settle: Decision %+v has a token or is replayed; a settlement reserves nothing", d)
	case d.Allowed && d.RetryAfter != 0:
		t.Errorf("Settle: allowed with RetryAfter = %v; want 0", d.RetryAfter)
	case !d.Allowed && (d.RetryAfter <= 0 || d.RetryAfter > lim.MaxWait()):
		t.Errorf("Settle: not allowed with RetryAfter = %v; want more than 0 and at most %v", d.RetryAfter, lim.MaxWait())
	case d.ResetAfter < 0 || d.ResetAfter > lim.MaxWait():
		t.Errorf("Settle: ResetAfter = %v; want 0…%v", d.ResetAfter, lim.MaxWait())
	}
	if d.Allowed != allowed || d.Remaining != remaining {
		t.Fatalf("Settle of %d reserved units at %d under %v = allowed %v, remaining %d; want allowed %v, remaining %d",
			res.Request.Cost, actual, lim, d.Allowed, d.Remaining, allowed, remaining)
	}
	peekIs(t, s, res.Request.Key, lim, remaining, why)
	return d
}

// peekIs fails the test unless a peek of key under lim reports remaining.
func peekIs(t *testing.T, s admit.Store, key string, lim admit.Limit, remaining int64, why string) {
	t.Helper()
	if d := take(t, s, key, lim, 0); d.Remaining != remaining {
		t.Fatalf("peek under %v: remaining %d; want %d: %s", lim, d.Remaining, remaining, why)
	}
}

func testSettleRefund(t *testing.T, b Backend, a *algorithm) {
	s := b.Open(t)
	lim := a.perMinute(10)
	key := newKey()
	res := reserve(t, b, s, key, lim, 5, 5)
	settleAt(t, s, res, 2, true, 8, "a reservation of 5 settled at 2 gives 3 back")
	settleAt(t, s, res, 5, true, 8, "a settlement at the reserved cost changes nothing")

	// A refund of the whole reservation of a fresh key leaves it as good as missing — never a stored
	// 0, which is corrupt state — and the key takes its whole allowance again.
	whole := newKey()
	res = reserve(t, b, s, whole, lim, 10, 0)
	if d := settleAt(t, s, res, 0, true, 10, "a refund of everything gives everything back"); d.ResetAfter != 0 {
		t.Fatalf("a refund of everything a fresh key held: ResetAfter = %v; want 0, the key full again", d.ResetAfter)
	}
	run(t, b, s, whole, lim, []step{{n: 10, allowed: true, remaining: 0, fresh: true}})

	// A reservation never settled stays consumed.
	kept := newKey()
	reserve(t, b, s, kept, lim, 3, 7)
	b.Sleep(t, 50*time.Millisecond)
	peekIs(t, s, kept, lim, 7, "a reservation never settled stays consumed")
}

func testSettleRefundIsBounded(t *testing.T, b Backend, a *algorithm) {
	s := b.Open(t)
	lim := a.perMinute(10)
	key := newKey()
	run(t, b, s, key, lim, []step{{n: 4, allowed: true, remaining: 6, fresh: true}})
	res := reserve(t, b, s, key, lim, 3, 3)
	settleAt(t, s, res, 1, true, 5, "a reservation of 3 settled at 1 gives back 2, never more")
	// At 0 a reservation gives back what it reserved, and no more: the other admissions stay.
	res = reserve(t, b, s, key, lim, 2, 3)
	settleAt(t, s, res, 0, true, 5, "a refund never gives back more than was reserved")
}

func testSettleOverrun(t *testing.T, b Backend, a *algorithm) {
	s := b.Open(t)
	lim := a.perMinute(10)
	key := newKey()
	first := reserve(t, b, s, key, lim, 4, 6)
	settleAt(t, s, first, 7, true, 3, "an overrun of 3 that fits consumes 3")
	second := reserve(t, b, s, key, lim, 2, 1)
	settleAt(t, s, second, 5, false, 0, "an overrun consumes what is left") // 3 more, of which 1 fits
	big := a.withRoom(lim, 100)
	peekIs(t, s, key, big, 90, "an overrun never consumes beyond the limit")
	// On a full key an overrun consumes nothing.
	settleAt(t, s, first, 8, false, 0, "an overrun on a full key consumes nothing")
	peekIs(t, s, key, big, 90, "an overrun on a full key consumes nothing")
}

// testSettleWindowReplaced settles reservations whose windows the keys no longer hold: a refund lands
// nowhere — never in the window that replaced the reservation's — and an overrun counts in the
// window of now.
func testSettleWindowReplaced(t *testing.T, b Backend, a *algorithm) {
	const window = 600 * time.Millisecond
	s := b.Open(t)
	lim := a.limit(3, window)
	// The four calls at the end, a tenth of a window apart at most, fall in one window of the
	// clock's, from a reading that leaves half of it.
	timed(t, b, window/10, func(tm *timing) {
		refunded, overrun := newKey(), newKey()
		resRefund := reserve(t, b, s, refunded, lim, 3, 0)
		resOverrun := reserve(t, b, s, overrun, lim, 1, 2)
		// Once the key has returned to its full allowance the reservation weighs nothing: the sliding
		// window's two windows, GCRA's bucket drained. Any longer does as well.
		b.Sleep(t, lim.MaxWait()+window/4)
		if left := tm.windowLeft(aw(1, window)); left < window/2 {
			tm.sleep(left)
		}
		tm.run(s, refunded, lim, []step{{n: 1, allowed: true, remaining: 2, fresh: true}})
		tm.do(func() {
			settleAt(t, s, resRefund, 0, true, 2, "a refund of a window that has ended lands nowhere, never in a later window")
		})
		tm.run(s, overrun, lim, []step{{n: 1, allowed: true, remaining: 2, fresh: true}})
		tm.do(func() {
			settleAt(t, s, resOverrun, 3, true, 0, "an overrun of an ended window counts in the window of now")
		})
	})
}

func testSettleInvalid(t *testing.T, b Backend, a *algorithm) {
	s := b.Open(t)
	lim := a.perMinute(10)
	key := newKey()
	valid := reserve(t, b, s, key, lim, 1, 9)
	with := func(f func(res *admit.Reservation)) admit.Reservation { res := valid; f(&res); return res }
	// A done context: a Store that did I/O before validating would answer ErrUnavailable.
	done, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tc := range []struct {
		name   string
		res    admit.Reservation
		actual int64
		want   error
	}{
		{"actual_-1", valid, -1, admit.ErrInvalidRequest},
		{"actual_MaxRate+1", valid, bound.MaxRate + 1, admit.ErrInvalidRequest},
		{"token_0", with(func(res *admit.Reservation) { res.Token = 0 }), 1, admit.ErrInvalidRequest},
		{"cost_0", with(func(res *admit.Reservation) { res.Request.Cost = 0 }), 1, admit.ErrInvalidRequest},
		{"cost_above_the_limit", with(func(res *admit.Reservation) { res.Request.Cost = 11 }), 1, admit.ErrInvalidRequest},
		{"empty_key", with(func(res *admit.Reservation) { res.Request.Key = "" }), 1, admit.ErrInvalidRequest},
		{"invalid_limit", with(func(res *admit.Reservation) { res.Request.Limit.Rate = 0 }), 1, admit.ErrInvalidLimit},
		{"concurrency", with(func(res *admit.Reservation) {
			res.Request.Limit = admit.Limit{Name: "limittest", Algorithm: admit.Concurrency, Rate: 10, Period: time.Minute}
		}), 1, admit.ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, ctx := range []context.Context{t.Context(), done} {
				d, err := s.Settle(ctx, tc.res, tc.actual)
				if !errors.Is(err, tc.want) || errors.Is(err, admit.ErrUnavailable) || d.Allowed {
					t.Fatalf("Settle(actual %d) of %+v = %+v, %v; want an error matching %v only, before any I/O", tc.actual, tc.res, d, err, tc.want)
				}
			}
		})
	}
	peekIs(t, s, key, lim, 9, "an invalid settlement writes nothing")
}

// testSettleCorruptState settles on a key that holds another algorithm's state: an error matching
// ErrCorruptState, with nothing written. A sorted set (a sliding log's) is no other algorithm's
// state in any Store, and a hash (a sliding window's) no sliding log's.
func testSettleCorruptState(t *testing.T, b Backend, a *algorithm) {
	s := b.Open(t)
	other := slidingLog()
	if a.alg == admit.SlidingLog {
		other = slidingWindow()
		other.prepare(t, b)
	}
	key := newKey()
	olim := other.perMinute(10)
	run(t, b, s, key, olim, []step{{n: 2, allowed: true, remaining: 8, fresh: true}})
	res := admit.Reservation{Request: admit.Request{Key: key, Limit: a.perMinute(10), Cost: 3}, Token: 1}
	for _, actual := range []int64{1, 3, 5} {
		d, err := s.Settle(t.Context(), res, actual)
		if !errors.Is(err, admit.ErrCorruptState) || !errors.Is(err, admit.ErrUnavailable) || d.Allowed {
			t.Fatalf("Settle at %d under %v of a key holding %v state: %+v, %v; want ErrCorruptState", actual, res.Request.Limit, other.alg, d, err)
		}
	}
	peekIs(t, s, key, olim, 8, "a settlement on corrupt state writes nothing")
}
