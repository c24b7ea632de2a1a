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

// An Override raises one subject's limit under one policy, for every instance sharing the Redis,
// until it expires; the Limiter's decisions for that subject then say Overridden. Its key comes from
// the KeyBuilder the Limiter uses. It is checked before any I/O; nothing listens on port 1 here, so
// a valid one cannot be stored.
func ExampleStore_SetOverride() {
	store, err := redisstore.New(redisstore.Config{URL: "redis://127.0.0.1:1"})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	keys, err := admit.NewKeyBuilder([]byte("the secret every instance shares"))
	if err != nil {
		panic(err)
	}
	key, err := keys.OverrideKey("demo", admit.Subject{ID: "big-customer"})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	err = store.SetOverride(ctx, admit.Override{Key: key, Rate: 0})
	fmt.Println("rate 0 invalid:", errors.Is(err, admit.ErrInvalidRequest))
	err = store.SetOverride(ctx, admit.Override{Key: key, Rate: 30, Expires: time.Now().Add(24 * time.Hour), Reason: "ticket 123"})
	fmt.Println("Redis down:", errors.Is(err, admit.ErrUnavailable))
	// Output:
	// rate 0 invalid: true
	// Redis down: true
}

// A policy where an over-admission costs money waits for its replicas: an admission is reported
// only once one replica holds it, else it is undecided (ErrUnavailable) with its unit consumed. The
// async policy beside it waits for nothing. Nothing listens on port 1 here, so both are undecided.
func Example_replicated() {
	store, err := redisstore.New(redisstore.Config{URL: "redis://127.0.0.1:1"})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	payments := admit.Limit{Name: "payments", Algorithm: admit.FixedWindow, Rate: 5, Period: time.Minute,
		Replicas: 1, ReplicaTimeout: 300 * time.Millisecond}
	d, err := store.Take(context.Background(), admit.Request{Key: "rl:payments:v1:{acct-7}", Limit: payments, Cost: 1})
	switch {
	case errors.Is(err, admit.ErrUnavailable):
		fmt.Println("503 undecided: no payment sent")
	case d.Allowed:
		fmt.Println("200 send the payment: a replica holds the admission")
	default:
		fmt.Println("429 over the limit")
	}
	// Output: 503 undecided: no payment sent
}
