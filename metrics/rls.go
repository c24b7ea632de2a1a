package metrics

import "github.com/prometheus/client_golang/prometheus"

// NearLimit is the counter of the hits Envoy's rate limit service admitted near their limits
// (transport/rls, Ops.NearLimit). It is safe for concurrent use. Make one with [NewNearLimit].
//
// Its series:
//
//	admit_rls_near_limit_total   hits admitted past NEAR_LIMIT_RATIO of their limits, as envoyproxy/ratelimit's near_limit
type NearLimit struct {
	hits prometheus.Counter
}

// NewNearLimit returns a NearLimit registered into reg, at 0.
func NewNearLimit(reg prometheus.Registerer) (*NearLimit, error) {
	n := &NearLimit{hits: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "admit_rls_near_limit_total",
		Help: "Hits the Envoy rate limit service admitted past the near-limit ratio of their limits (envoyproxy/ratelimit's near_limit).",
	})}
	if err := reg.Register(n.hits); err != nil {
		return nil, err
	}
	return n, nil
}

// Add counts hits admitted near their limits in domain; the domain is not a label, since Envoy's
// clients choose domains.
func (n *NearLimit) Add(_ string, hits int64) {
	if hits > 0 {
		n.hits.Add(float64(hits))
	}
}
