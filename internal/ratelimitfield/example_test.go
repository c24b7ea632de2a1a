package ratelimitfield_test

import (
	"fmt"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/ratelimitfield"
)

func Example() {
	limits := []admit.Limit{
		{Name: "per-second", Algorithm: admit.FixedWindow, Rate: 10, Period: time.Second},
		{Name: "per-day", Algorithm: admit.FixedWindow, Rate: 1000, Period: 24 * time.Hour},
	}
	ds := []admit.Decision{
		{Allowed: false, Limit: limits[0], Remaining: 0, RetryAfter: 400 * time.Millisecond, ResetAfter: 400 * time.Millisecond},
		{Allowed: true, Limit: limits[1], Remaining: 997, ResetAfter: 20 * time.Hour},
	}
	policy, _ := ratelimitfield.Policy(limits)
	fmt.Println(ratelimitfield.PolicyName+":", policy)
	fmt.Println(ratelimitfield.Name+":", string(ratelimitfield.AppendRateLimit(nil, limits, ds, 1)))
	// Output:
	// Ratelimit-Policy: "per-second";q=10;w=1, "per-day";q=1000;w=86400
	// Ratelimit: "per-second";r=0;t=1, "per-day";r=997;t=72000
}
