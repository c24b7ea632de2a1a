package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/memstore"
)

// The seed's demo: 3 requests per 10 seconds. The fourth is rejected, with the Retry-After of an HTTP
// 429 response. A fixed clock keeps the output the same on every run.
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
		d, err := demo.Allow(context.Background(), "account:42")
		switch {
		case err != nil:
			fmt.Println("503:", err)
		case d.Allowed:
			fmt.Printf("200, %d remaining\n", d.Remaining)
		default:
			fmt.Printf("429, Retry-After: %d\n", d.RetryAfterSeconds())
		}
	}
	// Output:
	// 200, 2 remaining
	// 200, 1 remaining
	// 200, 0 remaining
	// 429, Retry-After: 10
}
