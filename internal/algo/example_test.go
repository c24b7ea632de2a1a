package algo_test

import (
	"fmt"
	"time"

	"github.com/admit-dev/admit/internal/algo"
)

// A store keeps the state, asks the transition what to do, and makes the one write it names.
func ExampleFixedWindow() {
	const limit, window = 3, 10 * time.Second
	var st *algo.FixedWindowState // the key does not exist yet
	for range 4 {
		r := algo.FixedWindow(st, limit, window, 1)
		switch r.Write {
		case algo.WriteCreate:
			st = &algo.FixedWindowState{Count: 1, TTL: window}
		case algo.WriteIncrement:
			st.Count++
		}
		fmt.Printf("allowed=%v remaining=%d retry_after=%v\n", r.Allowed, r.Remaining, r.RetryAfter)
	}
	// Output:
	// allowed=true remaining=2 retry_after=0s
	// allowed=true remaining=1 retry_after=0s
	// allowed=true remaining=0 retry_after=0s
	// allowed=false remaining=0 retry_after=10s
}
