package metrics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/metrics"
	"github.com/admit-dev/admit/redisstore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// countsOf returns an OverrideCounter of store's overrides of policies, in order.
func countsOf(store admit.Store, policies ...string) metrics.OverrideCounter {
	return func(ctx context.Context, each func(string, int64)) error {
		for _, p := range policies {
			n, err := store.OverrideCount(ctx, p)
			if err != nil {
				return err
			}
			each(p, n)
		}
		return nil
	}
}

// TestRegisterOverrides checks admit_overrides{policy}: read from the Store at each gathering, a
// series per policy, and none when the Store cannot answer.
func TestRegisterOverrides(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	defer mem.Close()
	keys, err := admit.NewKeyBuilder([]byte("metrics test secret of 32 bytes."))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := metrics.RegisterOverrides(reg, countsOf(mem, "api", "daily")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		key, err := keys.OverrideKey("api", admit.Subject{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if err := mem.SetOverride(t.Context(), admit.Override{Key: key, Rate: 9}); err != nil {
			t.Fatal(err)
		}
	}
	want := `
# HELP admit_overrides Overrides stored for the policy, read from the backend at each scrape (per policy of the loaded configuration).
# TYPE admit_overrides gauge
admit_overrides{policy="api"} 2
admit_overrides{policy="daily"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if err := metrics.RegisterOverrides(reg, countsOf(mem, "api")); err == nil {
		t.Error("a second admit_overrides registered")
	}

	down, err := redisstore.New(redisstore.Config{URL: "redis://" + redistest.ClosedPort(t), CommandTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	reg = prometheus.NewPedanticRegistry()
	if err := metrics.RegisterOverrides(reg, countsOf(down, "api")); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "admit_overrides"); n != 0 {
		t.Errorf("a backend down: %d series; want none", n)
	}
}
