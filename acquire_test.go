package admit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/limittest"
	"github.com/admit-dev/admit/memstore"
)

// acquireSetup returns a Limiter of limits on a memstore with a fake clock.
func acquireSetup(t *testing.T, limits ...admit.Limit) (*admit.Limiter, *limittest.Clock) {
	t.Helper()
	clock := limittest.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	t.Cleanup(func() { s.Close() })
	keys, err := admit.NewKeyBuilder([]byte("acquire test secret"))
	if err != nil {
		t.Fatal(err)
	}
	return admit.NewLimiter(s, keys, limits...), clock
}

var inflight = admit.Limit{Name: "inflight", Algorithm: admit.Concurrency, Rate: 2, Period: time.Minute}

// acquire calls l.Admit for one unit and fails the test on an error.
func acquire(t *testing.T, l *admit.Limiter, ctx context.Context, subject string) (func(), admit.Decision) {
	t.Helper()
	d, release, err := l.Admit(ctx, admit.Subject{ID: subject}, 1, "", nil)
	if err != nil {
		t.Fatalf("Admit(%q): %v", subject, err)
	}
	return release, d
}

// peek returns what subject has left under l.
func peek(t *testing.T, l *admit.Limiter, subject string) int64 {
	t.Helper()
	d, err := l.AllowN(context.Background(), admit.Subject{ID: subject}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return d.Remaining
}

func TestAcquireReleaseFreesTheLease(t *testing.T) {
	l, _ := acquireSetup(t, inflight)
	ctx := context.Background()
	r1, d1 := acquire(t, l, ctx, "alice")
	_, d2 := acquire(t, l, ctx, "alice")
	if !d1.Allowed || !d2.Allowed || d1.Token == 0 || d1.Token == d2.Token {
		t.Fatalf("two acquires of 2 in flight: %+v, %+v; want both admitted with distinct tokens", d1, d2)
	}
	if d, _, _ := l.Admit(ctx, admit.Subject{ID: "alice"}, 1, "", nil); d.Allowed {
		t.Fatalf("a third acquire: %+v; want rejected", d)
	}
	r1()
	if left := peek(t, l, "alice"); left != 1 {
		t.Fatalf("after a release: %d left; want 1", left)
	}
	// Releasing twice frees nothing more: the other lease is still held.
	r1()
	r1()
	if left := peek(t, l, "alice"); left != 1 {
		t.Fatalf("after releasing one lease three times: %d left; want 1", left)
	}
}

func TestAcquireReleaseAfterCancel(t *testing.T) {
	l, _ := acquireSetup(t, inflight)
	ctx, cancel := context.WithCancel(context.Background())
	release, d := acquire(t, l, ctx, "bob")
	if !d.Allowed {
		t.Fatalf("acquire: %+v", d)
	}
	cancel() // the request is over, its context done: the lease must still be released
	release()
	if left := peek(t, l, "bob"); left != 2 {
		t.Fatalf("after a release with the request's context cancelled: %d left; want 2", left)
	}
}

func TestAcquireRejectedReleaseIsANoOp(t *testing.T) {
	one := inflight
	one.Rate = 1
	l, _ := acquireSetup(t, one)
	ctx := context.Background()
	held, _ := acquire(t, l, ctx, "carol")
	release, d := acquire(t, l, ctx, "carol")
	if d.Allowed || d.Token != 0 {
		t.Fatalf("an acquire of a full key: %+v; want rejected, no token", d)
	}
	release()
	if left := peek(t, l, "carol"); left != 0 {
		t.Fatalf("after the release of a rejected acquire: %d left; want 0, the other lease still held", left)
	}
	held()
	if left := peek(t, l, "carol"); left != 1 {
		t.Fatalf("after the holder's release: %d left; want 1", left)
	}
}

// A Limiter of a rate and a concurrency limit: an acquire takes a unit of the rate and a lease, all
// or nothing; a release gives back the lease only, never the rate's unit.
func TestAcquireMixesGCRAAndConcurrency(t *testing.T) {
	rate := admit.Limit{Name: "rate", Algorithm: admit.GCRA, Rate: 3, Period: time.Second}
	l, clock := acquireSetup(t, rate, inflight)
	ctx := context.Background()
	ds := make([]admit.Decision, 2)
	var releases []func()
	for i := range 2 {
		release, d := acquire(t, l, ctx, "dave")
		if !d.Allowed {
			t.Fatalf("acquire %d: %+v; want admitted", i, d)
		}
		releases = append(releases, release)
	}
	// The leases are all held: rejected by inflight, and the rate consumes nothing.
	if d, _, _ := l.Admit(ctx, admit.Subject{ID: "dave"}, 1, "", nil); d.Allowed || d.Limit != inflight {
		t.Fatalf("acquire with both leases held: %+v; want rejected by inflight", d)
	}
	if _, err := l.Take(ctx, admit.Subject{ID: "dave"}, 0, "", ds); err != nil || ds[0].Remaining != 1 {
		t.Fatalf("peek: %+v, %v; want the rate at 1 left (the rejection consumed nothing)", ds, err)
	}
	releases[0]()
	// A lease is free, the rate has 1 left: admitted; then the rate is spent: rejected by it, no lease.
	release, d := acquire(t, l, ctx, "dave")
	if !d.Allowed {
		t.Fatalf("acquire after a release: %+v; want admitted", d)
	}
	release()
	if d, _, _ := l.Admit(ctx, admit.Subject{ID: "dave"}, 1, "", nil); d.Allowed || d.Limit != rate {
		t.Fatalf("acquire with the rate spent: %+v; want rejected by rate", d)
	}
	if _, err := l.Take(ctx, admit.Subject{ID: "dave"}, 0, "", ds); err != nil || ds[1].Remaining != 1 {
		t.Fatalf("peek: %+v, %v; want inflight at 1 left (a rejection by the rate acquires no lease)", ds, err)
	}
	clock.Advance(2 * time.Second)
	releases[1]()
	if _, err := l.Take(ctx, admit.Subject{ID: "dave"}, 0, "", ds); err != nil || ds[0].Remaining != 3 || ds[1].Remaining != 2 {
		t.Fatalf("after two seconds and every release: %+v, %v; want everything back", ds, err)
	}
}

// TestConcurrencyCostIsZeroOrOne: under a Concurrency Limit a request costs 0 (a peek) or 1 (one
// lease); a Limiter refuses any other cost — above the limit or not, alone or beside a Limit it
// would fit — as an invalid request, by every entry point, and consumes nothing.
func TestConcurrencyCostIsZeroOrOne(t *testing.T) {
	cc := admit.Limit{Name: "cc", Algorithm: admit.Concurrency, Rate: 50, Period: time.Minute}
	tokens := admit.Limit{Name: "tokens", Algorithm: admit.GCRA, Rate: 1000, Period: time.Minute}
	alone, _ := acquireSetup(t, cc)
	mixed, _ := acquireSetup(t, tokens, cc)
	ctx := context.Background()
	for _, l := range []*admit.Limiter{alone, mixed} {
		for _, n := range []int64{51, 2, -1} {
			if d, err := l.AllowN(ctx, admit.Subject{ID: "erin"}, n); !errors.Is(err, admit.ErrInvalidRequest) {
				t.Errorf("%d limits: AllowN(%d) = %+v, %v; want admit.ErrInvalidRequest", len(l.Limits()), n, d, err)
			}
			if d, _, err := l.Admit(ctx, admit.Subject{ID: "erin"}, n, "", nil); !errors.Is(err, admit.ErrInvalidRequest) {
				t.Errorf("%d limits: Admit(%d) = %+v, %v; want admit.ErrInvalidRequest", len(l.Limits()), n, d, err)
			}
			if d, _, err := l.Reserve(ctx, admit.Subject{ID: "erin"}, n); !errors.Is(err, admit.ErrInvalidRequest) {
				t.Errorf("%d limits: Reserve(%d) = %+v, %v; want admit.ErrInvalidRequest", len(l.Limits()), n, d, err)
			}
		}
		if got := peek(t, l, "erin"); got != 50 {
			t.Errorf("%d limits: %d left after the invalid requests; want 50: they took no lease", len(l.Limits()), got)
		}
		release, d := acquire(t, l, ctx, "erin")
		if !d.Allowed || peek(t, l, "erin") != 49 {
			t.Errorf("%d limits: Admit = %+v; want admitted, one lease taken", len(l.Limits()), d)
		}
		release()
	}
}

// TestHold checks admit.Hold directly: it decides its Requests all-or-nothing, fills the
// Decisions, and its release ends the Concurrency lease once, leaving the other Limit's count.
func TestHold(t *testing.T) {
	s := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { s.Close() })
	perHour := admit.Limit{Name: "per-hour", Algorithm: admit.FixedWindow, Rate: 10, Period: time.Hour}
	one := admit.Limit{Name: "inflight", Algorithm: admit.Concurrency, Rate: 1, Period: time.Minute}
	rs := []admit.Request{{Key: "rl:inflight:v1:{a}", Limit: one, Cost: 1}, {Key: "rl:per-hour:v1:{a}", Limit: perHour, Cost: 1}}
	ds := make([]admit.Decision, 2)
	allowed, release, err := admit.Hold(context.Background(), s, rs, ds)
	if err != nil || !allowed || !ds[0].Allowed || ds[0].Token == 0 || ds[1].Remaining != 9 {
		t.Fatalf("Hold = %v, %v, %+v; want allowed with a lease", allowed, err, ds)
	}
	allowed, release2, err := admit.Hold(context.Background(), s, rs, ds)
	if err != nil || allowed {
		t.Fatalf("second Hold = %v, %v; want rejected: one in flight", allowed, err)
	}
	release2() // nothing held
	release()
	release()
	if allowed, _, err := admit.Hold(context.Background(), s, rs, ds); err != nil || !allowed || ds[1].Remaining != 8 {
		t.Fatalf("Hold after release = %v, %v, %+v; want allowed, per-hour 8 left", allowed, err, ds)
	}
	if _, release, err := admit.Hold(context.Background(), s, rs, ds[:1]); err == nil || release == nil {
		t.Errorf("Hold with too few Decisions = %v; want an error and a release", err)
	}
}
