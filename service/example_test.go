package service_test

import (
	"context"
	"fmt"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
)

func Example() {
	cfg, err := policy.Parse("admit.yaml", []byte(`
policies:
  - name: per-second
    algorithm: gcra
    limit: 2
    window: 1s
  - name: per-day
    algorithm: fixed_window
    limit: 1000
    window: 24h
`))
	if err != nil {
		panic(err)
	}
	store := memstore.New(memstore.Options{})
	defer store.Close()
	keys, err := admit.NewKeyBuilder([]byte("a secret every instance shares"))
	if err != nil {
		panic(err)
	}
	svc, err := service.New(store, keys, cfg)
	if err != nil {
		panic(err)
	}
	check := service.Check{Policies: []string{"per-second", "per-day"}, Subject: admit.Subject{ID: "alice"}, Cost: 1}
	for range 3 {
		res, err := svc.Check(context.Background(), check)
		if err != nil {
			panic(err)
		}
		d := res.Decisions[res.Deciding]
		fmt.Printf("allowed=%v policy=%s remaining=%d\n", res.Allowed, d.Limit.Name, d.Remaining)
	}
	// Output:
	// allowed=true policy=per-second remaining=1
	// allowed=true policy=per-second remaining=0
	// allowed=false policy=per-second remaining=0
}
