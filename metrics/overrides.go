package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// OverridesTimeout bounds the reading of the override counts at each gathering.
const OverridesTimeout = time.Second

// An OverrideCounter is what [RegisterOverrides] reads: it calls each with the number of
// overrides of each policy of the loaded configuration (a service.Service's OverrideCounts, through
// admit.Store.OverrideCount), and returns the error that stopped it, if any.
type OverrideCounter func(ctx context.Context, each func(policy string, n int64)) error

// RegisterOverrides registers into reg the gauge of the overrides of each policy:
//
//	admit_overrides{policy}   overrides stored for the policy (per policy of the loaded configuration)
//
// read from count when reg is gathered, within OverridesTimeout: a policy whose count could not be
// read then (the backend down) has no series in that scrape. It reports the error of a
// registration that fails.
func RegisterOverrides(reg prometheus.Registerer, count OverrideCounter) error {
	return reg.Register(&overrides{count: count, desc: prometheus.NewDesc("admit_overrides",
		"Overrides stored for the policy, read from the backend at each scrape (per policy of the loaded configuration).",
		[]string{"policy"}, nil)})
}

// overrides is the collector of RegisterOverrides.
type overrides struct {
	count OverrideCounter
	desc  *prometheus.Desc
}

// Describe sends the gauge's description.
func (o *overrides) Describe(ch chan<- *prometheus.Desc) { ch <- o.desc }

// Collect sends a gauge per policy whose count was read within OverridesTimeout.
func (o *overrides) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), OverridesTimeout)
	defer cancel()
	_ = o.count(ctx, func(policy string, n int64) {
		ch <- prometheus.MustNewConstMetric(o.desc, prometheus.GaugeValue, float64(n), policy)
	})
}
