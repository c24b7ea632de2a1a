package service_test

import (
	"context"
	"fmt"
	"time"

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

// DecideItems decides limits that are no policies, such as the rules of Envoy's rate limit
// service: here one client's limit and a path's under it, of one slot, all-or-nothing.
func ExampleService_DecideItems() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	keys, err := admit.NewKeyBuilder([]byte("a secret every instance shares"))
	if err != nil {
		panic(err)
	}
	svc, err := service.New(store, keys, &policy.Config{}) // no policies of its own
	if err != nil {
		panic(err)
	}
	client := admit.Limit{Name: "client", Algorithm: admit.FixedWindow, Rate: 10, Period: time.Hour}
	path := admit.Limit{Name: "path", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Hour}
	items := []service.Item{
		{Limit: client, Version: "1", Subject: admit.Subject{ID: "client=a", Slot: "client=a"}, Cost: 1},
		{Limit: path, Version: "1", Subject: admit.Subject{ID: "client=a|path=/x", Slot: "client=a"}, Cost: 1},
	}
	ds := make([]admit.Decision, len(items))
	for range 3 {
		if err := svc.DecideItems(context.Background(), items, ds, service.BySlot); err != nil {
			panic(err)
		}
		fmt.Printf("client allowed=%v remaining=%d; path allowed=%v remaining=%d\n", ds[0].Allowed, ds[0].Remaining, ds[1].Allowed, ds[1].Remaining)
	}
	// The third: the path is over, so the client's unit, which would fit, is not counted either.

	// Output:
	// client allowed=true remaining=9; path allowed=true remaining=1
	// client allowed=true remaining=8; path allowed=true remaining=0
	// client allowed=true remaining=8; path allowed=false remaining=0
}

// SetOverride gives one subject other numbers under a policy, on every instance sharing the
// Store, until the override expires or is deleted.
func ExampleService_SetOverride() {
	cfg, err := policy.Parse("admit.yaml", []byte("policies:\n  - name: api\n    algorithm: fixed_window\n    limit: 1\n    window: 1h\n"))
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
	ctx := context.Background()
	check := service.Check{Policies: []string{"api"}, Subject: admit.Subject{ID: "tenant-42"}, Cost: 1}
	spend := func() {
		res, err := svc.Check(ctx, check)
		if err != nil {
			panic(err)
		}
		d := res.Decisions[0]
		fmt.Printf("allowed=%v limit=%d overridden=%v\n", res.Allowed, d.Limit.Rate, d.Overridden)
	}
	spend()
	spend()
	spec := service.OverrideSpec{Policy: "api", Subject: check.Subject, Limit: 3, ExpiresIn: 7 * 24 * time.Hour, Reason: "migration week"}
	if _, err := svc.SetOverride(ctx, spec); err != nil {
		panic(err)
	}
	spend()
	if _, err := svc.DeleteOverride(ctx, "api", check.Subject); err != nil {
		panic(err)
	}
	spend()
	// Output:
	// allowed=true limit=1 overridden=false
	// allowed=false limit=1 overridden=false
	// allowed=true limit=3 overridden=true
	// allowed=false limit=1 overridden=false
}
