package metrics_test

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/admit-dev/admit/metrics"
)

// TestEnvoyStatsAtMostMaxKeys: past MaxEnvoyKeys series, the hits of a new key are counted in
// its domain's EnvoyOtherKey series, and none is lost.
func TestEnvoyStatsAtMostMaxKeys(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, err := metrics.NewEnvoyStats(reg)
	if err != nil {
		t.Fatal(err)
	}
	n := metrics.MaxEnvoyKeys + 500
	for i := range n {
		key := fmt.Sprintf("d.k%d", i)
		e.Add(key, key, metrics.EnvoyCounts{TotalHits: 1, WithinLimit: 1})
	}
	if got := testutil.CollectAndCount(reg, "ratelimit_service_rate_limit_total_hits"); got != metrics.MaxEnvoyKeys+1 {
		t.Errorf("%d series of total_hits, want %d and the domain's %s", got, metrics.MaxEnvoyKeys, metrics.EnvoyOtherKey)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum, other float64
	for _, f := range fams {
		if f.GetName() != "ratelimit_service_rate_limit_total_hits" {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue()
			for _, l := range m.GetLabel() {
				if l.GetName() == "key" && l.GetValue() == "d."+metrics.EnvoyOtherKey {
					other = m.GetCounter().GetValue()
				}
			}
		}
	}
	if sum != float64(n) || other != 500 {
		t.Errorf("%v hits in all, %v in %s; want %d and 500", sum, other, metrics.EnvoyOtherKey, n)
	}
}
