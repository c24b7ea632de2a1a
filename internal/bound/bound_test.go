package bound_test

import (
	"fmt"

	"github.com/admit-dev/admit/internal/bound"
)

// Example prints the bounds a library user reads in prose in package admit's doc comments.
func Example() {
	fmt.Println(bound.MaxRate, bound.MinPeriod, bound.MaxPeriod, bound.MaxKeyLen, bound.MaxRequests, bound.SlotCount)
	// Output: 1000000000000000 1ms 8784h0m0s 512 16 16384
}
