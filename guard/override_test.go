package guard_test

import (
	"errors"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/guard"
)

// overrideKeyOf returns the override key of policy for a key "rl:<...>:{<tag>}": the same tag.
func overrideKeyOf(policy, tag string) string { return "rl:" + policy + ":o:{" + tag + "}" }

// A rejection remembered for a Request with an OverrideKey is forgotten when an Override of that
// key is set or deleted through the cache, or when Forget names the override key (an Override set
// through another instance): the next Take asks the backend and is decided under the numbers in
// force. A rejection of another subject stays remembered.
func TestOverLimitForgetsOverrides(t *testing.T) {
	clock := newClock()
	backend := &counting{next: newMem(t, clock)}
	cache := guard.NewOverLimitCache(backend, guard.OverLimitOptions{Now: clock.Now})
	lim := admit.Limit{Name: "api", Algorithm: admit.FixedWindow, Rate: 1, Period: time.Minute}
	alice := admit.Request{Key: "rl:api:v1-fw60000:{alice}", Limit: lim, Cost: 1, OverrideKey: overrideKeyOf("api", "alice")}
	bob := admit.Request{Key: "rl:api:v1-fw60000:{bob}", Limit: lim, Cost: 1, OverrideKey: overrideKeyOf("api", "bob")}
	fillAndCache := func() {
		t.Helper()
		for _, r := range []admit.Request{alice, bob} {
			for take(t, cache, r).Allowed {
			}
			before := backend.calls.Load()
			if d := take(t, cache, r); d.Allowed || backend.calls.Load() != before {
				t.Fatalf("%s: a rejection not answered from the cache: %+v", r.Key, d)
			}
		}
	}
	asks := func(r admit.Request, why string) admit.Decision {
		t.Helper()
		before := backend.calls.Load()
		d := take(t, cache, r)
		if backend.calls.Load() == before {
			t.Errorf("%s: %s: answered from the cache; want the backend asked", r.Key, why)
		}
		return d
	}
	answersLocally := func(r admit.Request, why string) {
		t.Helper()
		before := backend.calls.Load()
		take(t, cache, r)
		if backend.calls.Load() != before {
			t.Errorf("%s: %s: the backend was asked; want the rejection remembered", r.Key, why)
		}
	}

	fillAndCache()
	if err := cache.SetOverride(t.Context(), admit.Override{Key: alice.OverrideKey, Rate: 5}); err != nil {
		t.Fatal(err)
	}
	if d := asks(alice, "after SetOverride"); !d.Allowed || !d.Overridden || d.Limit.Rate != 5 {
		t.Errorf("after SetOverride of 5: %+v; want admitted, overridden, rate 5", d)
	}
	answersLocally(bob, "another subject's, after SetOverride")

	// A rejection under the Override is remembered with its numbers, and answered so.
	for take(t, cache, alice).Allowed {
	}
	before := backend.calls.Load()
	if d := take(t, cache, alice); d.Allowed || !d.Overridden || d.Limit.Rate != 5 || backend.calls.Load() != before {
		t.Errorf("a remembered rejection under an Override: %+v, backend asked %v; want overridden at rate 5, answered locally", d, backend.calls.Load() != before)
	}

	if existed, err := cache.DeleteOverride(t.Context(), alice.OverrideKey); err != nil || !existed {
		t.Fatalf("DeleteOverride: %v, %v", existed, err)
	}
	if d := asks(alice, "after DeleteOverride"); d.Allowed || d.Overridden || d.Limit != lim {
		t.Errorf("after DeleteOverride: %+v; want rejected under the Limit's own numbers", d)
	}

	// An Override set through another instance: the listener forgets its key.
	answersLocally(alice, "before Forget")
	if err := backend.SetOverride(t.Context(), admit.Override{Key: alice.OverrideKey, Rate: 50}); err != nil {
		t.Fatal(err)
	}
	cache.Forget([]string{alice.OverrideKey})
	if d := asks(alice, "after Forget of its override key"); !d.Allowed || !d.Overridden {
		t.Errorf("after Forget of the override key: %+v; want admitted under the Override", d)
	}
	answersLocally(bob, "another subject's, after Forget")
}

// A Breaker counts the override methods as every operation: an open Breaker refuses them with
// ErrOpen without asking the backend, but reports an invalid Override as such; their failures open
// it, and a success of one as the probe closes it.
func TestBreakerOverrides(t *testing.T) {
	clock := newClock()
	backend := &switchable{next: newMem(t, clock)}
	b := guard.NewBreaker(backend, guard.BreakerOptions{Failures: 2, Now: clock.Now})
	o := admit.Override{Key: overrideKeyOf("api", "alice"), Rate: 5}
	if err := b.SetOverride(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	backend.down.Store(true)
	if _, _, err := b.Override(t.Context(), o.Key); !errors.Is(err, admit.ErrUnavailable) {
		t.Fatalf("Override with the backend down: %v", err)
	}
	wantState(t, b, guard.BreakerClosed)
	if _, err := b.OverrideCount(t.Context(), "api"); !errors.Is(err, admit.ErrUnavailable) {
		t.Fatalf("OverrideCount with the backend down: %v", err)
	}
	wantState(t, b, guard.BreakerOpen) // two consecutive failures
	backend.down.Store(false)
	for name, call := range map[string]func() error{
		"SetOverride":    func() error { return b.SetOverride(t.Context(), o) },
		"Override":       func() error { _, _, err := b.Override(t.Context(), o.Key); return err },
		"DeleteOverride": func() error { _, err := b.DeleteOverride(t.Context(), o.Key); return err },
		"Overrides":      func() error { _, _, err := b.Overrides(t.Context(), "api", "", 10); return err },
		"OverrideCount":  func() error { _, err := b.OverrideCount(t.Context(), "api"); return err },
	} {
		if err := call(); !errors.Is(err, guard.ErrOpen) {
			t.Errorf("%s with the Breaker open: %v; want ErrOpen", name, err)
		}
	}
	if err := b.SetOverride(t.Context(), admit.Override{Key: o.Key, Rate: 0}); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Errorf("an invalid SetOverride with the Breaker open: %v; want ErrInvalidRequest", err)
	}
	if _, err := b.DeleteOverride(t.Context(), "rl:api:v1:{alice}"); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Errorf("DeleteOverride of a state key with the Breaker open: %v; want ErrInvalidRequest", err)
	}
	clock.Advance(guard.DefaultCoolOff)
	if page, _, err := b.Overrides(t.Context(), "api", "", 10); err != nil || len(page) != 1 {
		t.Fatalf("Overrides as the probe: %d, %v; want the one Override", len(page), err)
	}
	wantState(t, b, guard.BreakerClosed)
}

// FailOpen forwards the override methods, and never fails them open: with the backend down they
// fail. Its local limiter decides without overrides: a Request whose Override raised its limit is
// decided, while failing open, under the local Limit, not overridden.
func TestFailOpenOverrides(t *testing.T) {
	clock := newFailOpenClock()
	backend := &switchable{next: newMem(t, clock)}
	f := newFailOpen(t, backend, guard.FailOpenOptions{Local: halfOf, Now: clock.Now})
	lim := admit.Limit{Name: "api", Algorithm: admit.FixedWindow, Rate: 4, Period: time.Minute}
	r := admit.Request{Key: "rl:api:v1-fw60000:{alice}", Limit: lim, Cost: 1, OverrideKey: overrideKeyOf("api", "alice")}
	if err := f.SetOverride(t.Context(), admit.Override{Key: r.OverrideKey, Rate: 100}); err != nil {
		t.Fatal(err)
	}
	if d := mustTake(t, f, r); !d.Overridden || d.Limit.Rate != 100 {
		t.Fatalf("a Take with the backend up: %+v; want overridden at 100", d)
	}
	backend.down.Store(true)
	if err := f.SetOverride(t.Context(), admit.Override{Key: r.OverrideKey, Rate: 200}); !errors.Is(err, admit.ErrUnavailable) {
		t.Errorf("SetOverride with the backend down: %v; want its error", err)
	}
	if _, _, err := f.Overrides(t.Context(), "api", "", 10); !errors.Is(err, admit.ErrUnavailable) {
		t.Errorf("Overrides with the backend down: %v; want its error", err)
	}
	admitted := 0
	for range 10 {
		d := mustTake(t, f, r)
		if !d.Degraded || d.Overridden || d.Limit.Rate != 2 {
			t.Fatalf("a Take failing open: %+v; want degraded, under the local Limit of 2, not overridden", d)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != 2 {
		t.Errorf("failing open: %d of 10 admitted; want the local limit, 2, the Override not applied", admitted)
	}
}
