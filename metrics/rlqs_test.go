package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/admit-dev/admit/metrics"
)

// TestRLQS checks the series of the rate limit quota service after a few events.
func TestRLQS(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.NewRLQS(reg, "api")
	if err != nil {
		t.Fatal(err)
	}
	m.Stream(1)
	m.Stream(1)
	m.Stream(-1)
	m.Bucket(1)
	m.Assigned("api", 50)
	m.Assigned("api", -50)
	m.Assigned("api", 40)
	m.Reported("api", 7, 3)
	want := `
# HELP admit_rlqs_assigned_rate Tokens per second assigned to the Envoys of this instance, by policy: sum over instances and compare with the policy's rate.
# TYPE admit_rlqs_assigned_rate gauge
admit_rlqs_assigned_rate{policy="api"} 40
# HELP admit_rlqs_assignments_total New RLQS token buckets sent (of new numbers), by policy.
# TYPE admit_rlqs_assignments_total counter
admit_rlqs_assignments_total{policy="api"} 2
# HELP admit_rlqs_buckets Buckets the RLQS streams of this instance report.
# TYPE admit_rlqs_buckets gauge
admit_rlqs_buckets 1
# HELP admit_rlqs_reported_requests_total Requests the Envoys reported, by policy and decision (allowed, denied): the global admitted rate.
# TYPE admit_rlqs_reported_requests_total counter
admit_rlqs_reported_requests_total{decision="allowed",policy="api"} 7
admit_rlqs_reported_requests_total{decision="denied",policy="api"} 3
# HELP admit_rlqs_streams Envoy RLQS streams connected to this instance.
# TYPE admit_rlqs_streams gauge
admit_rlqs_streams 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if _, err := metrics.NewRLQS(reg); err == nil {
		t.Error("a second RLQS in one registry: no error")
	}
}
