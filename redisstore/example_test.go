package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/redisstore"
)

// A request is admitted (200), over the limit (429), or undecided (503): fail closed when Redis
// cannot answer. Nothing listens on port 1 here, so the limiter cannot decide.
func Example() {
	store, err := redisstore.New(redisstore.Config{URL: "redis://127.0.0.1:1"})
	if err != nil {
		panic(err) // only a malformed URL fails here; New does not connect
	}
	defer store.Close()
	keys, err := admit.NewKeyBuilder([]byte("the secret every instance shares"))
	if err != nil {
		panic(err)
	}
	limiter := admit.NewLimiter(store, keys, admit.Limit{Name: "demo", Algorithm: admit.FixedWindow, Rate: 3, Period: 10 * time.Second})

	d, err := limiter.Allow(context.Background(), admit.Subject{ID: "demo-account"})
	switch {
	case errors.Is(err, admit.ErrUnavailable):
		fmt.Println("503 limiter unavailable")
	case err != nil:
		fmt.Println("500", err)
	case !d.Allowed:
		fmt.Println("429 retry after", d.RetryAfter)
	default:
		fmt.Println("200 ok,", d.Remaining, "left")
	}
	// Output: 503 limiter unavailable
}
