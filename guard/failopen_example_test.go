package guard_test

import (
	"context"
	"fmt"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/guard"
	"github.com/admit-dev/admit/memstore"
)

// A policy that fails open: while the backend cannot decide, each process admits up to its local
// limit per window, and marks the decisions degraded.
func ExampleFailOpen() {
	// A backend that cannot decide new keys: a memstore whose one entry is taken. In production it
	// is Redis, down.
	backend := memstore.New(memstore.Options{MaxEntries: 1, Shards: 1})
	defer backend.Close()
	api := admit.Limit{Name: "api", Algorithm: admit.FixedWindow, Rate: 100, Period: time.Minute}
	backend.Take(context.Background(), admit.Request{Key: "rl:api:{someone}", Limit: api, Cost: 1})

	store := guard.NewFailOpen(backend, guard.FailOpenOptions{
		// 100 per minute across 25 instances: 4 per minute each while the backend is down.
		Local: func(lim admit.Limit) (int64, bool) { return lim.Rate / 25, lim.Name == "api" },
	})
	defer store.Close()
	for range 5 {
		d, err := store.Take(context.Background(), admit.Request{Key: "rl:api:{alice}", Limit: api, Cost: 1})
		if err != nil {
			fmt.Println("unavailable:", err)
			continue
		}
		fmt.Printf("allowed %v, remaining %d of %d, degraded %v\n", d.Allowed, d.Remaining, d.Limit.Rate, d.Degraded)
	}
	// Output:
	// allowed true, remaining 3 of 4, degraded true
	// allowed true, remaining 2 of 4, degraded true
	// allowed true, remaining 1 of 4, degraded true
	// allowed true, remaining 0 of 4, degraded true
	// allowed false, remaining 0 of 4, degraded true
}
