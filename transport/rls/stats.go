package rls

import (
	"math"
	"regexp"
	"strings"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/policy/envoyconf"
	"github.com/admit-dev/admit/service"
)

// Counts are what one descriptor of a response adds to envoyproxy/ratelimit's stats of its rule,
// its counters ratelimit.service.rate_limit.<key>.total_hits, over_limit, near_limit, within_limit
// and shadow_mode, counted as envoyproxy/ratelimit counts them, in hits (units of hits_addend).
type Counts struct {
	// TotalHits are the hits asked for.
	TotalHits int64
	// OverLimit are the hits above the limit.
	OverLimit int64
	// NearLimit are the hits past NearLimitRatio of the limit and within it.
	NearLimit int64
	// WithinLimit are the hits of a descriptor admitted within its limit.
	WithinLimit int64
	// ShadowMode are the hits above the limit of a descriptor in shadow_mode, answered OK.
	ShadowMode int64
}

// StatsKey returns envoyproxy/ratelimit's stats key of rule, a rule of domain: the domain and the
// rule's path, joined by '.', such as "mongo_cps.database_users".
func StatsKey(domain string, rule *envoyconf.Rule) string { return domain + "." + rule.Path }

// detailedKey returns the stats key of a descriptor of entries (as counted: a share_threshold
// wildcard's value for the values it matches) under a rule with detailed_metric, as
// envoyproxy/ratelimit names it: the domain, then each entry's key and "_value", joined by '.'.
func detailedKey(domain string, entries []envoyconf.Entry) string {
	var b strings.Builder
	b.WriteString(domain)
	for _, e := range entries {
		b.WriteByte('.')
		b.WriteString(e.Key)
		if e.Value != "" {
			b.WriteByte('_')
			b.WriteString(e.Value)
		}
	}
	return b.String()
}

// overrideKey returns the stats key of a descriptor of entries with a limit override and no rule:
// the domain and the entries' keys, without their values, so that the values a client sends never
// multiply the series.
func overrideKey(domain string, entries []envoyconf.Entry) string {
	var b strings.Builder
	b.WriteString(domain)
	for _, e := range entries {
		b.WriteByte('.')
		b.WriteString(e.Key)
	}
	return b.String()
}

// statKeys returns the rule key and series key of a descriptor of entries, counted by keyed, in
// domain, under rule (see Options.Stats): the rule's key; under detailed_metric the descriptor's
// own (detailedKey), under value_to_metric envoyproxy/ratelimit's value_to_metric key
// (envoyconf.Rule.MetricKey), both bounded alike by the stats.
func statKeys(domain string, rule *envoyconf.Rule, entries, keyed []envoyconf.Entry) (ruleKey, key string) {
	if rule.Path == "" { // a limit override with no configured rule
		k := sanitizeStat(overrideKey(domain, entries))
		return k, k
	}
	ruleKey = sanitizeStat(StatsKey(domain, rule))
	switch {
	case rule.DetailedMetric: // wins over value_to_metric, as in envoyproxy/ratelimit
		return ruleKey, sanitizeStat(detailedKey(domain, keyed))
	case rule.ValueToMetric:
		return ruleKey, sanitizeStat(rule.MetricKey(keyed))
	}
	return ruleKey, ruleKey
}

// statReplacer and ipv4 are what sanitizeStat replaces.
var (
	statReplacer = strings.NewReplacer(":", "_", "|", "_")
	ipv4         = regexp.MustCompile(`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`)
)

// sanitizeStat returns the stats key key as envoyproxy/ratelimit's stats name it (its
// SanitizeStatName): ':' and '|' made '_', and the dots of what looks like an IPv4 address too,
// so that "rl.ip_10.0.0.1" is "rl.ip_10_0_0_1", one part of the key and not four.
func sanitizeStat(key string) string {
	if !strings.ContainsAny(key, ":|") && !ipv4.MatchString(key) {
		return key // the common case: nothing to replace, nothing allocated
	}
	return ipv4.ReplaceAllStringFunc(statReplacer.Replace(key), func(ip string) string {
		return strings.ReplaceAll(ip, ".", "_")
	})
}

// stats tells Options.Stats the Counts of each descriptor of checks decided under a rule that
// limits, whose Items are items, decided as ds.
func (s *Server) stats(checks []check, items []service.Item, ds []admit.Decision) {
	ratio := s.ops.NearLimitRatio
	if ratio == 0 {
		ratio = DefaultNearLimitRatio
	}
	for i := range checks {
		c := &checks[i]
		if c.rule == nil || c.rule.Unlimited {
			continue
		}
		d := c.decision(ds)
		limit := c.rule.Limit.Rate
		if d.Overridden {
			limit = d.Limit.Rate
		}
		shadow := c.rule.Limit.Shadow && !c.rule.QuotaMode
		s.opts.Stats(c.ruleKey, c.statKey, counts(limit, c.cost, d, ratio, shadow))
	}
}

// counts returns the Counts of a descriptor of cost hits decided d under a limit, as
// envoyproxy/ratelimit counts them from the counter before and after the hits (admit's counter
// before is what its limit less what is left; a rejected hit is not counted in admit's counter,
// but is in the stats), with its near-limit threshold floor(limit × ratio) in float32.
func counts(limit, cost int64, d admit.Decision, ratio float64, shadow bool) Counts {
	c := Counts{TotalHits: cost}
	near := int64(math.Floor(float64(float32(limit) * float32(ratio))))
	if d.Allowed {
		after := limit - max(d.Remaining, 0)
		before := after - cost
		c.WithinLimit = cost
		if after > near {
			c.NearLimit = min(after-near, cost)
			if before >= near {
				c.NearLimit = cost
			}
		}
		return c
	}
	before := max(limit-max(d.Remaining, 0), 0)
	after := before + cost
	if before >= limit || after <= limit {
		c.OverLimit = cost
	} else {
		c.OverLimit = after - limit
		c.NearLimit = limit - max(near, before)
	}
	if shadow {
		c.ShadowMode = c.OverLimit
	}
	return c
}
