package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/replsession"
	"github.com/admit-dev/admit/internal/validate"
)

// A failing Pending's Wait reports that its replicas did not confirm.
type unconfirmed struct{}

func (unconfirmed) Wait(context.Context) error {
	return fmt.Errorf("test: %w", validate.ErrUndecided)
}
func (unconfirmed) Release() {}

// The Decisions of a call in a replsession count when the session ends: as they were when its one
// wait confirms them; each as unavailable when it does not, or when the request's next call failed
// (Abort). A call after the session ended counts at once.
func TestCountsAfterTheSession(t *testing.T) {
	s, reg := newStore(t)
	lim := admit.Limit{Name: "payment", Algorithm: admit.FixedWindow, Rate: 100, Period: time.Hour}
	take := func(ctx context.Context, key string) {
		t.Helper()
		rs := []admit.Request{{Key: "{" + key + "}:a", Limit: lim, Cost: 1}, {Key: "{" + key + "}:b", Limit: lim, Cost: 1}}
		if ok, err := s.TakeAll(ctx, rs, make([]admit.Decision, 2)); err != nil || !ok {
			t.Fatalf("TakeAll: %v, %v", ok, err)
		}
	}
	want := func(step string, allowed, unavailable float64) {
		t.Helper()
		if got := decisions(t, reg, "payment", "allowed"); got != allowed {
			t.Errorf("%s: %v allowed, want %v", step, got, allowed)
		}
		if got := decisions(t, reg, "payment", "unavailable"); got != unavailable {
			t.Errorf("%s: %v unavailable, want %v", step, got, unavailable)
		}
	}

	ctx, sess := replsession.New(t.Context())
	take(ctx, "confirmed")
	take(ctx, "confirmed2")
	want("before the session's Wait", 0, 0)
	if err := sess.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	want("after a Wait that confirmed", 4, 0)
	take(ctx, "after")
	want("a call after the session ended", 6, 0)

	ctx, sess = replsession.New(t.Context())
	sess.Join("store", func() replsession.Pending { return unconfirmed{} })
	take(ctx, "undecided")
	want("before a Wait that does not confirm", 6, 0)
	if err := sess.Wait(ctx); !errors.Is(err, admit.ErrUnavailable) {
		t.Fatalf("Wait: %v, want undecided", err)
	}
	want("after a Wait that did not confirm", 6, 2)

	ctx, sess = replsession.New(t.Context())
	take(ctx, "aborted")
	sess.Abort(fmt.Errorf("test: the next call: %w", admit.ErrUnavailable))
	want("after Abort", 6, 4)
}
