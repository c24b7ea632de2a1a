package admit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/memstore"
)

// The origin design's policy: one account, 3 requests per 10 seconds.
func Example() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	limiter := admit.NewLimiter(store, admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: 10 * time.Second})

	for range 4 {
		d, err := limiter.Allow(context.Background(), "rl:demo:v1:{demo-account}")
		if err != nil {
			fmt.Println("503 limiter unavailable") // fail closed
			continue
		}
		if !d.Allowed {
			fmt.Println("429 Retry-After:", d.RetryAfterSeconds())
			continue
		}
		fmt.Println("200 remaining:", d.Remaining)
	}
	// Output:
	// 200 remaining: 2
	// 200 remaining: 1
	// 200 remaining: 0
	// 429 Retry-After: 10
}
