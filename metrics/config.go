package metrics

import (
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Config is the gauges and counters of a service's configuration: which one is loaded, and how its
// reloads went. It is safe for concurrent use. Make one with [NewConfig].
//
// Its series:
//
//	admit_config_reloads_total{result}                      reloads, by result: success or failure
//	admit_config_info{hash}                                 1, labelled with the loaded file's SHA-256
//	admit_config_last_reload_success_timestamp_seconds      when the loaded configuration was loaded
type Config struct {
	reloads  *prometheus.CounterVec
	info     *prometheus.GaugeVec
	loadedAt prometheus.Gauge
}

// NewConfig returns a Config registered into reg.
func NewConfig(reg prometheus.Registerer) (*Config, error) {
	c := &Config{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "admit_config_reloads_total",
			Help: "Configuration reloads, by result (success, failure). A failed reload leaves the loaded configuration serving.",
		}, []string{"result"}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "admit_config_info",
			Help: "1, labelled with the SHA-256 of the configuration file that is loaded.",
		}, []string{"hash"}),
		loadedAt: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "admit_config_last_reload_success_timestamp_seconds",
			Help: "Unix time at which the loaded configuration was loaded.",
		}),
	}
	for _, col := range []prometheus.Collector{c.reloads, c.info, c.loadedAt} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	c.reloads.WithLabelValues("success")
	c.reloads.WithLabelValues("failure")
	return c, nil
}

// Loaded records that the configuration whose file has SHA-256 hash was loaded: at start, or by a
// reload (reload counts it as a success). Only the last hash loaded has a series.
func (c *Config) Loaded(hash string, reload bool) {
	if reload {
		c.reloads.WithLabelValues("success").Inc()
	}
	c.info.Reset()
	c.info.WithLabelValues(hash).Set(1)
	c.loadedAt.Set(float64(time.Now().UnixNano()) / 1e9)
}

// Failed records a reload that failed: the loaded configuration keeps serving.
func (c *Config) Failed() {
	c.reloads.WithLabelValues("failure").Inc()
}

// RegisterBuildInfo registers admit_build_info{version, goversion}, always 1, into reg.
func RegisterBuildInfo(reg prometheus.Registerer, version string) error {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "admit_build_info",
		Help: "1, labelled with the version of admit and of Go it was built with.",
	}, []string{"version", "goversion"})
	g.WithLabelValues(version, runtime.Version()).Set(1)
	return reg.Register(g)
}
