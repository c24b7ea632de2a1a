package luasource_test

import (
	"fmt"
	"strings"

	"github.com/admit-dev/admit/internal/luasource"
	_ "github.com/admit-dev/admit/redisstore" // registers the entry points
)

func ExampleLookup() {
	for _, name := range []string{"take", "settle", "release", "fixed_window"} {
		src, ok := luasource.Lookup(name)
		fmt.Println(name, ok, strings.Contains(src, "local MAX = "))
	}
	// Output:
	// take true true
	// settle true true
	// release true true
	// fixed_window false false
}
