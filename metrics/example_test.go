package metrics_test

import (
	"context"
	"fmt"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

func ExampleNewStore() {
	mem := memstore.New(memstore.Options{})
	defer mem.Close()
	reg := prometheus.NewRegistry() // the caller's: serve it with promhttp.HandlerFor(reg, …)
	store, err := metrics.NewStore(mem, reg)
	if err != nil {
		panic(err)
	}
	lim := admit.Limit{Name: "per-second", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Second}
	for range 3 {
		store.Take(context.Background(), admit.Request{Key: "k", Limit: lim, Cost: 1})
	}

	families, _ := reg.Gather()
	for _, f := range families {
		if f.GetName() != "admit_decisions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if v := m.GetCounter().GetValue(); v > 0 {
				fmt.Println(m.GetLabel()[0].GetValue(), m.GetLabel()[1].GetValue(), v)
			}
		}
	}
	// Output:
	// per-second allowed 2
	// per-second limited 1
}
