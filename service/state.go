package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/policy"
)

// A StateQuery names the subject whose state [Service.State] reads, and the policies it reads it
// under.
type StateQuery struct {
	// Subject is whose state is read: digested into one key per policy, as a Check's is.
	Subject admit.Subject
	// Policy names the one policy to read; empty means every policy of the loaded configuration.
	Policy string
	// Tier, if not empty, names a tier of Policy, which it needs: the tier's numbers are read
	// instead of the policy's (policy.Policy.LimitFor).
	Tier string
}

// Where a State's numbers come from: its Source.
const (
	// SourcePolicy is a policy's own numbers.
	SourcePolicy = "policy"
	// SourceTier is the numbers of a tier of the policy.
	SourceTier = "tier"
)

// Precedence: an override of the subject (SourceOverride) replaces the numbers of the policy and of
// whichever tier the subject is in; a tier's replace the policy's.

// A State is a subject's state under one policy, as a peek reads it.
type State struct {
	// Tier is the tier whose numbers are in force, or empty for the policy's own.
	Tier string
	// Source says where the numbers in force come from: SourcePolicy, SourceTier or SourceOverride.
	Source string
	// Override is the subject's override under the policy when Source is SourceOverride, else nil.
	Override *admit.Override
	// Decision is the peek's: its Limit holds the numbers in force (its Name the policy's);
	// Remaining, RetryAfter and ResetAfter the subject's state under them. Under Corrupt, only its
	// Limit is set: the policy's (or the tier's) numbers.
	Decision admit.Decision
	// Corrupt, if not nil, is why the subject's override or state under the policy cannot be read:
	// an error matching admit.ErrCorruptState, naming the key. Its decisions fail until the key is
	// deleted. Source is SourceOverride, with Override nil, for a corrupt override.
	Corrupt error
	// Unused reports an override of the subject under a policy the loaded configuration no longer
	// has (a reload removed it): stored, deciding nothing. Source is SourceOverride, Override the
	// override (nil when Corrupt), and Decision holds only its Limit's Name, the policy's name.
	Unused bool
}

// State reads the state of q.Subject under the policy q names, or under every policy of the
// loaded configuration in its order, by peeks (cost 0): it consumes nothing and writes nothing to
// the Store. It returns one State per policy; one under an override of the subject has Source
// SourceOverride and the Override (read from the Store before the peek). A policy whose override or
// state is corrupt has a State with Corrupt set, and the others are read all the same. An override
// of the subject under a policy a reload removed (Service.Swap) is a State that is Unused: the one
// State of q.Policy when it names that policy, else after the loaded policies' (those this Service
// saw removed, in name order). Its errors match ErrUnknownPolicy (a policy neither loaded nor with
// an override of the subject), policy.ErrUnknownTier or admit.ErrInvalidRequest (a tier without a
// policy, a bad subject), or admit.ErrUnavailable when the Store could not decide.
func (s *Service) State(ctx context.Context, q StateQuery) ([]State, error) {
	cfg := s.cfg.Load()
	policies := cfg.Policies
	var unused []string // the removed policies whose overrides of q.Subject to read
	switch {
	case q.Policy != "":
		p, ok := cfg.Policy(q.Policy)
		if !ok {
			return s.unusedState(ctx, q)
		}
		policies = []policy.Policy{p}
	case q.Tier != "":
		return nil, fmt.Errorf("%w: tier %q names no policy; a tier is a policy's", admit.ErrInvalidRequest, q.Tier)
	default:
		unused = s.removedPolicies()
	}
	states := make([]State, len(policies))
	items := make([]Item, len(policies))
	for i, p := range policies {
		lim, err := p.LimitFor(q.Tier)
		if err != nil {
			return nil, err
		}
		items[i] = Item{Limit: lim, Version: p.Version, Subject: q.Subject} // cost 0: a peek
		states[i] = State{Tier: q.Tier, Source: SourcePolicy}
		if q.Tier != "" {
			states[i].Source = SourceTier
		}
	}
	for i, p := range policies { // before the peeks: an override set between them is the peek's
		o, err := s.overrideOf(ctx, p.Limit.Name, q.Subject)
		switch {
		case errors.Is(err, admit.ErrCorruptState):
			states[i].Source, states[i].Corrupt = SourceOverride, err
		case err != nil:
			return nil, err
		case o != nil:
			states[i].Source, states[i].Override = SourceOverride, o
		}
	}
	if err := s.peekStates(ctx, items, states); err != nil {
		return nil, err
	}
	for _, name := range unused {
		if _, loaded := cfg.Policy(name); loaded {
			continue // a Swap since cfg brought it back
		}
		st, ok, err := s.unusedOverride(ctx, name, q.Subject)
		if err != nil {
			return nil, err
		}
		if ok {
			states = append(states, st)
		}
	}
	return states, nil
}

// unusedState returns the State of q.Subject's override under q.Policy, which the loaded
// configuration does not have: ErrUnknownPolicy when there is none, or q names a tier or an Envoy
// rule (Service.SetRules).
func (s *Service) unusedState(ctx context.Context, q StateQuery) ([]State, error) {
	unknown := fmt.Errorf("%w %q", ErrUnknownPolicy, q.Policy)
	if r := rulesOf(&s.rules); q.Tier != "" || r != nil && len(r.RuleLimits(q.Policy)) > 0 {
		return nil, unknown
	}
	st, ok, err := s.unusedOverride(ctx, q.Policy, q.Subject)
	switch {
	case errors.Is(err, admit.ErrInvalidLimit): // not a policy name
		return nil, unknown
	case err != nil:
		return nil, err
	case !ok:
		return nil, unknown
	}
	return []State{st}, nil
}

// unusedOverride returns the Unused State of subject's override under the policy named name, and
// whether there is one; a corrupt one is a State with Corrupt set.
func (s *Service) unusedOverride(ctx context.Context, name string, subject admit.Subject) (State, bool, error) {
	st := State{Source: SourceOverride, Unused: true, Decision: admit.Decision{Limit: admit.Limit{Name: name}}}
	o, err := s.overrideOf(ctx, name, subject)
	switch {
	case errors.Is(err, admit.ErrCorruptState):
		st.Corrupt = err
		return st, true, nil
	case err != nil || o == nil:
		return State{}, false, err
	}
	st.Override = o
	return st, true, nil
}

// peekStates fills the Decision of each of states by a peek of its Item, or, for one Corrupt
// already, its Limit only. A peek of corrupt state marks its State Corrupt: the Items are peeked
// together by hash slot, and, should that meet corrupt state, one at a time.
func (s *Service) peekStates(ctx context.Context, items []Item, states []State) error {
	var at []int // the Items to peek
	for i := range states {
		states[i].Decision = admit.Decision{Limit: items[i].Limit}
		if states[i].Corrupt == nil {
			at = append(at, i)
		}
	}
	peeked := make([]Item, len(at))
	for j, i := range at {
		peeked[j] = items[i]
	}
	ds := make([]admit.Decision, len(at))
	err := s.decideState(ctx, peeked, ds, BySlot)
	if err == nil {
		for j, i := range at {
			states[i].Decision = ds[j]
		}
		return nil
	}
	if !errors.Is(err, admit.ErrCorruptState) {
		return err
	}
	for _, i := range at {
		err := s.decideState(ctx, items[i:i+1], ds[:1], Separately)
		switch {
		case errors.Is(err, admit.ErrCorruptState):
			states[i].Corrupt = err
		case err != nil:
			return err
		default:
			states[i].Decision = ds[0]
		}
	}
	return nil
}

// decideState decides items, peeks, into ds, grouped by g: an ItemError is its Err.
func (s *Service) decideState(ctx context.Context, items []Item, ds []admit.Decision, g Grouping) error {
	if len(items) == 0 {
		return nil
	}
	_, _, err := s.decide(ctx, items, ds, plan{grouping: g})
	var ie *ItemError
	if errors.As(err, &ie) {
		return ie.Err
	}
	return err
}
