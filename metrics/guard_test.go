package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/guard"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/metrics"
	"github.com/admit-dev/admit/redisstore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRegisterBreaker(t *testing.T) {
	backend, err := redisstore.New(redisstore.Config{URL: "redis://" + redistest.ClosedPort(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	b := guard.NewBreaker(backend, guard.BreakerOptions{Failures: 1, CoolOff: time.Hour})
	reg := prometheus.NewPedanticRegistry()
	if err := metrics.RegisterBreaker(reg, "redis", b); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := b.Take(context.Background(), admit.Request{Key: "k", Limit: perSecond, Cost: 1}); !errors.Is(err, admit.ErrUnavailable) {
			t.Fatalf("Take on a closed port: %v", err)
		}
	}
	want := `
# HELP admit_breaker_late_timeouts_total Backend timeouts the circuit breaker did not count as failures: the client's process was late, not the backend.
# TYPE admit_breaker_late_timeouts_total counter
admit_breaker_late_timeouts_total{breaker="redis"} 0
# HELP admit_breaker_opened_total Times the circuit breaker opened.
# TYPE admit_breaker_opened_total counter
admit_breaker_opened_total{breaker="redis"} 1
# HELP admit_breaker_refused_total Operations the open circuit breaker answered at once, unavailable.
# TYPE admit_breaker_refused_total counter
admit_breaker_refused_total{breaker="redis"} 2
# HELP admit_breaker_state 1 for the circuit breaker's state (closed, open, half_open), 0 for the others.
# TYPE admit_breaker_state gauge
admit_breaker_state{breaker="redis",state="closed"} 0
admit_breaker_state{breaker="redis",state="half_open"} 0
admit_breaker_state{breaker="redis",state="open"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if err := metrics.RegisterBreaker(reg, "redis", b); err == nil {
		t.Fatal("a second breaker of one name registered")
	}
}

// lateStore fails every Take with a timeout of a late client, as redisstore's while Redis answered
// the Store's other calls.
type lateStore struct{ admit.Store }

func (lateStore) Take(context.Context, admit.Request) (admit.Decision, error) {
	return admit.Decision{}, fmt.Errorf("store: %w: %w (%w)", admit.ErrUnavailable, context.DeadlineExceeded, guard.ErrClientLate)
}

// admit_breaker_late_timeouts_total counts the late client's timeouts the Breaker did not count;
// under CountLate it counts none.
func TestRegisterBreakerLate(t *testing.T) {
	for _, countLate := range []bool{false, true} {
		mem := memstore.New(memstore.Options{})
		defer mem.Close()
		b := guard.NewBreaker(lateStore{mem}, guard.BreakerOptions{Failures: 10, CountLate: countLate})
		reg := prometheus.NewPedanticRegistry()
		if err := metrics.RegisterBreaker(reg, "redis", b); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			b.Take(context.Background(), admit.Request{Key: "k", Limit: perSecond, Cost: 1})
		}
		n := 3
		if countLate {
			n = 0
		}
		want := fmt.Sprintf(`
# HELP admit_breaker_late_timeouts_total Backend timeouts the circuit breaker did not count as failures: the client's process was late, not the backend.
# TYPE admit_breaker_late_timeouts_total counter
admit_breaker_late_timeouts_total{breaker="redis"} %d
`, n)
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "admit_breaker_late_timeouts_total"); err != nil {
			t.Errorf("CountLate=%v: %v", countLate, err)
		}
	}
}

func TestRegisterOverLimitCache(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	defer mem.Close()
	c := guard.NewOverLimitCache(mem, guard.OverLimitOptions{})
	reg := prometheus.NewPedanticRegistry()
	if err := metrics.RegisterOverLimitCache(reg, "local", c); err != nil {
		t.Fatal(err)
	}
	perMinute := admit.Limit{Name: "per-minute", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Minute}
	for range 5 { // 2 admitted, 1 rejected by memstore, 2 locally
		if _, err := c.Take(context.Background(), admit.Request{Key: "k", Limit: perMinute, Cost: 1}); err != nil {
			t.Fatal(err)
		}
	}
	want := `
# HELP admit_overlimit_cache_entries Rejections the over-limit cache remembers.
# TYPE admit_overlimit_cache_entries gauge
admit_overlimit_cache_entries{cache="local"} 1
# HELP admit_overlimit_cache_hits_total Calls rejected locally by the over-limit cache, without a backend round trip.
# TYPE admit_overlimit_cache_hits_total counter
admit_overlimit_cache_hits_total{cache="local"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
