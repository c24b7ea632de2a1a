package guard_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/guard"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/redisstore"
)

// A client hammering a full key: the backend rejects it once, and the cache answers the rest.
func ExampleOverLimitCache() {
	ctx := context.Background()
	backend := memstore.New(memstore.Options{})
	defer backend.Close()
	store := guard.NewOverLimitCache(backend, guard.OverLimitOptions{})

	lim := admit.Limit{Name: "demo", Algorithm: admit.FixedWindow, Rate: 3, Period: 10 * time.Second}
	for i := range 10 {
		d, err := store.Take(ctx, admit.Request{Key: "user-1", Limit: lim, Cost: 1})
		if err != nil {
			fmt.Println(err)
			return
		}
		if i > 0 {
			fmt.Print(" ")
		}
		fmt.Print(d.Allowed)
	}
	fmt.Println()
	fmt.Println("answered locally:", store.Hits())
	// Output:
	// true true true false false false false false false false
	// answered locally: 6
}

// A Breaker over a Redis that refuses connections: after two failures it opens, and answers
// ErrOpen at once.
func ExampleBreaker() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now: every dial is refused
	backend, err := redisstore.New(redisstore.Config{URL: "redis://" + addr})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer backend.Close()
	store := guard.NewBreaker(backend, guard.BreakerOptions{Failures: 2, CoolOff: time.Second})

	lim := admit.Limit{Name: "demo", Algorithm: admit.FixedWindow, Rate: 3, Period: 10 * time.Second}
	for range 4 {
		_, err := store.Take(context.Background(), admit.Request{Key: "user-1", Limit: lim, Cost: 1})
		fmt.Printf("unavailable=%v open=%v state=%v\n", errors.Is(err, admit.ErrUnavailable), errors.Is(err, guard.ErrOpen), store.State())
	}
	// Output:
	// unavailable=true open=false state=closed
	// unavailable=true open=false state=open
	// unavailable=true open=true state=open
	// unavailable=true open=true state=open
}
