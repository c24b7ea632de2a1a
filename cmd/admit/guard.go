package main

import (
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/guard"
	"github.com/admit-dev/admit/metrics"
	"github.com/admit-dev/admit/policy"
	"github.com/prometheus/client_golang/prometheus"
)

// A guarded is the backend within the bad-day decorators of package guard.
type guarded struct {
	top      admit.Store // what the metrics Store wraps
	failOpen *guard.FailOpen
	close    func()
}

// guardStack wraps backend in guard's decorators, registering their metrics into reg:
// OverLimitCache → FailOpen → Breaker → backend for Redis, where the cache saves round trips of a
// hammered full key and the breaker answers at once during an outage; FailOpen alone in memory,
// whose own errors (a full table) are not an outage. cacheMaxAge is the cache's MaxAge
// (server.local_cache_max_age): a change made in Redis is seen within it; 0 stacks no cache;
// cacheEntries its MaxEntries (--local-cache-size), 0 for guard's default. The
// cache forgets the keys of every reset published in Redis (redisstore.Store.OnReset).
// FailOpen fails every Limit closed until it is given the local limits of a configuration
// (guard.FailOpen.SetLocalLimits). breaker configures the breaker (server.breaker).
func guardStack(reg prometheus.Registerer, backend admit.Store, redis bool, cacheEntries int, cacheMaxAge time.Duration, breaker policy.Breaker) (guarded, error) {
	next := backend
	if redis {
		b := guard.NewBreaker(backend, guard.BreakerOptions{Failures: breaker.Failures, CoolOff: breaker.CoolOff, CountLate: breaker.CountLate})
		if err := metrics.RegisterBreaker(reg, "redis", b); err != nil {
			return guarded{}, err
		}
		next = b
	}
	failOpen := guard.NewFailOpen(next, guard.FailOpenOptions{})
	g := guarded{top: failOpen, failOpen: failOpen, close: failOpen.Close}
	if redis && cacheMaxAge > 0 {
		c := guard.NewOverLimitCache(failOpen, guard.OverLimitOptions{MaxEntries: cacheEntries, MaxAge: cacheMaxAge})
		if err := metrics.RegisterOverLimitCache(reg, "redis", c); err != nil {
			return guarded{}, err
		}
		g.top = c
		if r, ok := backend.(interface{ OnReset(func(keys []string)) }); ok {
			r.OnReset(c.Forget) // a reset through any instance: this one forgets the keys at once
		}
	}
	return g, nil
}
