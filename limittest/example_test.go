package limittest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/limittest"
	"github.com/admit-dev/admit/memstore"
)

// A Clock stands in for time in the Backend of a Store that takes a clock: the suite's Sleep
// advances it, so a window of ten seconds passes at once. (How a Backend wires it is in the package
// documentation.)
func ExampleClock() {
	clock := limittest.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	store := memstore.New(memstore.Options{Now: clock.Now})
	defer store.Close()
	keys, err := admit.NewKeyBuilder([]byte("at least sixteen bytes of secret"))
	if err != nil {
		panic(err)
	}
	limiter := admit.NewLimiter(store, keys, admit.Limit{Name: "example", Algorithm: admit.FixedWindow, Rate: 1, Period: 10 * time.Second})

	for _, wait := range []time.Duration{0, 4 * time.Second, 6 * time.Second} {
		clock.Advance(wait)
		d, err := limiter.Allow(context.Background(), admit.Subject{ID: "alice"})
		if err != nil {
			panic(err)
		}
		fmt.Printf("after %v more: allowed=%v retry_after=%v\n", wait, d.Allowed, d.RetryAfter)
	}
	// Output:
	// after 0s more: allowed=true retry_after=0s
	// after 4s more: allowed=false retry_after=6s
	// after 6s more: allowed=true retry_after=0s
}
