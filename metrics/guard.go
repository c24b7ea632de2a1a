package metrics

import (
	"github.com/admit-dev/admit/guard"
	"github.com/prometheus/client_golang/prometheus"
)

// A BreakerSource is what [RegisterBreaker] reads: a *guard.Breaker.
type BreakerSource interface {
	// State returns the breaker's state.
	State() guard.BreakerState
	// Opened returns the number of times it has opened.
	Opened() uint64
	// Refused returns the number of operations it has answered with guard.ErrOpen.
	Refused() uint64
	// Late returns the number of the backend's timeouts it did not count as failures because the
	// client was late (guard.ErrClientLate).
	Late() uint64
}

// RegisterBreaker registers into reg the series of the circuit breaker b, labelled breaker=name:
//
//	admit_breaker_state{breaker, state}     1 for b's state (closed, open, half_open), 0 for the others
//	admit_breaker_opened_total{breaker}     times b has opened
//	admit_breaker_refused_total{breaker}    operations b answered with guard.ErrOpen, without the backend
//	admit_breaker_late_timeouts_total{breaker}  the backend's timeouts b did not count: the client was late
//
// They are read from b when reg is gathered. It reports the error of a registration that fails,
// such as a second breaker of one name in one Registerer.
func RegisterBreaker(reg prometheus.Registerer, name string, b BreakerSource) error {
	labels := prometheus.Labels{"breaker": name}
	var cs []prometheus.Collector
	for _, s := range []guard.BreakerState{guard.BreakerClosed, guard.BreakerOpen, guard.BreakerHalfOpen} {
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "admit_breaker_state",
			Help:        "1 for the circuit breaker's state (closed, open, half_open), 0 for the others.",
			ConstLabels: prometheus.Labels{"breaker": name, "state": s.String()},
		}, func() float64 {
			if b.State() == s {
				return 1
			}
			return 0
		}))
	}
	cs = append(cs,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "admit_breaker_opened_total", Help: "Times the circuit breaker opened.", ConstLabels: labels,
		}, func() float64 { return float64(b.Opened()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "admit_breaker_refused_total", Help: "Operations the open circuit breaker answered at once, unavailable.", ConstLabels: labels,
		}, func() float64 { return float64(b.Refused()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "admit_breaker_late_timeouts_total", Help: "Backend timeouts the circuit breaker did not count as failures: the client's process was late, not the backend.", ConstLabels: labels,
		}, func() float64 { return float64(b.Late()) }),
	)
	return registerAll(reg, cs)
}

// An OverLimitSource is what [RegisterOverLimitCache] reads: a *guard.OverLimitCache.
type OverLimitSource interface {
	// Hits returns the number of calls answered locally.
	Hits() uint64
	// Len returns the number of entries held.
	Len() int
}

// RegisterOverLimitCache registers into reg the series of the over-limit cache c, labelled
// cache=name:
//
//	admit_overlimit_cache_hits_total{cache}   Take and TakeAll calls rejected locally, without the backend
//	admit_overlimit_cache_entries{cache}      rejections remembered now (at most the cache's MaxEntries)
//
// They are read from c when reg is gathered. It reports the error of a registration that fails.
func RegisterOverLimitCache(reg prometheus.Registerer, name string, c OverLimitSource) error {
	labels := prometheus.Labels{"cache": name}
	return registerAll(reg, []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "admit_overlimit_cache_hits_total", Help: "Calls rejected locally by the over-limit cache, without a backend round trip.", ConstLabels: labels,
		}, func() float64 { return float64(c.Hits()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "admit_overlimit_cache_entries", Help: "Rejections the over-limit cache remembers.", ConstLabels: labels,
		}, func() float64 { return float64(c.Len()) }),
	})
}

// registerAll registers cs into reg, unregistering those already registered if one fails.
func registerAll(reg prometheus.Registerer, cs []prometheus.Collector) error {
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return err
		}
	}
	return nil
}
