package service_test

import (
	"testing"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/service"
)

// TestLocalLimitOnlyForFailOpen: LocalLimit reports a local limit only for a policy of the loaded
// configuration with failure: open and exactly the Limit asked about. A fail-closed policy, asked
// about with its exact Limit, is not ok — a guard.FailOpen would otherwise decide it locally while
// the backend is down, admitting where the configuration says to fail closed.
func TestLocalLimitOnlyForFailOpen(t *testing.T) {
	s := newService(t, nil, failOpenPolicies)
	limitOf := func(name string) admit.Limit {
		p, ok := s.Config().Policy(name)
		if !ok {
			t.Fatalf("no policy %q", name)
		}
		return p.Limit
	}
	if local, ok := s.LocalLimit(limitOf("open")); !ok || local != 3 {
		t.Errorf("LocalLimit(open) = %d, %v; want 3, true", local, ok)
	}
	if local, ok := s.LocalLimit(limitOf("closed")); ok || local != 0 {
		t.Errorf("LocalLimit(closed, its exact Limit) = %d, %v; want 0, false: the policy fails closed", local, ok)
	}
	changed := limitOf("open")
	changed.Rate++
	if local, ok := s.LocalLimit(changed); ok || local != 0 {
		t.Errorf("LocalLimit(open with another rate) = %d, %v; want 0, false", local, ok)
	}
	unknown := limitOf("open")
	unknown.Name = "nope"
	if local, ok := s.LocalLimit(unknown); ok || local != 0 {
		t.Errorf("LocalLimit(an unknown policy) = %d, %v; want 0, false", local, ok)
	}
}

// TestLocalLimitsOfTiers: LocalLimits holds the Limit of every tier of a policy that fails open,
// with the policy's local limit, and no tier of a policy that fails closed.
func TestLocalLimitsOfTiers(t *testing.T) {
	cfg := mustParse(t, `
policies:
  - {name: open, algorithm: gcra, limit: 10, window: 1s, failure: open, local_limit: 3,
     tiers: {pro: {limit: 1000}, hourly: {window: 1h}}}
  - {name: closed, algorithm: sliding_window, limit: 10, window: 1s, tiers: {pro: {limit: 1000}}}
`)
	open, _ := cfg.Policy("open")
	closed, _ := cfg.Policy("closed")
	limits := service.LocalLimits(cfg)
	for _, tier := range []string{"", "pro", "hourly"} {
		lim, err := open.LimitFor(tier)
		if err != nil {
			t.Fatal(err)
		}
		if local, ok := limits[lim]; !ok || local != 3 {
			t.Errorf("LocalLimits[open, tier %q] = %d, %v; want 3, true", tier, local, ok)
		}
	}
	if len(limits) != 3 {
		t.Errorf("LocalLimits = %v; want the 3 Limits of policy open alone", limits)
	}
	if _, ok := limits[closed.Tiers["pro"]]; ok {
		t.Errorf("LocalLimits holds the pro tier of a policy that fails closed: %v", limits)
	}
}
