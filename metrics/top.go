package metrics

import "github.com/prometheus/client_golang/prometheus"

// A TopSource is what [RegisterTopSubjects] reads: a *service.Service, whose TopEntries yields the
// number of entries each policy's top-subjects sketch holds (server.top).
type TopSource interface {
	// TopEntries calls yield with each policy that keeps a sketch and the entries it holds now.
	TopEntries(yield func(policy string, entries int))
}

// topDesc describes admit_top_subjects_entries.
var topDesc = prometheus.NewDesc("admit_top_subjects_entries",
	"Entries the policy's top-subjects sketch holds now (at most server.top.size).",
	[]string{"policy"}, nil)

// topCollector collects admit_top_subjects_entries from a TopSource when gathered.
type topCollector struct{ src TopSource }

// Describe sends the one descriptor.
func (c topCollector) Describe(ch chan<- *prometheus.Desc) { ch <- topDesc }

// Collect sends one gauge per policy that keeps a sketch, read now.
func (c topCollector) Collect(ch chan<- prometheus.Metric) {
	c.src.TopEntries(func(policy string, entries int) {
		ch <- prometheus.MustNewConstMetric(topDesc, prometheus.GaugeValue, float64(entries), policy)
	})
}

// RegisterTopSubjects registers into reg the size of the top-subjects sketches of src, read when
// reg is gathered:
//
//	admit_top_subjects_entries{policy}   entries the policy's sketch holds now: at most server.top.size
//
// A policy of the loaded configuration has a series while server.top.size is above 0; a policy
// a reload removed loses its series. The sketch's subjects are never labels: the number of series is
// the number of policies. It reports the error of a registration that fails.
func RegisterTopSubjects(reg prometheus.Registerer, src TopSource) error {
	return reg.Register(topCollector{src})
}

// A DroppedSource is what [RegisterLogDropped] reads: the log relay of admit serve
// (internal/logrelay), which drops lines rather than block when stderr does not keep up.
type DroppedSource interface {
	// Dropped returns the number of log lines dropped so far.
	Dropped() int64
}

// RegisterLogDropped registers into reg the count of log lines src dropped, read when reg is
// gathered:
//
//	admit_log_lines_dropped_total   log lines dropped because stderr did not keep up
//
// It reports the error of a registration that fails.
func RegisterLogDropped(reg prometheus.Registerer, src DroppedSource) error {
	return reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "admit_log_lines_dropped_total",
		Help: "Log lines dropped because stderr did not keep up (their number is logged once it drains).",
	}, func() float64 { return float64(src.Dropped()) }))
}
