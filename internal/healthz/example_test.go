package healthz_test

import (
	"fmt"

	"github.com/admit-dev/admit/internal/healthz"
)

func ExampleBody() {
	body, _ := healthz.Body("v1.2.0")
	fmt.Printf("%q\n", body)
	body, _ = healthz.Body("")
	fmt.Printf("%q\n", body)
	// Output:
	// "ok v1.2.0\n"
	// "ok\n"
}
