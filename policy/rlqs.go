package policy

import (
	"fmt"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/admit-dev/admit"
)

// An RLQSDomain is one entry of the file's rlqs section: how the buckets that Envoys of one
// domain report to admit's Rate Limit Quota Service (`admit serve --rlqs-listen`) are matched to
// policies, each policy's limit per window the global budget split among the Envoys
// (docs/rlqs.md).
type RLQSDomain struct {
	// Domain is the domain of the streams it applies to (rate_limit_quota's domain), or
	// RLQSAnyDomain for the streams of every domain no other entry names.
	Domain string
	// Buckets are its bucket rules, in the file's order: the first that matches a bucket id applies.
	Buckets []RLQSBucket
	// Unmatched is what a bucket no rule matches is answered: RLQSIgnore (nothing, the default:
	// Envoy's no_assignment_behavior applies), RLQSAllowAll or RLQSDenyAll (a blanket rule), or
	// RLQSDefaultPolicy (UnmatchedPolicy's share, as a rule matching every bucket would).
	Unmatched string
	// UnmatchedPolicy is the default policy of the buckets no rule matches when Unmatched is
	// RLQSDefaultPolicy: each distinct bucket id a budget of its own; else "".
	UnmatchedPolicy string
	// AssignmentTTL is the assignment_time_to_live of every assignment sent: whole seconds,
	// MinRLQSTTL to MaxRLQSTTL, default DefaultRLQSTTL.
	AssignmentTTL time.Duration
	// IdleAfter is how long a bucket reports no request before admit abandons it (abandon_action):
	// whole seconds, at least AssignmentTTL, default DefaultRLQSIdleAfter.
	IdleAfter time.Duration
}

// An RLQSBucket matches bucket ids to a policy.
type RLQSBucket struct {
	// Match are the entries a bucket id must include (it may carry more, each distinct bucket id
	// being a budget of its own).
	Match map[string]string
	// Policy names the policy whose limit per window is the global budget of each matched bucket id.
	Policy string
}

// Matches reports whether the bucket id id includes every entry of b's Match.
func (b RLQSBucket) Matches(id map[string]string) bool {
	for k, v := range b.Match {
		if got, ok := id[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// RLQSDomain returns the rlqs entry of domain, else the RLQSAnyDomain entry, and whether the file
// has either.
func (c *Config) RLQSDomain(domain string) (RLQSDomain, bool) {
	for _, d := range c.RLQS {
		if d.Domain == domain {
			return d, true
		}
	}
	for _, d := range c.RLQS {
		if d.Domain == RLQSAnyDomain {
			return d, true
		}
	}
	return RLQSDomain{}, false
}

// RLQSAnyDomain is the domain of the rlqs entry that answers the streams of every domain no other
// entry names.
const RLQSAnyDomain = "*"

// What an rlqs domain answers a bucket that no rule matches (RLQSDomain.Unmatched).
const (
	RLQSIgnore   = "ignore"
	RLQSAllowAll = "allow_all"
	RLQSDenyAll  = "deny_all"
	// RLQSDefaultPolicy is unmatched: {policy: NAME}, a default policy.
	RLQSDefaultPolicy = "policy"
)

// Defaults and bounds of an rlqs domain's durations.
const (
	DefaultRLQSTTL       = 10 * time.Second
	MinRLQSTTL           = time.Second
	MaxRLQSTTL           = time.Hour
	DefaultRLQSIdleAfter = time.Minute
	// MaxRLQSMatch bounds the entries of a bucket rule's match.
	MaxRLQSMatch = 16
)

type rawRLQS struct {
	node              *yaml.Node
	path              string
	domain, unmatched field[string]
	// unmatchedPolicy is unmatched: {policy: NAME}'s, as a rule of an empty match.
	unmatchedPolicy *rawRLQSBucket
	ttl, idleAfter  field[time.Duration]
	buckets         []rawRLQSBucket
}

type rawRLQSBucket struct {
	node   *yaml.Node
	path   string
	match  []yamlEntry
	policy field[string]
}

type yamlEntry struct {
	name  string
	key   *yaml.Node
	value field[string]
}

func (d *decoder) parseRLQS(n *yaml.Node) []rawRLQS {
	items, _ := d.yf.Sequence(n, "rlqs")
	var out []rawRLQS
	for i, item := range items {
		path := fmt.Sprintf("rlqs[%d]", i)
		r := rawRLQS{node: item, path: path}
		f, ok := d.yf.Mapping(item, path, "domain", "buckets", "unmatched", "assignment_ttl", "idle_after")
		if !ok {
			continue
		}
		r.domain = d.str(f["domain"], path+".domain")
		r.unmatched, r.unmatchedPolicy = d.parseUnmatched(f["unmatched"], path+".unmatched")
		r.ttl = d.duration(f["assignment_ttl"], path+".assignment_ttl")
		r.idleAfter = d.duration(f["idle_after"], path+".idle_after")
		if f["buckets"] == nil {
			d.errorf(item, "%s: want buckets: a list of {match, policy}", path)
		}
		buckets, _ := d.yf.Sequence(f["buckets"], path+".buckets")
		for j, b := range buckets {
			bp := fmt.Sprintf("%s.buckets[%d]", path, j)
			rb := rawRLQSBucket{node: b, path: bp}
			bf, ok := d.yf.Mapping(b, bp, "match", "policy")
			if !ok {
				continue
			}
			rb.policy = d.str(bf["policy"], bp+".policy")
			if m := bf["match"]; m != nil {
				entries, _ := d.yf.Entries(m, bp+".match", "bucket id entries to their values")
				for _, e := range entries {
					rb.match = append(rb.match, yamlEntry{name: e.Name, key: e.Key, value: d.str(e.Value, bp+".match."+e.Name)})
				}
			} else {
				d.errorf(b, "%s: want match: the bucket id entries it matches, such as {name: api}", bp)
			}
			r.buckets = append(r.buckets, rb)
		}
		out = append(out, r)
	}
	return out
}

// parseUnmatched reads an rlqs entry's unmatched: a word (ignore, allow_all, deny_all), or
// {policy: NAME}, a default policy, returned as a bucket rule of an empty match.
func (d *decoder) parseUnmatched(n *yaml.Node, path string) (field[string], *rawRLQSBucket) {
	if n == nil || n.Kind != yaml.MappingNode {
		return d.str(n, path), nil
	}
	f, ok := d.yf.Mapping(n, path, "policy")
	if !ok {
		return refused[string](n), nil
	}
	b := &rawRLQSBucket{node: n, path: path, policy: d.str(f["policy"], path+".policy")}
	return field[string]{v: RLQSDefaultPolicy, node: n, bad: b.policy.bad}, b
}

func (d *decoder) validateRLQS(raws []rawRLQS, cfg *Config) {
	seen := map[string]bool{}
	for _, r := range raws {
		out := RLQSDomain{Domain: r.domain.v, Unmatched: RLQSIgnore, AssignmentTTL: DefaultRLQSTTL, IdleAfter: DefaultRLQSIdleAfter}
		ok := true
		switch {
		case r.domain.bad:
			ok = false
		case r.domain.missing() || r.domain.v == "":
			d.errorf(r.node, "%s.domain: want the domain of Envoy's rate_limit_quota filter", r.path)
			ok = false
		case seen[r.domain.v]:
			d.errorf(r.domain.node, "%s.domain: %q: another rlqs entry before it has this domain", r.path, r.domain.v)
			ok = false
		}
		seen[r.domain.v] = true
		switch {
		case r.unmatchedPolicy != nil && r.unmatched.set():
			if rb, bok := d.validateRLQSBucket(*r.unmatchedPolicy, cfg); bok {
				out.Unmatched, out.UnmatchedPolicy = RLQSDefaultPolicy, rb.Policy
			} else {
				ok = false
			}
		case r.unmatched.set():
			switch r.unmatched.v {
			case RLQSIgnore, RLQSAllowAll, RLQSDenyAll:
				out.Unmatched = r.unmatched.v
			default:
				d.errorf(r.unmatched.node, "%s.unmatched: %q: want ignore, allow_all, deny_all or {policy: NAME}", r.path, r.unmatched.v)
				ok = false
			}
		}
		ok = d.rlqsSeconds(r.ttl, r.path+".assignment_ttl", MinRLQSTTL, MaxRLQSTTL, &out.AssignmentTTL) && ok
		ok = d.rlqsSeconds(r.idleAfter, r.path+".idle_after", out.AssignmentTTL, durationLimit, &out.IdleAfter) && ok
		ok = !r.unmatched.bad && ok
		for _, b := range r.buckets {
			if rb, bok := d.validateRLQSBucket(b, cfg); bok {
				out.Buckets = append(out.Buckets, rb)
			} else {
				ok = false
			}
		}
		if ok {
			cfg.RLQS = append(cfg.RLQS, out)
		}
	}
}

// rlqsSeconds checks a duration of whole seconds, lo to hi, and sets *out when it is set.
func (d *decoder) rlqsSeconds(f field[time.Duration], path string, lo, hi time.Duration, out *time.Duration) bool {
	switch {
	case f.bad:
		return false
	case f.missing():
		if *out < lo {
			*out = lo
		}
		return true
	case f.v%time.Second != 0 || f.v < lo || f.v > hi:
		d.errorf(f.node, "%s: %s: want whole seconds from %s to %s (Envoy reads whole seconds)", path, f.v, lo, hi)
		return false
	}
	*out = f.v
	return true
}

func (d *decoder) validateRLQSBucket(b rawRLQSBucket, cfg *Config) (RLQSBucket, bool) {
	out := RLQSBucket{Match: map[string]string{}, Policy: b.policy.v}
	ok := true
	if len(b.match) > MaxRLQSMatch {
		d.errorf(b.node, "%s.match: %d entries: want at most %d", b.path, len(b.match), MaxRLQSMatch)
		ok = false
	}
	for _, e := range b.match {
		if e.value.bad {
			ok = false
			continue
		}
		if e.name == "" {
			d.errorf(e.key, "%s.match: an empty entry name", b.path)
			ok = false
		}
		out.Match[e.name] = e.value.v
	}
	switch {
	case b.policy.bad:
		return out, false
	case b.policy.missing():
		d.errorf(b.node, "%s: want a policy: the one whose limit per window is the global budget", b.path)
		return out, false
	}
	p, found := cfg.Policy(b.policy.v)
	if !found {
		names := make([]string, 0, len(cfg.Policies))
		for _, q := range cfg.Policies {
			names = append(names, q.Limit.Name)
		}
		slices.Sort(names)
		d.errorf(b.policy.node, "%s.policy: %q: no such policy (have %v)", b.path, b.policy.v, names)
		return out, false
	}
	switch {
	case p.Limit.Algorithm == admit.Concurrency:
		d.errorf(b.policy.node, "%s.policy: %q is a concurrency policy: want a rate (limit per window)", b.path, b.policy.v)
		ok = false
	case p.Limit.Period%time.Second != 0:
		d.errorf(b.policy.node, "%s.policy: %q has a window of %s: want whole seconds (Envoy's token buckets fill in whole seconds)", b.path, b.policy.v, p.Limit.Period)
		ok = false
	case len(p.Tiers) > 0:
		d.errorf(b.policy.node, "%s.policy: %q has tiers: a bucket splits one budget, want a policy without tiers", b.path, b.policy.v)
		ok = false
	}
	return out, ok
}
