package policy

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
)

// MaxTiers is the most tiers a policy may name.
const MaxTiers = 64

// ErrUnknownTier is the error of a request naming a tier its policy does not have
// ([Policy.LimitFor]). It matches admit.ErrInvalidRequest.
var ErrUnknownTier = fmt.Errorf("%w: unknown tier", admit.ErrInvalidRequest)

// LimitFor returns the Limit a request naming tier is decided under: the policy's own Limit for "",
// a tier's Limit (its Tier set) for one of Tiers. An unknown tier is an error matching
// ErrUnknownTier, which the service answers (validate.ClientMessage) as `invalid request: unknown tier "x" for
// policy "api"`, as it renders an admit.Limiter's. (A check of several policies lets a policy
// without tiers ignore the tier: docs/configuration.md#tiers.)
func (p Policy) LimitFor(tier string) (admit.Limit, error) {
	if tier == "" {
		return p.Limit, nil
	}
	lim, ok := p.Tiers[tier]
	if !ok {
		return admit.Limit{}, fmt.Errorf("%w %q for policy %q", ErrUnknownTier, tier, p.Limit.Name)
	}
	return lim, nil
}

// rawTier is one tier of a policy as parsed: the numbers it changes.
type rawTier struct {
	name          string
	key, node     *yaml.Node
	path          string // "policies[i] (name).tiers.pro"
	bad           bool   // not a mapping: nothing to validate
	limit, burst  field[int64]
	window, lease field[time.Duration]
}

// tierFields are the fields of a tier: the numbers of the algorithms.
var tierFields = []string{"limit", "window", "burst", "lease_ttl"}

// parseTiers reads the tiers of the policy p from n, its tiers field.
func (d *decoder) parseTiers(p *rawPolicy, n *yaml.Node) {
	p.tiersNode = n
	entries, ok := d.yf.Entries(n, p.path+".tiers", "tier names to the numbers they change")
	p.tiersBad = !ok
	for _, e := range entries {
		path := p.path + ".tiers." + e.Name
		t := rawTier{name: e.Name, key: e.Key, node: e.Value, path: path, bad: e.Value.Kind != yaml.MappingNode}
		f, _ := d.yf.Mapping(e.Value, path, tierFields...)
		t.limit = d.integer(f["limit"], path+".limit")
		t.window = d.duration(f["window"], path+".window")
		t.burst = d.integer(f["burst"], path+".burst")
		t.lease = d.duration(f["lease_ttl"], path+".lease_ttl")
		p.tiers = append(p.tiers, t)
	}
}

// anyBad reports whether the file sets any of t's fields to a value the parse step refused.
func (t *rawTier) anyBad() bool {
	return t.bad || t.limit.bad || t.window.bad || t.burst.bad || t.lease.bad
}

// validateTiers checks the tiers of p, whose policy is pol, and returns their Limits, and whether
// they are valid. A tier's numbers are checked only when the policy's own are valid (policyOK):
// a tier inherits those it does not set, and an error of the policy's is the policy's alone.
func (d *decoder) validateTiers(p *rawPolicy, pol Policy, policyOK bool) (map[string]admit.Limit, bool) {
	switch {
	case p.tiersNode == nil:
		return nil, true
	case p.tiersBad:
		return nil, false
	case len(p.tiersNode.Content) == 0:
		d.errorf(p.tiersNode, "%s.tiers: empty: want at least one tier, or no tiers field", p.path)
		return nil, false
	case len(p.tiers) > MaxTiers:
		d.errorf(p.tiersNode, "%s.tiers: %d tiers; want at most %d", p.path, len(p.tiers), MaxTiers)
		return nil, false
	}
	before := d.yf.Len()
	tiers := make(map[string]admit.Limit, len(p.tiers))
	for i := range p.tiers {
		t := &p.tiers[i]
		if !validName(t.name) {
			d.errorf(t.key, "%s.tiers: tier name %q: want 1-%d characters of a-z, 0-9, '_' and '-'", p.path, t.name, bound.MaxNameLen)
			continue // its numbers would be refused for the name again
		}
		if t.anyBad() {
			continue // reported
		}
		if len(t.node.Content) == 0 { // a tier of unknown fields only is that mistake, reported
			d.errorf(t.node, "%s: sets nothing: such a tier is the policy itself, which a request naming no tier gets; set the numbers the tier changes", t.path)
			continue
		}
		if lim, ok := d.validateTier(p, t, pol, policyOK); ok {
			tiers[t.name] = lim
		}
	}
	return tiers, d.yf.Len() == before && len(tiers) == len(p.tiers)
}

// validateTier checks the numbers of tier t of p against the policy's algorithm, with the checks and
// the messages of the policy's own numbers, and returns its Limit.
func (d *decoder) validateTier(p *rawPolicy, t *rawTier, pol Policy, policyOK bool) (admit.Limit, bool) {
	if !policyOK {
		return admit.Limit{}, false
	}
	// The policy's numbers, valid, with the tier's in their place: validateNumbers reads them all.
	raw := rawPolicy{node: t.node, path: t.path, limit: p.limit, window: p.window, burst: p.burst, leaseTTL: p.leaseTTL, aligned: p.aligned}
	override(&raw.limit, t.limit)
	override(&raw.window, t.window)
	override(&raw.burst, t.burst)
	override(&raw.leaseTTL, t.lease)
	lim := admit.Limit{Name: pol.Limit.Name, Tier: t.name, Algorithm: pol.Limit.Algorithm, Shadow: pol.Limit.Shadow,
		Replicas: pol.Limit.Replicas, ReplicaTimeout: pol.Limit.ReplicaTimeout}
	before := d.yf.Len()
	d.validateNumbers(&raw, &lim)
	if d.yf.Len() > before {
		return admit.Limit{}, false
	}
	if err := lim.Validate(); err != nil { // GCRA's rounding, for one
		d.errorf(t.node, "%s: %s", t.path, strings.TrimPrefix(err.Error(), admit.ErrInvalidLimit.Error()+": "))
		return admit.Limit{}, false
	}
	if pol.Failure == Open && pol.LocalLimit > lim.Rate {
		d.errorf(t.limit.node, "%s.limit: %d is below the policy's local_limit (%d), which every tier has: lower local_limit, or raise the tier's limit", t.path, lim.Rate, pol.LocalLimit)
		return admit.Limit{}, false
	}
	return lim, true
}

// override puts the tier's field t in place of the policy's f when the tier sets it.
func override[T any](f *field[T], t field[T]) {
	if !t.missing() {
		*f = t
	}
}
