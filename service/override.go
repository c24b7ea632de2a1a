package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/validate"
	"github.com/admit-dev/admit/policy"
)

// MaxOverrideExpiry is the longest time an Override may be set for: 366 days, the longest window a
// policy has. An Override for longer is refused; one set with no expiry lasts until deleted.
const MaxOverrideExpiry = 366 * 24 * time.Hour

// SourceOverride is the Source of a State whose numbers come from an [admit.Override] of the
// subject, which replaces the policy's numbers and its tier's alike.
const SourceOverride = "override"

// An OverrideSpec is what [Service.SetOverride] stores: the numbers that replace a policy's for
// one subject.
type OverrideSpec struct {
	// Policy names the policy of the loaded configuration, or an Envoy rule ([Service.SetRules]).
	Policy string
	// Subject is whose numbers change: digested into the override's key, never stored.
	Subject admit.Subject
	// Limit replaces the policy's limit (admit.Limit.Rate), and that of each of its tiers: the
	// Limit it makes must be valid (admit.Limit.Validate).
	Limit int64
	// Burst replaces a gcra policy's burst; 0 keeps the policy's (or the tier's). Any other
	// algorithm has no burst: a Burst is refused.
	Burst int64
	// ExpiresIn is how long the override lasts, up to MaxOverrideExpiry; 0 for until deleted.
	ExpiresIn time.Duration
	// Reason says why, for the audit record and inspection: at most validate.MaxReasonLen bytes.
	Reason string
}

// An OverrideInfo is an [admit.Override] as the Service shows it: by the subject's digest, never
// the subject.
type OverrideInfo struct {
	// Policy is the policy the override is of.
	Policy string
	// Digest names the subject: the digest its keys hold ([Service.SubjectDigest]).
	Digest string
	// Override is the override as stored.
	Override admit.Override
	// Unused reports that no policy of the loaded configuration, nor an Envoy rule, has the name
	// Policy (a reload removed it): the override stays stored and decides nothing.
	Unused bool
}

// ExpiresIn returns the time left before o expires at now, 0 for an override without expiry.
func (o OverrideInfo) ExpiresIn(now time.Time) time.Duration {
	if o.Override.Expires.IsZero() {
		return 0
	}
	return max(o.Override.Expires.Sub(now), time.Millisecond)
}

// Rules are the limits that a transport decides through [Service.DecideItems] without their being
// policies of the loaded configuration (Envoy's rules), as overrides address them. transport/rls's
// Server is one.
type Rules interface {
	// RuleLimits returns the Limits of the rules whose Limit.Name is name; none when no rule has it.
	RuleLimits(name string) []admit.Limit
	// RuleSubject returns the Subject whose Items the rules named name decide for key.
	RuleSubject(name, key string) admit.Subject
}

// rulesHolder holds the Rules of SetRules.
type rulesHolder struct{ Rules }

// SetRules makes r the Rules whose names [Service.SetOverride] accepts beside the policies of the
// loaded configuration; nil for none. A policy and a rule of one name: the policy is addressed.
func (s *Service) SetRules(r Rules) { s.rules.Store(&rulesHolder{r}) }

// rulesOf returns the Rules of SetRules, or nil.
func rulesOf(p *atomic.Pointer[rulesHolder]) Rules {
	if h := p.Load(); h != nil {
		return h.Rules
	}
	return nil
}

// target returns the Limits an override of the policy named name replaces the numbers of (its own
// and its tiers', or its rules'), and the Subject key addresses under it. ok is false when neither
// the configuration nor the Rules have the name.
func (s *Service) target(cfg *policy.Config, name string, subject admit.Subject) (limits []admit.Limit, sub admit.Subject, ok bool) {
	if p, found := cfg.Policy(name); found {
		limits = append(limits, p.Limit)
		for _, t := range slices.Sorted(maps.Keys(p.Tiers)) {
			limits = append(limits, p.Tiers[t])
		}
		return limits, subject, true
	}
	if r := rulesOf(&s.rules); r != nil {
		if limits = r.RuleLimits(name); len(limits) > 0 {
			return limits, r.RuleSubject(name, subject.ID), true
		}
	}
	return nil, subject, false
}

// SetOverride stores the override of spec, replacing any of its policy and subject, and returns it
// as stored. From the next decision on, on every instance sharing the Store, the subject is decided
// under the policy with spec's numbers, whatever its tier: an override replaces the tier's numbers
// too. Its errors, before any I/O, name the field: ErrUnknownPolicy, or admit.ErrInvalidRequest for
// a limit or burst the policy's Limit (or one of its tiers') cannot take, a burst of an algorithm
// without one, an expiry out of 0-MaxOverrideExpiry, a reason too long or a bad subject; else the
// Store's (admit.ErrUnavailable), when nothing may have been stored.
func (s *Service) SetOverride(ctx context.Context, spec OverrideSpec) (OverrideInfo, error) {
	limits, subject, ok := s.target(s.cfg.Load(), spec.Policy, spec.Subject)
	if !ok {
		return OverrideInfo{}, fmt.Errorf("%w %q", ErrUnknownPolicy, spec.Policy)
	}
	switch {
	case spec.ExpiresIn < 0 || spec.ExpiresIn > MaxOverrideExpiry:
		return OverrideInfo{}, fmt.Errorf("%w: override expires_in %v outside 0-%v", admit.ErrInvalidRequest, spec.ExpiresIn, MaxOverrideExpiry)
	case spec.ExpiresIn%time.Millisecond != 0:
		return OverrideInfo{}, fmt.Errorf("%w: override expires_in %v is not a whole number of milliseconds", admit.ErrInvalidRequest, spec.ExpiresIn)
	case len(spec.Reason) > validate.MaxReasonLen:
		return OverrideInfo{}, fmt.Errorf("%w: override reason of %d bytes exceeds %d", admit.ErrInvalidRequest, len(spec.Reason), validate.MaxReasonLen)
	}
	for _, lim := range limits {
		if spec.Burst != 0 && lim.Algorithm != admit.GCRA {
			return OverrideInfo{}, fmt.Errorf("%w: override burst %d: policy %q is %v, which has no burst", admit.ErrInvalidRequest, spec.Burst, spec.Policy, lim.Algorithm)
		}
		lim.Rate = spec.Limit
		if spec.Burst != 0 {
			lim.Burst = spec.Burst
		}
		if err := lim.Validate(); err != nil {
			what := "limit"
			if spec.Burst != 0 {
				what = "limit and burst"
			}
			msg := validate.ClientMessage(err)
			msg = msg[strings.Index(msg, ":")+1:]
			return OverrideInfo{}, fmt.Errorf("%w: override %s of policy %q:%s", admit.ErrInvalidRequest, what, spec.Policy, msg)
		}
	}
	key, err := s.keys.OverrideKey(spec.Policy, subject)
	if err != nil {
		return OverrideInfo{}, err
	}
	o := admit.Override{Key: key, Rate: spec.Limit, Burst: spec.Burst, Reason: spec.Reason}
	if spec.ExpiresIn > 0 {
		o.Expires = time.Now().Add(spec.ExpiresIn).Truncate(time.Millisecond)
	}
	if err := s.store.SetOverride(ctx, o); err != nil {
		return OverrideInfo{}, err
	}
	return OverrideInfo{Policy: spec.Policy, Digest: overrideDigest(key), Override: o}, nil
}

// DeleteOverride deletes the override of subject under the policy named policyName, and reports
// whether there was one: the subject's next decision is under the policy's own numbers (or its
// tier's). The policy need not be loaded any more: an unused override can be deleted. Its errors
// match admit.ErrInvalidRequest (a bad policy name or subject) before any I/O, or are the Store's.
func (s *Service) DeleteOverride(ctx context.Context, policyName string, subject admit.Subject) (bool, error) {
	_, subject, _ = s.target(s.cfg.Load(), policyName, subject)
	key, err := s.keys.OverrideKey(policyName, subject)
	if errors.Is(err, admit.ErrInvalidLimit) { // a bad policy name: the request's
		return false, fmt.Errorf("%w: %s", admit.ErrInvalidRequest, strings.TrimPrefix(validate.ClientMessage(err), "invalid limit: "))
	} else if err != nil {
		return false, err
	}
	return s.store.DeleteOverride(ctx, key)
}

// Overrides lists the unexpired overrides of the policy named policyName, at most n (1 to
// validate.MaxOverridePage) from cursor ("" for the first page), in key order: the next page's
// cursor is next, "" after the last. The policy need not be loaded: the overrides of a policy a
// reload removed are listed, each Unused. Its errors match admit.ErrInvalidRequest (a bad policy
// name, cursor or n) before any I/O, or are the Store's.
func (s *Service) Overrides(ctx context.Context, policyName, cursor string, n int) (page []OverrideInfo, next string, err error) {
	if err := validate.OverridePage(policyName, cursor, n); err != nil {
		return nil, "", err
	}
	if named := (admit.Limit{Name: policyName, Algorithm: admit.FixedWindow, Rate: 1, Period: time.Second}); named.Validate() != nil {
		return nil, "", fmt.Errorf("%w: override listing of policy %q: want 1-64 characters of a-z, 0-9, '_' and '-'", admit.ErrInvalidRequest, policyName)
	}
	_, _, known := s.target(s.cfg.Load(), policyName, admit.Subject{})
	os, next, err := s.store.Overrides(ctx, policyName, cursor, n)
	if err != nil {
		return nil, "", err
	}
	page = make([]OverrideInfo, len(os))
	for i, o := range os {
		page[i] = OverrideInfo{Policy: policyName, Digest: overrideDigest(o.Key), Override: o, Unused: !known}
	}
	return page, next, nil
}

// A PolicyCount is the number of overrides of one policy.
type PolicyCount struct {
	// Policy names the policy.
	Policy string
	// Count is its number of overrides (admit.Store.OverrideCount).
	Count int64
}

// OverrideCounts returns the number of overrides of each policy of the loaded configuration, in
// its order, for a gauge; it stops at the first error, the Store's.
func (s *Service) OverrideCounts(ctx context.Context) ([]PolicyCount, error) {
	cfg := s.cfg.Load()
	out := make([]PolicyCount, 0, len(cfg.Policies))
	for _, p := range cfg.Policies {
		n, err := s.store.OverrideCount(ctx, p.Limit.Name)
		if err != nil {
			return out, err
		}
		out = append(out, PolicyCount{Policy: p.Limit.Name, Count: n})
	}
	return out, nil
}

// OverrideDigest returns the digest by which the override of subject under the policy named
// policyName is listed (OverrideInfo.Digest): the subject's digest (SubjectDigest), or, for an
// Envoy rule's descriptor in an atomic domain, its slot's and its own, joined by ':'. An invalid
// policy name or subject is an error matching admit.ErrInvalidRequest or admit.ErrInvalidLimit.
func (s *Service) OverrideDigest(policyName string, subject admit.Subject) (string, error) {
	_, subject, _ = s.target(s.cfg.Load(), policyName, subject)
	key, err := s.keys.OverrideKey(policyName, subject)
	if err != nil {
		return "", err
	}
	return overrideDigest(key), nil
}

// overrideOf returns the override of subject under the policy named name, if one is stored: for
// Service.State.
func (s *Service) overrideOf(ctx context.Context, name string, subject admit.Subject) (*admit.Override, error) {
	key, err := s.keys.OverrideKey(name, subject)
	if err != nil {
		return nil, err
	}
	o, ok, err := s.store.Override(ctx, key)
	switch {
	case errors.Is(err, errors.ErrUnsupported): // a Store without overrides has none
		return nil, nil
	case err != nil || !ok:
		return nil, err
	}
	return &o, nil
}

// overrideDigest returns the subject's digest in an override key rl:<policy>:o:{<slot>}[:<id>]:
// "<slot>", or "<slot>:<id>" for a subject with a Slot of its own.
func overrideDigest(key string) string {
	_, rest, _ := strings.Cut(key, ":o:")
	return strings.NewReplacer("{", "", "}", "").Replace(rest)
}
