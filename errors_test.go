package admit_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/validate"
)

// TestClientMessage: the message for a client names the mistake and its bound, not the packages
// that wrapped the error on its way; an undecided request's cause is not a client's business.
func TestClientMessage(t *testing.T) {
	r := admit.Request{Key: "k", Limit: admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Second}, Cost: 99}
	cost := r.Validate()
	for _, c := range []struct {
		err  error
		want string
	}{
		{cost, "invalid request: cost 99 outside 0-3"},
		{fmt.Errorf("memstore: %w", cost), "invalid request: cost 99 outside 0-3"},
		{fmt.Errorf("redisstore: take: request 1: %w", cost), "invalid request: cost 99 outside 0-3"},
		{fmt.Errorf("memstore: %w: request ID reused for a different request", admit.ErrInvalidRequest), "invalid request: request ID reused for a different request"},
		{fmt.Errorf("%w (policy %q)", cost, "per-second"), `invalid request: cost 99 outside 0-3 (policy "per-second")`},
		{admit.ErrInvalidRequest, "invalid request"},
		{(admit.Limit{Algorithm: admit.FixedWindow, Period: time.Second}).Validate(), "invalid limit: rate 0 outside 1-1000000000000000"},
		{fmt.Errorf("redisstore: %w: connection refused", admit.ErrUnavailable), "limiter unavailable"},
		{fmt.Errorf("memstore: %w: key %q holds text", admit.ErrCorruptState, "rl:a"), "limiter unavailable"},
		{errors.New("something else"), "limiter unavailable"},
		{nil, ""},
	} {
		if got := validate.ClientMessage(c.err); got != c.want {
			t.Errorf("ClientMessage(%v) = %q; want %q", c.err, got, c.want)
		}
	}
}
