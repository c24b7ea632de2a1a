package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/limittest"
	"github.com/admit-dev/admit/memstore"
)

// An overrun that needs a new entry in a full shard answers ErrFull and writes nothing, as a Take
// would; a refund needs no entry, and still answers.
func TestSettleInAFullStore(t *testing.T) {
	clock := limittest.NewClock(time.Unix(1_700_000_000, 0))
	s := memstore.New(memstore.Options{Now: clock.Now, Shards: 1, MaxEntries: 1, SweepInterval: -1})
	defer s.Close()
	ctx := context.Background()
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 5, Period: time.Second}
	d, err := s.Take(ctx, admit.Request{Key: "b", Limit: lim, Cost: 1})
	if err != nil || d.Token == 0 {
		t.Fatalf("reserve b: %+v, %v", d, err)
	}
	res := admit.Reservation{Request: admit.Request{Key: "b", Limit: lim, Cost: 1}, Token: d.Token}
	clock.Advance(time.Second) // b's window ends; a takes the only entry
	if d, err := s.Take(ctx, admit.Request{Key: "a", Limit: lim, Cost: 1}); err != nil || !d.Allowed {
		t.Fatalf("take a: %+v, %v", d, err)
	}
	if d, err := s.Settle(ctx, res, 3); !errors.Is(err, memstore.ErrFull) || d.Allowed {
		t.Fatalf("an overrun of b's ended reservation in a full Store: %+v, %v; want ErrFull", d, err)
	}
	if d, err := s.Settle(ctx, res, 0); err != nil || !d.Allowed || d.Remaining != 5 {
		t.Fatalf("a refund of b's ended reservation: %+v, %v; want nothing refunded, b missing with 5 left", d, err)
	}
	if n := s.Len(); n != 1 {
		t.Fatalf("the Store holds %d entries; want 1, a's", n)
	}
}
