package memstore_test

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/memstore"
)

// The origin design's demo (docs/origin-design.md): 3 requests per 10 seconds. The fourth is
// rejected, with the Retry-After of an HTTP 429 response. A fixed clock keeps the output the same
// on every run.
func Example() {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	store := memstore.New(memstore.Options{Now: func() time.Time { return start }})
	defer store.Close()

	keys, err := admit.NewKeyBuilder([]byte("at least sixteen bytes of secret"))
	if err != nil {
		panic(err)
	}
	demo := admit.NewLimiter(store, keys, admit.Limit{Name: "demo", Algorithm: admit.FixedWindow, Rate: 3, Period: 10 * time.Second})
	for range 4 {
		d, err := demo.Allow(context.Background(), admit.Subject{ID: "account:42"})
		switch {
		case err != nil:
			fmt.Println("503:", err)
		case d.Allowed:
			fmt.Printf("200, %d remaining\n", d.Remaining)
		default:
			fmt.Printf("429, Retry-After: %.0f\n", math.Ceil(d.RetryAfter.Seconds()))
		}
	}
	// Output:
	// 200, 2 remaining
	// 200, 1 remaining
	// 200, 0 remaining
	// 429, Retry-After: 10
}

// A concurrency limit: at most 2 requests of an account in flight. Limiter.Admit returns a release
// to defer; a lease never released expires after the Limit's Period, the lease TTL.
func Example_concurrency() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	keys, err := admit.NewKeyBuilder([]byte("at least sixteen bytes of secret"))
	if err != nil {
		panic(err)
	}
	inflight := admit.NewLimiter(store, keys, admit.Limit{Name: "inflight", Algorithm: admit.Concurrency, Rate: 2, Period: 30 * time.Second})
	ctx := context.Background()
	d, release1, _ := inflight.Admit(ctx, admit.Subject{ID: "account:42"}, 1, "", nil)
	fmt.Println("first:", d.Allowed, d.Remaining)
	d, release2, _ := inflight.Admit(ctx, admit.Subject{ID: "account:42"}, 1, "", nil)
	fmt.Println("second:", d.Allowed, d.Remaining)
	d, _, _ = inflight.Admit(ctx, admit.Subject{ID: "account:42"}, 1, "", nil)
	fmt.Println("third:", d.Allowed)
	release1()
	d, release3, _ := inflight.Admit(ctx, admit.Subject{ID: "account:42"}, 1, "", nil)
	fmt.Println("after a release:", d.Allowed, d.Remaining)
	release2()
	release3()
	// Output:
	// first: true 1
	// second: true 0
	// third: false
	// after a release: true 0
}
