package envoyfleet_test

import (
	"fmt"
	"time"

	"github.com/admit-dev/admit/internal/envoyfleet"
)

// An Envoy with no assignment decides by its no_assignment_behavior.
func Example() {
	now := time.Unix(1_800_000_000, 0)
	e := envoyfleet.New(envoyfleet.Options{Domain: "mesh", Now: func() time.Time { return now }, NoAssignment: envoyfleet.DenyAll})
	fmt.Println(e.Request(map[string]string{"name": "api"}), e.Kind(map[string]string{"name": "api"}))
	// Output: false none
}
