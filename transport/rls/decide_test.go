package rls

import (
	"context"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/slot"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/policy/envoyconf"
)

// TestDecideSeparateInOneSlot: outside an atomic domain, two descriptors whose keys happen to
// share a hash slot are still decided each on its own: the one over its limit does not keep the
// other from being counted. In an atomic domain they are decided together: neither is counted,
// and the other's status says it would fit.
func TestDecideSeparateInOneSlot(t *testing.T) {
	store := memstore.New(memstore.Options{})
	t.Cleanup(func() { store.Close() })
	s := &Server{store: store}
	rule := &envoyconf.Rule{Limit: admit.Limit{Name: "envoy", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Hour}}
	for _, tc := range []struct {
		atomic bool
		want   int64 // the first key's Remaining after the second decision: counted twice, or never
	}{{false, 0}, {true, 2}} {
		a, b := "rl:a:{same-slot}:a", "rl:a:{same-slot}:b"
		if tc.atomic {
			a, b = "rl:b:{same-slot}:a", "rl:b:{same-slot}:b"
		}
		if slot.Of(a) != slot.Of(b) {
			t.Fatal("the keys do not share a slot")
		}
		checks := []check{{rule: rule, key: a, cost: 1}, {rule: rule, key: b, cost: 3}} // b can never fit
		for range 2 {
			if err := s.decide(context.Background(), checks, tc.atomic); err != nil {
				t.Fatal(err)
			}
		}
		if checks[1].d.Allowed {
			t.Errorf("atomic %v: a cost of 3 under a limit of 2 allowed", tc.atomic)
		}
		if got := checks[0].d.Remaining; got != tc.want || !checks[0].d.Allowed {
			t.Errorf("atomic %v: the other key: %+v; want it to fit, with %d remaining", tc.atomic, checks[0].d, tc.want)
		}
	}
}
