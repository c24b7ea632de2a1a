package admit_test

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/memstore"
)

// The origin design's policy: one account, 3 requests per 10 seconds. A KeyBuilder turns the account
// into the policy's key with a server secret, so no client can choose its own bucket.
func Example() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	keys, err := admit.NewKeyBuilder([]byte("a secret every instance shares"))
	if err != nil {
		panic(err)
	}
	limiter := admit.NewLimiter(store, keys, admit.Limit{Name: "demo", Algorithm: admit.FixedWindow, Rate: 3, Period: 10 * time.Second})

	for range 4 {
		d, err := limiter.Allow(context.Background(), admit.Subject{ID: "demo-account"})
		if err != nil {
			fmt.Println("503 limiter unavailable") // fail closed
			continue
		}
		if !d.Allowed {
			fmt.Println("429 Retry-After:", math.Ceil(d.RetryAfter.Seconds())) // whole seconds, as httplimit sends it
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

// A Limiter's Limits are checked when it is made: Validate says what is wrong before the first
// request, instead of every request failing.
func ExampleLimiter_Validate() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	keys, err := admit.NewKeyBuilder([]byte("a secret every instance shares"))
	if err != nil {
		panic(err)
	}
	limiter := admit.NewLimiter(store, keys, admit.Limit{Name: "demo", Algorithm: admit.FixedWindow, Rate: 0, Period: 10 * time.Second})
	if err := limiter.Validate(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// limit 0 "demo": admit: invalid limit: rate 0 outside 1-1000000000000000
}

// Two policies of one subject, decided together: a request consumes from both or from neither.
func ExampleLimiter_Take() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	keys, err := admit.NewKeyBuilder([]byte("a secret every instance shares"))
	if err != nil {
		panic(err)
	}
	limiter := admit.NewLimiter(store, keys,
		admit.Limit{Name: "per-second", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Second},
		admit.Limit{Name: "per-day", Algorithm: admit.FixedWindow, Rate: 1000, Period: 24 * time.Hour},
	)
	ds := make([]admit.Decision, 2)
	for i := range 3 {
		d, err := limiter.Take(context.Background(), admit.Subject{ID: "alice"}, 1, "", ds)
		if err != nil {
			panic(err)
		}
		fmt.Printf("request %d: allowed=%v decided by %s; per-second %d left, per-day %d left\n",
			i, d.Allowed, d.Limit.Name, ds[0].Remaining, ds[1].Remaining)
	}
	// A retry with the same ID returns the first answer and consumes nothing.
	for range 2 {
		d, _ := limiter.Take(context.Background(), admit.Subject{ID: "bob"}, 1, "req-7f3a", ds)
		fmt.Printf("bob req-7f3a: allowed=%v replayed=%v per-day %d left\n", d.Allowed, d.Replayed, ds[1].Remaining)
	}
	// Output:
	// request 0: allowed=true decided by per-second; per-second 1 left, per-day 999 left
	// request 1: allowed=true decided by per-second; per-second 0 left, per-day 998 left
	// request 2: allowed=false decided by per-second; per-second 0 left, per-day 998 left
	// bob req-7f3a: allowed=true replayed=false per-day 999 left
	// bob req-7f3a: allowed=true replayed=true per-day 999 left
}

// An LLM API charged in tokens: reserve the request's max_tokens, then settle the tokens the model's
// answer used. The refund goes back to the window the reservation was counted in.
func ExampleLimiter_Reserve() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	keys, err := admit.NewKeyBuilder([]byte("a secret every instance shares"))
	if err != nil {
		panic(err)
	}
	limiter := admit.NewLimiter(store, keys, admit.Limit{Name: "tokens", Algorithm: admit.FixedWindow, Rate: 10_000, Period: time.Minute})

	const maxTokens = 4000
	d, settle, err := limiter.Reserve(context.Background(), admit.Subject{ID: "tenant-42"}, maxTokens)
	if err != nil || !d.Allowed {
		fmt.Println("429 or 503: do not call the model")
		return
	}
	fmt.Println("reserved, remaining:", d.Remaining)
	used := int64(1234) // the model's answer, counted once it is done
	d, err = settle(context.Background(), used)
	if err != nil {
		fmt.Println("settle:", err) // the reservation stays consumed
		return
	}
	fmt.Println("settled, remaining:", d.Remaining)
	// Output:
	// reserved, remaining: 6000
	// settled, remaining: 8766
}
