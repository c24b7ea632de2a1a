package service_test

import (
	"testing"

	"github.com/admit-dev/admit"
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
