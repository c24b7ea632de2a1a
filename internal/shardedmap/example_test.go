package shardedmap_test

import (
	"fmt"
	"sync"

	"github.com/admit-dev/admit/internal/shardedmap"
)

func Example() {
	c := shardedmap.New()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				c.Inc("alice")
			}
		})
	}
	wg.Wait()
	fmt.Println(c.Count("alice"), c.Count("bob"))
	// Output: 8000 0
}
