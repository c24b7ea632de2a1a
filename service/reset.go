package service

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/policy"
)

// Reset deletes the state of subject under the policy named policyName of the loaded configuration,
// or under every policy for "": the keys of the policy's own Limit and of each of its tiers, under the
// policy's Version, each once, in calls of at most 1,024 keys to the Store's Reset (admit.Store).
// It returns the number of keys reset, present or not. The subject's next Check finds the whole
// allowance, on every instance of a shared Store whose caches hear resets. An unknown policy is an
// error matching ErrUnknownPolicy, and an invalid subject one matching admit.ErrInvalidRequest, both
// before any I/O; an error matching admit.ErrUnavailable means some keys may not have been reset:
// call Reset again.
func (s *Service) Reset(ctx context.Context, subject admit.Subject, policyName string) (int, error) {
	keys, err := s.resetKeys(s.cfg.Load(), subject, policyName)
	if err != nil {
		return 0, err
	}
	done := 0
	for chunk := range slices.Chunk(keys, bound.MaxResetKeys) {
		if err := s.store.Reset(ctx, chunk); err != nil {
			return done, err
		}
		done += len(chunk)
	}
	return done, nil
}

// digestLimit is the Limit of the key SubjectDigest makes to read a subject's digest from.
var digestLimit = admit.Limit{Name: "digest", Algorithm: admit.FixedWindow, Rate: 1, Period: time.Second}

// SubjectDigest returns the digest of subject.ID that every key of a subject without a Slot holds
// between braces, made by the Service's KeyBuilder: a name for the subject in logs that tells
// nothing of it without the HMAC secret, and that finds its keys in Redis. An empty or oversized
// subject is an error matching admit.ErrInvalidRequest.
func (s *Service) SubjectDigest(subject admit.Subject) (string, error) {
	k, err := s.keys.Key(digestLimit, bound.DefaultVersion, admit.Subject{ID: subject.ID})
	if err != nil {
		return "", err
	}
	_, tag, _ := strings.Cut(k, "{")
	tag, _, _ = strings.Cut(tag, "}")
	return tag, nil
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
