package service

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/policy"
)

// Reset deletes the state of subject under the policy named policyName of the loaded configuration,
// or under every policy for "": the keys of the policy's own Limit and of each of its tiers, under the
// policy's Version, each once, in calls of at most 1,024 keys to the Store's Reset (admit.Store).
// The subject's next Check finds the whole allowance, on every instance of a shared Store whose
// caches hear resets. An unknown policy is an error matching ErrUnknownPolicy, and an invalid subject
// one matching admit.ErrInvalidRequest, both before any I/O; an error matching
// admit.ErrUnavailable means some keys may not have been reset: call Reset again.
func (s *Service) Reset(ctx context.Context, subject admit.Subject, policyName string) error {
	keys, err := s.resetKeys(s.cfg.Load(), subject, policyName)
	if err != nil {
		return err
	}
	for chunk := range slices.Chunk(keys, bound.MaxResetKeys) {
		if err := s.store.Reset(ctx, chunk); err != nil {
			return err
		}
	}
	return nil
}

// resetKeys returns the keys of subject under the policy policyName of cfg, or under every policy
// for "", each once.
func (s *Service) resetKeys(cfg *policy.Config, subject admit.Subject, policyName string) ([]string, error) {
	policies := cfg.Policies
	if policyName != "" {
		p, ok := cfg.Policy(policyName)
		if !ok {
			return nil, fmt.Errorf("%w %q", ErrUnknownPolicy, policyName)
		}
		policies = []policy.Policy{p}
	}
	var keys []string
	seen := map[string]bool{}
	for _, p := range policies {
		limits := []admit.Limit{p.Limit}
		for _, name := range slices.Sorted(maps.Keys(p.Tiers)) {
			limits = append(limits, p.Tiers[name])
		}
		for _, lim := range limits {
			k, err := s.keys.Key(lim, p.Version, subject)
			if err != nil {
				return nil, fmt.Errorf("service: reset of policy %q: %w", p.Limit.Name, err)
			}
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	return keys, nil
}
