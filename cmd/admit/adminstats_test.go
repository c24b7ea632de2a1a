package main

import (
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// TestAdminStats checks the counters GET /v1/stats answers: every series of admit's counters and
// gauges, with its labels and value; no histogram, none of the Go runtime's or the process's.
func TestAdminStats(t *testing.T) {
	reg := prometheus.NewRegistry()
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "admit_decisions_total", Help: "h"}, []string{"policy", "result"})
	decisions.WithLabelValues("api", "limited").Add(3)
	entries := prometheus.NewGauge(prometheus.GaugeOpts{Name: "admit_overlimit_cache_entries", Help: "h"})
	entries.Set(2)
	took := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "admit_decision_duration_seconds", Help: "h"})
	took.Observe(0.1)
	reg.MustRegister(decisions, entries, took, collectors.NewGoCollector())
	samples, err := adminStats(reg)()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(samples)
	want := `[{"name":"admit_decisions_total","labels":{"policy":"api","result":"limited"},"value":3},{"name":"admit_overlimit_cache_entries","value":2}]`
	if string(got) != want {
		t.Errorf("adminStats = %s; want %s", got, want)
	}
}
