package memstore_test

import (
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/limittest"
	"github.com/admit-dev/admit/memstore"
)

// A concurrency key's entry lives until its last lease expires, and is reclaimed then; releasing
// every lease removes it at once.
func TestConcurrencyEntryLifetime(t *testing.T) {
	clock := limittest.NewClock(time.Date(2025, 3, 1, 12, 0, 7, 250_000_000, time.UTC))
	s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	defer s.Close()
	lim := admit.Limit{Algorithm: admit.Concurrency, Rate: 3, Period: 10 * time.Second}
	a := take(t, s, "k", lim, 1)
	clock.Advance(3 * time.Second)
	b := take(t, s, "k", lim, 1)
	if a.Token == 0 || b.Token == 0 || a.Token == b.Token {
		t.Fatalf("tokens %d and %d; want two distinct, not 0", a.Token, b.Token)
	}
	if err := s.Release(t.Context(), admit.Lease{Key: "k", Limit: lim, Token: b.Token}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(7*time.Second - time.Nanosecond)
	if d := take(t, s, "k", lim, 0); d.Remaining != 2 || d.ResetAfter != time.Millisecond {
		t.Fatalf("1ns before the first lease expires: %+v; want 2 left, ResetAfter 1ms", d)
	}
	clock.Advance(time.Nanosecond)
	if _, removed := memstore.Sweep(s); removed != 1 || s.Len() != 0 {
		t.Fatalf("when the last lease expires: the sweep removed %d, %d left; want the entry removed", removed, s.Len())
	}
	c := take(t, s, "k", lim, 1)
	if err := s.Release(t.Context(), admit.Lease{Key: "k", Limit: lim, Token: c.Token}); err != nil || s.Len() != 0 {
		t.Fatalf("release of the only lease: %v, %d entries; want the entry removed", err, s.Len())
	}
}

// Acquiring and releasing a lease of a live key allocates nothing: the leases are kept in place.
func TestConcurrencyAllocs(t *testing.T) {
	s := memstore.New(memstore.Options{SweepInterval: -1})
	defer s.Close()
	lim := admit.Limit{Algorithm: admit.Concurrency, Rate: 3, Period: time.Minute}
	ctx := t.Context()
	r := admit.Request{Key: "k", Limit: lim, Cost: 1}
	hold, err := s.Take(ctx, r) // the key's entry stays while this lease is held
	if err != nil || !hold.Allowed {
		t.Fatal(hold, err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		d, err := s.Take(ctx, r)
		if err != nil || !d.Allowed {
			t.Fatal(d, err)
		}
		if err := s.Release(ctx, admit.Lease{Key: r.Key, Limit: lim, Token: d.Token}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("acquire and release of a live key: %v allocations; want 0", allocs)
	}
}
