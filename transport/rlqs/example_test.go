package rlqs_test

import (
	"fmt"

	"github.com/admit-dev/admit/transport/rlqs"
)

// Shares splits a budget of 95 requests a second among three Envoys: a tenth equally, the rest
// by demand.
func ExampleShares() {
	shares := rlqs.Shares(95, map[string]float64{"a": 70, "b": 20, "c": 10})
	fmt.Printf("a %.2f, b %.2f, c %.2f\n", shares["a"], shares["b"], shares["c"])
	// Output: a 63.02, b 20.27, c 11.72
}
