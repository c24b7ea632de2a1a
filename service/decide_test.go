package service_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
)

// recordingStore records the Requests of each TakeAll on a real Store: its keys and costs.
type recordingStore struct {
	admit.Store
	mu    sync.Mutex
	calls [][]string // per TakeAll, "key=cost" of each Request
}

func (s *recordingStore) TakeAll(ctx context.Context, rs []admit.Request, ds []admit.Decision) (bool, error) {
	call := make([]string, len(rs))
	for i, r := range rs {
		call[i] = fmt.Sprintf("%s=%d", r.Key, r.Cost)
	}
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.mu.Unlock()
	return s.Store.TakeAll(ctx, rs, ds)
}

// itemService returns a Service of no policies on a recordingStore over a fresh memstore, and the
// keys of the Items it will make, by Item.
func itemService(t *testing.T) (*service.Service, *recordingStore, *admit.KeyBuilder) {
	t.Helper()
	mem := memstore.New(memstore.Options{})
	t.Cleanup(func() { mem.Close() })
	store := &recordingStore{Store: mem}
	keys, err := admit.NewKeyBuilder([]byte("service test secret of 32 bytes"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := service.New(store, keys, &policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s, store, keys
}

// call returns the record of a TakeAll of items at costs, keyed as s makes them.
func call(t *testing.T, keys *admit.KeyBuilder, items []service.Item, costs ...int64) []string {
	t.Helper()
	c := make([]string, len(items))
	for i, it := range items {
		k, err := keys.Key(it.Limit, it.Version, it.Subject)
		if err != nil {
			t.Fatal(err)
		}
		c[i] = fmt.Sprintf("%s=%d", k, costs[i])
	}
	return c
}

// TestDecideItemsSeparateInOneSlot: decided Separately, two Items whose keys happen to share a
// hash slot are still decided each on its own: the one over its limit does not keep the other from
// being counted. BySlot they are decided together: neither is counted, and the other's Decision
// says it would fit.
func TestDecideItemsSeparateInOneSlot(t *testing.T) {
	s, _, _ := itemService(t)
	lim := admit.Limit{Name: "envoy", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Hour}
	for _, tc := range []struct {
		g    service.Grouping
		want int64 // the first Item's Remaining after the second decision: counted twice, or never
	}{{service.Separately, 0}, {service.BySlot, 2}} {
		slot := fmt.Sprintf("same-slot-%d", tc.g)
		items := []service.Item{
			{Limit: lim, Version: "1", Subject: admit.Subject{ID: "a", Slot: slot}, Cost: 1},
			{Limit: lim, Version: "1", Subject: admit.Subject{ID: "b", Slot: slot}, Cost: 3}, // can never fit
		}
		ds := make([]admit.Decision, 2)
		for range 2 {
			if err := s.DecideItems(t.Context(), items, ds, tc.g); err != nil {
				t.Fatal(err)
			}
		}
		if ds[1].Allowed {
			t.Errorf("grouping %d: a cost of 3 under a limit of 2 allowed", tc.g)
		}
		if got := ds[0].Remaining; got != tc.want || !ds[0].Allowed {
			t.Errorf("grouping %d: the other Item: %+v; want it to fit, with %d remaining", tc.g, ds[0], tc.want)
		}
	}
}

// TestDecideItemsGroups checks which Items are decided together, by the TakeAll calls the Store
// sees: Separately one call per Item, in order, a repeated Item counted once per repetition;
// BySlot one call per slot, in the order of its first Item, the costs of one key under one Limit
// summed, the same key under another Limit apart, at most bound.MaxRequests keys a call, and a
// group with an Item over its capacity peeked whole, unless that Item is in shadow mode.
func TestDecideItemsGroups(t *testing.T) {
	lim := admit.Limit{Name: "per-hour", Algorithm: admit.FixedWindow, Rate: 3, Period: time.Hour}
	other := lim
	other.Rate = 10
	shadow := lim
	shadow.Name, shadow.Shadow = "shadowed", true
	item := func(l admit.Limit, id, slot string, cost int64) service.Item {
		return service.Item{Limit: l, Version: "1", Subject: admit.Subject{ID: id, Slot: slot}, Cost: cost}
	}
	x, y := item(lim, "x", "s1", 1), item(lim, "y", "s2", 2)
	xOther := item(other, "x", "s1", 1)
	t.Run("separately", func(t *testing.T) {
		s, store, keys := itemService(t)
		items := []service.Item{x, y, x}
		if err := s.DecideItems(t.Context(), items, make([]admit.Decision, 3), service.Separately); err != nil {
			t.Fatal(err)
		}
		want := [][]string{call(t, keys, items[:1], 1), call(t, keys, items[1:2], 2), call(t, keys, items[:1], 1)}
		if !slices.EqualFunc(store.calls, want, slices.Equal) {
			t.Errorf("TakeAll calls %v; want %v", store.calls, want)
		}
	})
	t.Run("by slot", func(t *testing.T) {
		s, store, keys := itemService(t)
		x2 := item(lim, "x2", "s1", 1)
		items := []service.Item{x, y, x, xOther, x2}
		ds := make([]admit.Decision, len(items))
		if err := s.DecideItems(t.Context(), items, ds, service.BySlot); err != nil {
			t.Fatal(err)
		}
		// s1: x (twice, summed) and x2; s2: y; then x's key under the other rate (a fixed
		// window's key has no rate), apart.
		want := [][]string{
			call(t, keys, []service.Item{x, x2}, 2, 1),
			call(t, keys, []service.Item{y}, 2),
			call(t, keys, []service.Item{xOther}, 1),
		}
		if strings.TrimSuffix(want[0][0], "=2") != strings.TrimSuffix(want[2][0], "=1") {
			t.Fatalf("x's keys under the two rates differ: %v", want)
		}
		if !slices.EqualFunc(store.calls, want, slices.Equal) {
			t.Errorf("TakeAll calls %v; want %v", store.calls, want)
		}
		if ds[0] != ds[2] || ds[0].Remaining != 1 {
			t.Errorf("x's two Decisions %+v, %+v; want one, 1 remaining of 3 after 2", ds[0], ds[2])
		}
	})
	t.Run("over capacity", func(t *testing.T) {
		s, store, keys := itemService(t)
		big := item(lim, "big", "s1", 4)
		items := []service.Item{x, big, y, item(shadow, "z", "s2", 4)}
		ds := make([]admit.Decision, len(items))
		if err := s.DecideItems(t.Context(), items, ds, service.BySlot); err != nil {
			t.Fatal(err)
		}
		// s1 is peeked whole; in s2 the shadow Item is peeked alone, and y is counted.
		want := [][]string{
			call(t, keys, items[:2], 0, 0),
			call(t, keys, items[2:], 2, 0),
		}
		if !slices.EqualFunc(store.calls, want, slices.Equal) {
			t.Errorf("TakeAll calls %v; want %v", store.calls, want)
		}
		if !ds[0].Allowed || ds[1].Allowed || !ds[2].Allowed || ds[3].Allowed {
			t.Errorf("allowed %v %v %v %v; want x (a peek that fits), not big, y, not the shadow Item",
				ds[0].Allowed, ds[1].Allowed, ds[2].Allowed, ds[3].Allowed)
		}
	})
	t.Run("full group", func(t *testing.T) {
		s, store, _ := itemService(t)
		items := make([]service.Item, bound.MaxRequests+1)
		for i := range items {
			items[i] = item(lim, fmt.Sprint("k", i), "one-slot", 1)
		}
		if err := s.DecideItems(t.Context(), items, make([]admit.Decision, len(items)), service.BySlot); err != nil {
			t.Fatal(err)
		}
		if len(store.calls) != 2 || len(store.calls[0]) != bound.MaxRequests || len(store.calls[1]) != 1 {
			t.Errorf("%d TakeAll calls of %d Items of one slot: %v; want %d Requests, then 1", len(store.calls), len(items), store.calls, bound.MaxRequests)
		}
	})
}

// TestDecideItemsErrors: an Item that cannot be decided is an *ItemError naming it, and bad
// arguments an invalid request, all before any call of the Store.
func TestDecideItemsErrors(t *testing.T) {
	s, store, _ := itemService(t)
	lim := admit.Limit{Name: "per-hour", Algorithm: admit.FixedWindow, Rate: 3, Period: time.Hour}
	ok := service.Item{Limit: lim, Version: "1", Subject: admit.Subject{ID: "a"}, Cost: 1}
	bad := func(f func(*service.Item)) []service.Item {
		it := ok
		f(&it)
		return []service.Item{ok, it}
	}
	for _, g := range []service.Grouping{service.Separately, service.BySlot} {
		for name, items := range map[string][]service.Item{
			"invalid limit": bad(func(it *service.Item) { it.Limit.Rate = 0 }),
			"no limit name": bad(func(it *service.Item) { it.Limit.Name = "" }),
			"bad version":   bad(func(it *service.Item) { it.Version = "" }),
			"empty subject": bad(func(it *service.Item) { it.Subject = admit.Subject{} }),
			"negative cost": bad(func(it *service.Item) { it.Cost = -1 }),
			"long subject":  bad(func(it *service.Item) { it.Subject.ID = strings.Repeat("x", bound.MaxSubjectLen+1) }),
		} {
			err := s.DecideItems(t.Context(), items, make([]admit.Decision, 2), g)
			var ie *service.ItemError
			if !errors.As(err, &ie) || ie.Index != 1 || !(errors.Is(err, admit.ErrInvalidLimit) || errors.Is(err, admit.ErrInvalidRequest)) {
				t.Errorf("grouping %d, %s: %v; want an ItemError of item 1, an invalid limit or request", g, name, err)
			}
		}
	}
	if err := s.DecideItems(t.Context(), []service.Item{ok}, make([]admit.Decision, 2), service.BySlot); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Errorf("2 Decisions for 1 Item: %v; want an invalid request", err)
	}
	if err := s.DecideItems(t.Context(), []service.Item{ok}, make([]admit.Decision, 1), service.Grouping(99)); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Errorf("grouping 99: %v; want an invalid request", err)
	}
	if err := s.DecideItems(t.Context(), nil, nil, service.BySlot); err != nil {
		t.Errorf("no Items: %v; want nothing to do", err)
	}
	if len(store.calls) != 0 {
		t.Errorf("%d calls of the Store; want none", len(store.calls))
	}
}
