// Package service is the transport-neutral decision core of `admit serve`. Its JSON API,
// forward-auth, the built-in demo and the proxy decide checks of policies ([Service.Check],
// [Service.Admit]); Envoy's rate limit service decides its own rules as Items
// ([Service.DecideItems]). All of them decide through one function of the Service, which makes the
// Requests (admit.Requests), groups them and calls the Store.
//
// A [Service] holds one loaded [policy.Config] at a time and swaps it atomically on reload: a check
// runs entirely on the configuration it started with, and a check that starts after a swap sees only
// the new one — nothing is half-applied.
//
// # Failing open
//
// A policy with `failure: open` fails open when the Service's Store is a guard.FailOpen that holds
// the [LocalLimits] of the loaded configuration — the stack `admit serve` builds: metrics →
// guard.FailOpen → backend, whose reload path hands each configuration's LocalLimits down to the
// FailOpen as it swaps the configuration in. When the backend cannot decide, a local limiter of the policy's local_limit decides, and
// the Result is Degraded; a Check that names any policy with `failure: closed` fails closed whole
// (all-or-nothing). Over any other Store every policy fails closed.
package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/policy"
	"go.opentelemetry.io/otel/attribute"
)

// ErrUnknownPolicy is the error of a Check that names a policy the loaded configuration does not
// have. It matches admit.ErrInvalidRequest.
var ErrUnknownPolicy = fmt.Errorf("%w: unknown policy", admit.ErrInvalidRequest)

// ErrInvalidTier is the error of a Check whose Tier is not a tier name (1 to 64 characters of a-z,
// 0-9, '_' and '-'). It matches admit.ErrInvalidRequest. (A valid name that a policy with tiers
// does not have is policy.ErrUnknownTier.)
var ErrInvalidTier = fmt.Errorf("%w: tier name", admit.ErrInvalidRequest)

// A Service decides Checks on a Store, with keys made by a KeyBuilder, under the policies of the
// configuration it holds. It is safe for concurrent use. Make one with [New]; the zero value is not
// usable.
type Service struct {
	store admit.Store
	keys  *admit.KeyBuilder
	cfg   atomic.Pointer[policy.Config]
	top   atomic.Pointer[tops]        // the sketches of cfg's policies (server.top)
	rules atomic.Pointer[rulesHolder] // SetRules's, for overrides

	tracing     Tracing            // Trace's; off when its Tracer is nil
	backendAttr attribute.KeyValue // admit.backend, of tracing.Backend

	swapMu  sync.Mutex          // Swap's
	removed map[string]struct{} // the policies Swap removed and no later Swap brought back (Service.State)
}

// maxRemoved bounds the names of removed policies a Service remembers: Swap forgets none and adds
// none once it holds that many.
const maxRemoved = 256

// New returns a Service deciding on store, with keys from keys, under cfg. It reports an error when
// any of them is nil. cfg may have no policies (&policy.Config{}): a Service for DecideItems alone.
func New(store admit.Store, keys *admit.KeyBuilder, cfg *policy.Config) (*Service, error) {
	if store == nil || keys == nil || cfg == nil {
		return nil, errors.New("service: New needs a Store, a KeyBuilder and a Config")
	}
	s := &Service{store: store, keys: keys}
	s.cfg.Store(cfg)
	s.top.Store(newTops(cfg, nil))
	return s, nil
}

// Config returns the configuration the Service holds.
func (s *Service) Config() *policy.Config { return s.cfg.Load() }

// Swap makes cfg the configuration of every Check that starts from now on, and returns the one it
// replaces. Checks in flight finish on the configuration they started with. The top sketches of the
// policies cfg keeps stay, unless cfg changes server.top ([Service.Top]). The Service remembers the
// names of the policies a Swap removes, up to 256, so that [Service.State] can show their unused
// overrides.
func (s *Service) Swap(cfg *policy.Config) *policy.Config {
	if cfg == nil {
		panic("service: Swap(nil)")
	}
	s.swapMu.Lock()
	defer s.swapMu.Unlock()
	s.top.Store(newTops(cfg, s.top.Load()))
	old := s.cfg.Swap(cfg)
	for _, p := range old.Policies {
		if _, kept := cfg.Policy(p.Limit.Name); !kept && len(s.removed) < maxRemoved {
			if s.removed == nil {
				s.removed = map[string]struct{}{}
			}
			s.removed[p.Limit.Name] = struct{}{}
		}
	}
	for _, p := range cfg.Policies {
		delete(s.removed, p.Limit.Name)
	}
	return old
}

// removedPolicies returns the names of the policies Swap removed, sorted.
func (s *Service) removedPolicies() []string {
	s.swapMu.Lock()
	defer s.swapMu.Unlock()
	return slices.Sorted(maps.Keys(s.removed))
}

// A Check asks whether a subject may spend Cost units under one or more policies, all-or-nothing.
type Check struct {
	// Policies are the names of the policies, 1 … 16 distinct ones of the loaded
	// configuration.
	Policies []string
	// Subject is who is limited: digested into one key per policy, never stored. Its Tier is not
	// read: Tier is.
	Subject admit.Subject
	// Tier is the subject's tier, "" for none: each policy with tiers decides under that tier's
	// Limit (policy.Policy.LimitFor; an unknown one is an invalid request), and each policy without
	// tiers under its own (docs/configuration.md#tiers). A tier is named as a policy is: 1 to 64
	// characters of a-z, 0-9, '_' and '-'; any other is ErrInvalidTier.
	Tier string
	// Cost is the units asked for under each policy: 0 (a peek) … each policy's capacity (its limit,
	// or a gcra policy's burst); under a concurrency policy 0 or 1 (one lease: one request in
	// flight). Any other cost is an invalid request (admit.Request.Cost).
	Cost int64
	// RequestID, if not empty, makes a retry idempotent (admit.Request.ID).
	RequestID string
	// Config, if not nil, is the configuration the Check is decided under instead of the loaded
	// one: a transport that took the configuration with [Service.Config] to match a route passes
	// it, so that the route and its policies come from one configuration whatever Swap does.
	Config *policy.Config
}

// A Result is the outcome of a Check.
type Result struct {
	// Allowed reports whether the Check was admitted under every policy.
	Allowed bool
	// Decisions holds one Decision per policy, in the Check's order; each Decision's Limit.Name names
	// its policy.
	Decisions []admit.Decision
	// Deciding is the index in Decisions of the Decision that decided (admit.Deciding): the rejection
	// to wait for longest, or, when allowed, the policy nearest to its limit.
	Deciding int
	// Replayed reports whether the Result is the recorded one of an earlier Check with the same
	// RequestID: nothing was consumed this time.
	Replayed bool
	// Degraded reports whether a local limiter decided the Check because the Store could not (any
	// Decision is admit.Decision.Degraded): the decision is this process's, not global (docs/failure-modes.md).
	Degraded bool
}

// Check decides c under the loaded configuration. An error means nothing was decided: it matches
// admit.ErrInvalidRequest (ErrUnknownPolicy among them) or admit.ErrInvalidLimit for a caller's
// mistake, found before any I/O, and admit.ErrUnavailable when the Store could not decide. Under a
// concurrency policy, an admitted Check takes a lease that it leaves held until it expires; use
// [Service.Admit] to release it when the work is done.
func (s *Service) Check(ctx context.Context, c Check) (Result, error) {
	var buf [bound.MaxRequests]Item
	items, err := s.items(c, buf[:0])
	if err != nil {
		return Result{}, err
	}
	res := Result{Decisions: make([]admit.Decision, len(items))}
	allowed, _, err := s.decide(ctx, items, res.Decisions, plan{grouping: together, id: c.RequestID})
	if err != nil {
		return Result{}, checkError(c, err)
	}
	return res.decided(allowed), nil
}

// Admit decides c as Check does, and returns release, which ends the leases that an admitted Check
// holds under its concurrency policies (admit.Hold): call it once the work is done — deferred, so
// that a panic releases too. release is never nil, does nothing for a Check that was not admitted
// or has no concurrency policy, and does nothing when called again. It releases even when ctx is
// done; a lease it cannot release (the Store unavailable) expires after its policy's lease TTL.
func (s *Service) Admit(ctx context.Context, c Check) (res Result, release func(), err error) {
	var buf [bound.MaxRequests]Item
	items, err := s.items(c, buf[:0])
	if err != nil {
		return Result{}, func() {}, err
	}
	res = Result{Decisions: make([]admit.Decision, len(items))}
	allowed, release, err := s.decide(ctx, items, res.Decisions, plan{grouping: together, id: c.RequestID, hold: true})
	if release == nil { // an Item that cannot be decided: nothing held
		release = func() {}
	}
	if err != nil {
		return Result{}, release, checkError(c, err)
	}
	return res.decided(allowed), release, nil
}

// decided completes res, whose Decisions are filled, for a Check that was allowed or not.
func (res Result) decided(allowed bool) Result {
	res.Allowed = allowed
	res.Deciding = admit.Deciding(res.Decisions)
	res.Replayed = res.Decisions[0].Replayed
	for i := range res.Decisions {
		res.Degraded = res.Degraded || res.Decisions[i].Degraded
	}
	return res
}

// LocalLimit returns the local limit of lim under the configuration the Service holds now, and
// whether lim fails open: whether the configuration has a policy named lim.Name whose Limit (or,
// for lim.Tier set, whose tier's Limit) is lim and whose failure mode is policy.Open: a lookup in
// the [LocalLimits] of that configuration. It is safe for concurrent use.
//
// It is looked up on every call, so a reload applies at once: a policy whose failure mode or local
// limit changes fails open (or closed) from its next decision on. A Limit that no policy of the
// configuration has exactly — a Check racing a reload that changed its policy's numbers, the
// built-in demo — fails closed.
func (s *Service) LocalLimit(lim admit.Limit) (local int64, ok bool) {
	p, ok := s.cfg.Load().Policy(lim.Name)
	if !ok || p.Failure != policy.Open {
		return 0, false
	}
	if own, err := p.LimitFor(lim.Tier); err != nil || own != lim {
		return 0, false
	}
	return p.LocalLimit, true
}

// LocalLimits returns the local limits of cfg's policies that fail open (policy.Open), by their
// Limit and each of their tiers' Limits (one local limit per policy): what a guard.FailOpen under a
// Service's Store fails open with (guard.FailOpen.SetLocalLimits), handed to it by whoever loads
// cfg (see the package doc). A Limit that no policy of cfg has exactly — a Check racing a reload
// that changed its policy's numbers, the built-in demo under another configuration — is not a
// key: it fails closed.
func LocalLimits(cfg *policy.Config) map[admit.Limit]int64 {
	limits := make(map[admit.Limit]int64)
	for _, p := range cfg.Policies {
		if p.Failure != policy.Open {
			continue
		}
		limits[p.Limit] = p.LocalLimit
		for _, lim := range p.Tiers {
			limits[lim] = p.LocalLimit
		}
	}
	return limits
}

// items returns the Items of c's policies under its configuration, in order, appended to buf.
func (s *Service) items(c Check, buf []Item) ([]Item, error) {
	cfg := c.Config
	if cfg == nil {
		cfg = s.cfg.Load() // the one configuration of this Check, whatever Swap does meanwhile
	}
	n := len(c.Policies)
	if n == 0 || n > bound.MaxRequests {
		return nil, fmt.Errorf("%w: %d policies; want 1-%d", admit.ErrInvalidRequest, n, bound.MaxRequests)
	}
	if c.Tier != "" && !validTier(c.Tier) {
		return nil, fmt.Errorf("%w %q: want 1-%d characters of a-z, 0-9, '_' and '-'", ErrInvalidTier, c.Tier, bound.MaxNameLen)
	}
	for i, name := range c.Policies {
		p, ok := cfg.Policy(name)
		if !ok {
			return nil, fmt.Errorf("%w %q", ErrUnknownPolicy, name)
		}
		for _, prev := range c.Policies[:i] {
			if prev == name {
				return nil, fmt.Errorf("%w: policy %q named twice", admit.ErrInvalidRequest, name)
			}
		}
		lim := p.Limit
		if c.Tier != "" && p.Tiers != nil { // a policy without tiers ignores the tier
			var err error
			if lim, err = p.LimitFor(c.Tier); err != nil {
				return nil, err
			}
		}
		buf = append(buf, Item{Limit: lim, Version: p.Version, Subject: c.Subject, Cost: c.Cost})
	}
	return buf, nil
}

// validTier reports whether tier follows the rule of tier names, the rule of admit.Limit.Tier.
func validTier(tier string) bool {
	lim := admit.Limit{Name: "tier", Tier: tier, Algorithm: admit.FixedWindow, Rate: 1, Period: bound.MinPeriod}
	return lim.Validate() == nil
}

// checkError returns err, decide's for c, as a Check's error: an Item's own, naming its policy
// when the Item's key was made and its Request failed its check.
func checkError(c Check, err error) error {
	var ie *ItemError
	if !errors.As(err, &ie) {
		return err
	}
	if ie.keyed {
		return fmt.Errorf("%w (policy %q)", ie.Err, c.Policies[ie.Index])
	}
	return ie.Err
}
