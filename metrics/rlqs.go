package metrics

import "github.com/prometheus/client_golang/prometheus"

// RLQS is the series of Envoy's Rate Limit Quota Service (transport/rlqs's Observer). It is safe
// for concurrent use. Make one with [NewRLQS]. Its labels are bounded: the policies of the rlqs
// section.
//
// Its series:
//
//	admit_rlqs_streams                          Envoy streams connected to this instance
//	admit_rlqs_buckets                          buckets those streams report
//	admit_rlqs_assignments_total{policy}        new token buckets sent
//	admit_rlqs_assigned_rate{policy}            tokens per second assigned to this instance's Envoys
//	admit_rlqs_reported_requests_total{policy, decision}  requests the Envoys reported, allowed or denied
type RLQS struct {
	streams, buckets prometheus.Gauge
	assignments      *prometheus.CounterVec
	rate             *prometheus.GaugeVec
	reported         *prometheus.CounterVec
}

// NewRLQS returns an RLQS registered into reg, with series at 0 for each of policies.
func NewRLQS(reg prometheus.Registerer, policies ...string) (*RLQS, error) {
	m := &RLQS{
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "admit_rlqs_streams", Help: "Envoy RLQS streams connected to this instance."}),
		buckets: prometheus.NewGauge(prometheus.GaugeOpts{Name: "admit_rlqs_buckets", Help: "Buckets the RLQS streams of this instance report."}),
		assignments: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "admit_rlqs_assignments_total", Help: "New RLQS token buckets sent (of new numbers), by policy.",
		}, []string{"policy"}),
		rate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "admit_rlqs_assigned_rate", Help: "Tokens per second assigned to the Envoys of this instance, by policy: sum over instances and compare with the policy's rate.",
		}, []string{"policy"}),
		reported: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "admit_rlqs_reported_requests_total", Help: "Requests the Envoys reported, by policy and decision (allowed, denied): the global admitted rate.",
		}, []string{"policy", "decision"}),
	}
	if err := registerAll(reg, []prometheus.Collector{m.streams, m.buckets, m.assignments, m.rate, m.reported}); err != nil {
		return nil, err
	}
	for _, p := range policies {
		m.assignments.WithLabelValues(p)
		m.rate.WithLabelValues(p)
		m.reported.WithLabelValues(p, "allowed")
		m.reported.WithLabelValues(p, "denied")
	}
	return m, nil
}

// Stream counts a stream opened (+1) or ended (-1).
func (m *RLQS) Stream(delta int) { m.streams.Add(float64(delta)) }

// Bucket counts a bucket added (+1) or dropped (-1).
func (m *RLQS) Bucket(delta int) { m.buckets.Add(float64(delta)) }

// Assigned counts a new assignment under policy, and the change of the rate assigned.
func (m *RLQS) Assigned(policy string, rateDelta float64) {
	if rateDelta > 0 {
		m.assignments.WithLabelValues(policy).Inc()
	}
	m.rate.WithLabelValues(policy).Add(rateDelta)
}

// Reported counts the requests reported under policy.
func (m *RLQS) Reported(policy string, allowed, denied uint64) {
	m.reported.WithLabelValues(policy, "allowed").Add(float64(allowed))
	m.reported.WithLabelValues(policy, "denied").Add(float64(denied))
}
