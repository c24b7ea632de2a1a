package validate_test

import (
	"errors"
	"fmt"

	"github.com/admit-dev/admit/internal/validate"
)

// ExampleRequest checks a Request's own fields under a valid Limit of capacity 3.
func ExampleRequest() {
	fmt.Println(validate.Request("rl:k", 3, "", false, 3))
	err := validate.Request("rl:k", 4, "", false, 3)
	fmt.Println(err, errors.Is(err, validate.ErrInvalidRequest))
	// Output:
	// <nil>
	// admit: invalid request: cost 4 outside 0-3 true
}

// ExampleErrCorruptState shows that corrupt state is a kind of unavailability.
func ExampleErrCorruptState() {
	err := fmt.Errorf("store: %w", validate.ErrCorruptState)
	fmt.Println(errors.Is(err, validate.ErrUnavailable), errors.Is(validate.ErrUnavailable, validate.ErrCorruptState))
	// Output: true false
}
