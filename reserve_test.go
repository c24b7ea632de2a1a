package admit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/memstore"
)

// newReserveLimiter returns a Limiter of limits on a memstore. Its fixed windows start at each key's
// first admission and last a minute or more: none ends during a test.
func newReserveLimiter(t *testing.T, limits ...admit.Limit) *admit.Limiter {
	t.Helper()
	s := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { s.Close() })
	return admit.NewLimiter(s, newKeyBuilder(t), limits...)
}

// remainingOf peeks subject's keys under every Limit of l and returns what each has left.
func remainingOf(t *testing.T, l *admit.Limiter, subject string) []int64 {
	t.Helper()
	ds := make([]admit.Decision, len(l.Limits()))
	if _, err := l.Take(context.Background(), admit.Subject{ID: subject}, 0, "", ds); err != nil {
		t.Fatal(err)
	}
	left := make([]int64, len(ds))
	for i, d := range ds {
		left[i] = d.Remaining
	}
	return left
}

var perMinute = admit.Limit{Name: "per-minute", Algorithm: admit.FixedWindow, Rate: 10, Period: time.Minute}

func TestReserveThenSettleLower(t *testing.T) {
	l := newReserveLimiter(t, perMinute)
	ctx := context.Background()
	d, settle, err := l.Reserve(ctx, admit.Subject{ID: "alice"}, 8)
	if err != nil || !d.Allowed || d.Remaining != 2 || d.Token == 0 {
		t.Fatalf("Reserve(8) = %+v, %v; want allowed with 2 left and a token", d, err)
	}
	d, err = settle(ctx, 3)
	if err != nil || !d.Allowed || d.Remaining != 7 {
		t.Fatalf("settle(3) of 8 reserved = %+v, %v; want 7 left: 5 units back", d, err)
	}
	if got := remainingOf(t, l, "alice"); got[0] != 7 {
		t.Fatalf("after settling: %d left; want 7", got[0])
	}
	// Settling again settles nothing.
	if _, err := settle(ctx, 0); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Fatalf("a second settle: %v; want ErrInvalidRequest", err)
	}
	if got := remainingOf(t, l, "alice"); got[0] != 7 {
		t.Fatalf("after a second settle: %d left; want 7, unchanged", got[0])
	}
}

func TestReserveRejectedSettlesNothing(t *testing.T) {
	l := newReserveLimiter(t, perMinute)
	ctx := context.Background()
	if _, _, err := l.Reserve(ctx, admit.Subject{ID: "bob"}, 8); err != nil {
		t.Fatal(err)
	}
	d, settle, err := l.Reserve(ctx, admit.Subject{ID: "bob"}, 5)
	if err != nil || d.Allowed || d.Token != 0 {
		t.Fatalf("Reserve(5) with 2 left = %+v, %v; want rejected, no token", d, err)
	}
	if _, err := settle(ctx, 0); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Fatalf("settle of a rejected reservation: %v; want ErrInvalidRequest", err)
	}
	if got := remainingOf(t, l, "bob"); got[0] != 2 {
		t.Fatalf("after settling a rejected reservation: %d left; want 2", got[0])
	}
	// An invalid estimate reserves nothing, and its settle errs too.
	_, settle, err = l.Reserve(ctx, admit.Subject{ID: "bob"}, -1)
	if !errors.Is(err, admit.ErrInvalidRequest) {
		t.Fatalf("Reserve(-1): %v; want ErrInvalidRequest", err)
	}
	if _, err := settle(ctx, 0); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Fatalf("settle of an invalid reservation: %v; want ErrInvalidRequest", err)
	}
}

// Two policies, settled together: each gets its refund, or its overrun as far as it fits, and settle
// returns the deciding Decision.
func TestReserveOfTwoPolicies(t *testing.T) {
	perDay := admit.Limit{Name: "per-day", Algorithm: admit.FixedWindow, Rate: 100, Period: 24 * time.Hour}
	l := newReserveLimiter(t, perMinute, perDay)
	ctx := context.Background()
	_, settle, err := l.Reserve(ctx, admit.Subject{ID: "carol"}, 8)
	if err != nil {
		t.Fatal(err)
	}
	d, err := settle(ctx, 2)
	if err != nil || !d.Allowed || d.Limit.Name != "per-minute" || d.Remaining != 8 {
		t.Fatalf("settle(2) of 8 reserved = %+v, %v; want per-minute deciding with 8 left", d, err)
	}
	if got := remainingOf(t, l, "carol"); got[0] != 8 || got[1] != 98 {
		t.Fatalf("after settling at 2: %v left; want [8 98]", got)
	}
	// An overrun of 7 fits per-day whole, per-minute only in part (5 left).
	_, settle, err = l.Reserve(ctx, admit.Subject{ID: "dave"}, 5)
	if err != nil {
		t.Fatal(err)
	}
	d, err = settle(ctx, 12)
	if err != nil || d.Allowed || d.Limit.Name != "per-minute" || d.Remaining != 0 || d.RetryAfter <= 0 {
		t.Fatalf("settle(12) of 5 reserved = %+v, %v; want per-minute deciding, not allowed, 0 left", d, err)
	}
	if got := remainingOf(t, l, "dave"); got[0] != 0 || got[1] != 88 {
		t.Fatalf("after an overrun of 7: %v left; want [0 88]: per-minute consumed what it had, per-day all 7", got)
	}
}
