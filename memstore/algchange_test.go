package memstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/limittest"
	"github.com/admit-dev/admit/memstore"
)

// A key whose state under one algorithm has ended is missing, as its Redis key has expired: a
// Take or a Settle under another algorithm starts it afresh. Only live state of another algorithm
// is corrupt. (Before, an ended entry of another algorithm answered ErrCorruptState until reclaim
// happened to remove it.)
func TestEndedStateOfAnotherAlgorithmIsMissing(t *testing.T) {
	limits := []admit.Limit{
		{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Second},
		{Algorithm: admit.SlidingWindow, Rate: 3, Period: time.Second},
		{Algorithm: admit.SlidingLog, Rate: 3, Period: time.Second},
		{Algorithm: admit.GCRA, Rate: 3, Period: time.Second},
		{Algorithm: admit.Concurrency, Rate: 3, Period: time.Second},
	}
	for _, first := range limits {
		for _, then := range limits {
			if first.Algorithm == then.Algorithm {
				continue
			}
			t.Run(first.Algorithm.String()+"/"+then.Algorithm.String(), func(t *testing.T) {
				clock := limittest.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
				s := memstore.New(memstore.Options{Now: clock.Now, Shards: 1, SweepInterval: -1})
				defer s.Close()
				take(t, s, "k", first, 1)
				if _, err := s.Take(t.Context(), admit.Request{Key: "k", Limit: then, Cost: 1}); !errors.Is(err, admit.ErrCorruptState) {
					t.Fatalf("Take under %v of a key live under %v: %v; want ErrCorruptState", then.Algorithm, first.Algorithm, err)
				}
				clock.Advance(2 * time.Second) // every state of first has ended
				d, err := s.Take(t.Context(), admit.Request{Key: "k", Limit: then, Cost: 1})
				if err != nil || !d.Allowed || d.Remaining != 2 {
					t.Fatalf("Take under %v after the state under %v ended: %+v, %v; want allowed, 2 left", then.Algorithm, first.Algorithm, d, err)
				}
				if then.Algorithm == admit.Concurrency {
					return // no Settle
				}
				// Settle reads the key as Take does: an overrun on ended state of first creates then's.
				if _, err := s.Take(t.Context(), admit.Request{Key: "k2", Limit: first, Cost: 1}); err != nil {
					t.Fatal(err)
				}
				tok := take(t, s, "k3", then, 1).Token
				clock.Advance(2 * time.Second)
				res := admit.Reservation{Request: admit.Request{Key: "k2", Limit: then, Cost: 1}, Token: tok}
				if d, err := s.Settle(t.Context(), res, 2); err != nil || !d.Allowed || d.Remaining != 2 {
					t.Fatalf("Settle under %v after the state under %v ended: %+v, %v; want allowed, 2 left", then.Algorithm, first.Algorithm, d, err)
				}
			})
		}
	}
}
