package metrics

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Bounds of [EnvoyStats]' series.
const (
	// MaxEnvoyDetailed is the most series of distinct values one rule with detailed_metric (or
	// value_to_metric) has;
	// the hits of further values are counted in the rule's own series.
	MaxEnvoyDetailed = 100
	// MaxEnvoyKeys is the most series of all rules; the hits of a rule beyond are counted in
	// the series of key EnvoyOtherKey of its domain.
	MaxEnvoyKeys = 10000
	// EnvoyOtherKey is the key1 label (and the key after the domain) of the series past
	// MaxEnvoyKeys.
	EnvoyOtherKey = "_other"
)

// EnvoyCounts are the hits one descriptor adds to envoyproxy/ratelimit's counters of its rule
// (transport/rls, Counts).
type EnvoyCounts struct {
	TotalHits, OverLimit, NearLimit, WithinLimit, ShadowMode int64
}

// EnvoyStats are envoyproxy/ratelimit's per-rule stats under the Prometheus names its statsd
// exporter mapping (its default_mapper.yaml) gives them: admit serve's --envoy-metrics, so that
// dashboards and alerts written for envoyproxy/ratelimit keep working. It is safe for concurrent
// use. Make one with [NewEnvoyStats].
//
// Its series, each a counter of hits:
//
//	ratelimit_service_rate_limit_total_hits     {domain, key1, key2, key}  every hit asked for
//	ratelimit_service_rate_limit_over_limit     {domain, key1, key2, key}  hits above the limit
//	ratelimit_service_rate_limit_near_limit     {domain, key1, key2, key}  hits past the near-limit ratio, within the limit
//	ratelimit_service_rate_limit_within_limit   {domain, key1, key2, key}  hits admitted
//	ratelimit_service_rate_limit_shadow_mode    {domain, key1, key2, key}  hits above the limit of a shadow_mode rule
//
// A series is named by its stats key, such as "mongo_cps.database_users" (envoyproxy/ratelimit's
// ratelimit.service.rate_limit.<key>.total_hits): key is the whole key; domain, key1 and key2
// are its first three parts split at '.', as the mapping's patterns take them (key2 empty for a
// key of two parts, a label Prometheus drops). The series are bounded: one per rule (its path),
// and one per value only under a rule with detailed_metric or value_to_metric, at most
// MaxEnvoyDetailed per rule; at most MaxEnvoyKeys in all.
type EnvoyStats struct {
	vecs [5]*prometheus.CounterVec // total_hits, over_limit, near_limit, within_limit, shadow_mode

	mu       sync.RWMutex
	series   map[string]*envoySeries // by key
	detailed map[string]int          // the detailed series of each rule, by rule key
}

// envoySeries are the counters of one key.
type envoySeries [5]prometheus.Counter

// envoyNames are the names of EnvoyStats' counters, in EnvoyStats.vecs' order.
var envoyNames = [5]struct{ name, help string }{
	{"ratelimit_service_rate_limit_total_hits", "Hits asked of each rule of Envoy's rate limit service (envoyproxy/ratelimit's total_hits)."},
	{"ratelimit_service_rate_limit_over_limit", "Hits above the limit of each rule (envoyproxy/ratelimit's over_limit)."},
	{"ratelimit_service_rate_limit_near_limit", "Hits past the near-limit ratio of each rule's limit, within it (envoyproxy/ratelimit's near_limit)."},
	{"ratelimit_service_rate_limit_within_limit", "Hits admitted within the limit of each rule (envoyproxy/ratelimit's within_limit)."},
	{"ratelimit_service_rate_limit_shadow_mode", "Hits above the limit of each rule in shadow mode, let through (envoyproxy/ratelimit's shadow_mode)."},
}

// NewEnvoyStats returns EnvoyStats registered into reg, with no series.
func NewEnvoyStats(reg prometheus.Registerer) (*EnvoyStats, error) {
	e := &EnvoyStats{series: map[string]*envoySeries{}, detailed: map[string]int{}}
	for i, n := range envoyNames {
		e.vecs[i] = prometheus.NewCounterVec(prometheus.CounterOpts{Name: n.name, Help: n.help}, []string{"domain", "key1", "key2", "key"})
		if err := reg.Register(e.vecs[i]); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Add counts c in the series of key, a descriptor's stats key under the rule whose stats key is
// rule: key is rule, or for a rule with detailed_metric the descriptor's own (counted in rule's
// series once the rule has MaxEnvoyDetailed of its own).
func (e *EnvoyStats) Add(rule, key string, c EnvoyCounts) {
	s := e.seriesOf(rule, key)
	for i, n := range [5]int64{c.TotalHits, c.OverLimit, c.NearLimit, c.WithinLimit, c.ShadowMode} {
		if n > 0 {
			s[i].Add(float64(n))
		}
	}
}

// seriesOf returns the series of key under rule, made if need be within the bounds.
func (e *EnvoyStats) seriesOf(rule, key string) *envoySeries {
	e.mu.RLock()
	s := e.series[key]
	e.mu.RUnlock()
	if s != nil { // the usual case: a key seen before
		return s
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if s := e.series[key]; s != nil {
		return s
	}
	if key != rule {
		if e.detailed[rule] >= MaxEnvoyDetailed {
			return e.seriesLocked(rule)
		}
		if len(e.series) < MaxEnvoyKeys {
			e.detailed[rule]++
		}
	}
	return e.seriesLocked(key)
}

// seriesLocked returns the series of key, made if need be; past MaxEnvoyKeys, its domain's
// EnvoyOtherKey series. e.mu is held.
func (e *EnvoyStats) seriesLocked(key string) *envoySeries {
	if s := e.series[key]; s != nil {
		return s
	}
	if len(e.series) >= MaxEnvoyKeys {
		domain, _, _ := strings.Cut(key, ".")
		key = domain + "." + EnvoyOtherKey
		if s := e.series[key]; s != nil {
			return s
		}
	}
	parts := strings.SplitN(key, ".", 4)
	for len(parts) < 3 {
		parts = append(parts, "")
	}
	s := new(envoySeries)
	for i, v := range e.vecs {
		s[i] = v.WithLabelValues(parts[0], parts[1], parts[2], key)
	}
	e.series[key] = s
	return s
}
