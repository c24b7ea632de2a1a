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

var perSecond = admit.Limit{Name: "per-second", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Second}

// newStore returns a metrics Store over a fresh memstore, and the registry it registered into.
func newStore(t *testing.T) (*metrics.Store, *prometheus.Registry) {
	t.Helper()
	mem := memstore.New(memstore.Options{})
	t.Cleanup(func() { mem.Close() })
	reg := prometheus.NewPedanticRegistry()
	s, err := metrics.NewStore(mem, reg)
	if err != nil {
		t.Fatal(err)
	}
	return s, reg
}

// decisions returns admit_decisions_total{policy, result}.
func decisions(t *testing.T, reg *prometheus.Registry, policy, result string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "admit_decisions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["policy"] == policy && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestCountsEveryResult(t *testing.T) {
	s, reg := newStore(t)
	ctx := t.Context()
	take := func(ctx context.Context, key string, lim admit.Limit, id string) {
		t.Helper()
		s.Take(ctx, admit.Request{Key: key, Limit: lim, Cost: 1, ID: id})
	}
	take(ctx, "a", perSecond, "")
	take(ctx, "a", perSecond, "")
	take(ctx, "a", perSecond, "") // limited
	take(ctx, "b", perSecond, "r1")
	take(ctx, "b", perSecond, "r1") // replayed
	take(ctx, "", perSecond, "")    // invalid: empty key
	shadow := perSecond
	shadow.Shadow = true
	take(ctx, "a", shadow, "") // shadow: over the limit, in shadow mode
	done, cancel := context.WithCancel(ctx)
	cancel()
	take(done, "c", perSecond, "") // unavailable: canceled

	for result, want := range map[string]float64{"allowed": 3, "limited": 1, "shadow": 1, "replayed": 1, "invalid": 1, "unavailable": 1} {
		if got := decisions(t, reg, "per-second", result); got != want {
			t.Errorf("admit_decisions_total{policy=per-second,result=%s} = %v; want %v", result, got, want)
		}
	}
	want := `
# HELP admit_backend_errors_total Store operations that could not decide, by kind of error (corrupt_state, timeout, canceled, unavailable, invalid, unsupported, other).
# TYPE admit_backend_errors_total counter
admit_backend_errors_total{kind="canceled"} 1
admit_backend_errors_total{kind="corrupt_state"} 0
admit_backend_errors_total{kind="invalid"} 1
admit_backend_errors_total{kind="other"} 0
admit_backend_errors_total{kind="timeout"} 0
admit_backend_errors_total{kind="unavailable"} 0
admit_backend_errors_total{kind="unsupported"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "admit_backend_errors_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "admit_decision_duration_seconds"); n != 3 {
		t.Errorf("%d duration series; want 3 (take, release, settle)", n)
	}
}

// TestCorruptStateCounted makes memstore find corrupt state — a window longer than the Limit's
// Period — and checks the error's kind is counted.
func TestCorruptStateCounted(t *testing.T) {
	s, reg := newStore(t)
	long := perSecond
	long.Period = time.Hour
	if _, err := s.Take(t.Context(), admit.Request{Key: "k", Limit: long, Cost: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Take(t.Context(), admit.Request{Key: "k", Limit: perSecond, Cost: 1}); !errors.Is(err, admit.ErrCorruptState) {
		t.Fatalf("Take = %v; want corrupt state", err)
	}
	if got := testutil.ToFloat64(counterOf(t, reg, "admit_backend_errors_total", "kind", "corrupt_state")); got != 1 {
		t.Errorf("corrupt_state errors = %v; want 1", got)
	}
}

// counterOf returns a collector of the one series of name with label=value, for testutil.ToFloat64.
func counterOf(t *testing.T, reg *prometheus.Registry, name, label, value string) prometheus.Collector {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if f.GetName() == name && l.GetName() == label && l.GetValue() == value {
					return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x", Help: "x"}, m.GetCounter().GetValue)
				}
			}
		}
	}
	t.Fatalf("no series %s{%s=%q}", name, label, value)
	return nil
}

// TestSeriesDoNotGrowWithKeys feeds many keys, several policies at once, and checks that the number
// of series stays that of the policies: no key or subject is ever a label.
func TestSeriesDoNotGrowWithKeys(t *testing.T) {
	s, reg := newStore(t)
	perMinute := admit.Limit{Name: "per-minute", Algorithm: admit.GCRA, Rate: 60, Period: time.Minute}
	keys, err := admit.NewKeyBuilder([]byte("metrics test secret, 32 bytes.."))
	if err != nil {
		t.Fatal(err)
	}
	lim := admit.NewLimiter(s, keys, perSecond, perMinute)
	series := func() int {
		n, err := testutil.GatherAndCount(reg)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	lim.Allow(t.Context(), admit.Subject{ID: "subject-0"})
	before := series()
	for i := range 5000 {
		subject := fmt.Sprintf("subject-%d", i)
		lim.Allow(t.Context(), admit.Subject{ID: subject})
		lim.Allow(t.Context(), admit.Subject{ID: subject})
		lim.Allow(t.Context(), admit.Subject{ID: subject})
	}
	if after := series(); after != before {
		t.Errorf("%d series after 5000 subjects; %d after the first: series grew with keys", after, before)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), "subject-") || strings.Contains(l.GetValue(), "rl:") {
					t.Errorf("%s has a subject or key as label %s=%q", f.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
}

func TestConfig(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c, err := metrics.NewConfig(reg)
	if err != nil {
		t.Fatal(err)
	}
	c.Loaded("aaaa", false)
	c.Failed()
	c.Loaded("bbbb", true)
	want := `
# HELP admit_config_info 1, labelled with the SHA-256 of the configuration file that is loaded.
# TYPE admit_config_info gauge
admit_config_info{hash="bbbb"} 1
# HELP admit_config_reloads_total Configuration reloads, by result (success, failure). A failed reload leaves the loaded configuration serving.
# TYPE admit_config_reloads_total counter
admit_config_reloads_total{result="failure"} 1
admit_config_reloads_total{result="success"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "admit_config_info", "admit_config_reloads_total"); err != nil {
		t.Error(err)
	}
	if _, err := metrics.NewConfig(reg); err == nil {
		t.Error("a second Config registered into one registry without error")
	}
}

// TestAdmin checks admit_admin_changes_total: a series at 0 for each action named, one more per
// change counted, and a second Admin refused by the same registry.
func TestAdmin(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	a, err := metrics.NewAdmin(reg, "reset", "override_set")
	if err != nil {
		t.Fatal(err)
	}
	a.Changed("reset")
	a.Changed("reset")
	want := `
# HELP admit_admin_changes_total Changes made through the admin API, by action (reset, ...). Refused changes are not counted.
# TYPE admit_admin_changes_total counter
admit_admin_changes_total{action="override_set"} 0
admit_admin_changes_total{action="reset"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "admit_admin_changes_total"); err != nil {
		t.Error(err)
	}
	if _, err := metrics.NewAdmin(reg); err == nil {
		t.Error("a second Admin registered into one registry without error")
	}
}

func TestKind(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("x: %w", admit.ErrCorruptState), metrics.KindCorruptState},
		{fmt.Errorf("x: %w: %w", admit.ErrUnavailable, context.DeadlineExceeded), metrics.KindTimeout},
		{fmt.Errorf("x: %w: %w", admit.ErrUnavailable, context.Canceled), metrics.KindCanceled},
		{fmt.Errorf("x: %w", admit.ErrInvalidRequest), metrics.KindInvalid},
		{fmt.Errorf("x: %w", admit.ErrInvalidLimit), metrics.KindInvalid},
		{fmt.Errorf("x: %w", errors.ErrUnsupported), metrics.KindUnsupported},
		{fmt.Errorf("x: %w", admit.ErrUnavailable), metrics.KindUnavailable},
		{errors.New("x"), metrics.KindOther},
	} {
		if got := metrics.Kind(c.err); got != c.want {
			t.Errorf("Kind(%v) = %s; want %s", c.err, got, c.want)
		}
	}
}

// TestCountsDegraded: above a guard.FailOpen whose backend cannot decide (a Redis on a closed
// port), the local limiter's decisions count as degraded — admitted or not — and the policy that
// fails closed as unavailable.
func TestCountsDegraded(t *testing.T) {
	redis, err := redisstore.New(redisstore.Config{URL: "redis://" + redistest.ClosedPort(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { redis.Close() })
	open := admit.Limit{Name: "open", Algorithm: admit.FixedWindow, Rate: 10, Period: time.Minute}
	failOpen := guard.NewFailOpen(redis, guard.FailOpenOptions{Local: func(lim admit.Limit) (int64, bool) { return 2, lim.Name == "open" }})
	t.Cleanup(failOpen.Close)
	reg := prometheus.NewPedanticRegistry()
	s, err := metrics.NewStore(failOpen, reg)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // 2 admitted locally, 1 rejected locally: 3 degraded
		if d, err := s.Take(t.Context(), admit.Request{Key: "k", Limit: open, Cost: 1}); err != nil || !d.Degraded {
			t.Fatalf("Take with Redis unreachable, failing open: %+v, %v; want a degraded decision", d, err)
		}
	}
	if _, err := s.Take(t.Context(), admit.Request{Key: "k", Limit: perSecond, Cost: 1}); !errors.Is(err, admit.ErrUnavailable) {
		t.Fatalf("Take with Redis unreachable, failing closed: %v; want admit.ErrUnavailable", err)
	}
	for _, c := range []struct {
		policy, result string
		want           float64
	}{{"open", "degraded", 3}, {"open", "allowed", 0}, {"open", "limited", 0}, {"per-second", "unavailable", 1}} {
		if got := decisions(t, reg, c.policy, c.result); got != c.want {
			t.Errorf("admit_decisions_total{policy=%s,result=%s} = %v; want %v", c.policy, c.result, got, c.want)
		}
	}
}
