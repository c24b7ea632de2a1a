package check_test

import (
	"errors"
	"fmt"

	"github.com/admit-dev/admit/internal/check"
)

// ExampleRequest checks a Request's own fields under a valid Limit of capacity 3.
func ExampleRequest() {
	fmt.Println(check.Request("rl:k", 3, "", false, 3))
	err := check.Request("rl:k", 4, "", false, 3)
	fmt.Println(err, errors.Is(err, check.ErrInvalidRequest))
	// Output:
	// <nil>
	// admit: invalid request: cost 4 outside 0-3 true
}

// ExampleErrCorruptState shows that corrupt state is a kind of unavailability.
func ExampleErrCorruptState() {
	err := fmt.Errorf("store: %w", check.ErrCorruptState)
	fmt.Println(errors.Is(err, check.ErrUnavailable), errors.Is(check.ErrUnavailable, check.ErrCorruptState))
	// Output: true false
}
