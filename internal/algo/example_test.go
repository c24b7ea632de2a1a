package algo_test

import (
	"fmt"
	"time"

	"github.com/admit-dev/admit"
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

// Aligned windows end at multiples of the window in Unix time: two keys started 40 s apart within one
// minute both end at the minute, and the next admission after it starts a new window.
func ExampleAlignedWindow() {
	const limit, window = 3, time.Minute
	minute := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) // a multiple of a minute
	for _, at := range []time.Duration{10 * time.Second, 50 * time.Second} {
		r := algo.AlignedWindow(nil, limit, window, minute.Add(at).UnixMicro(), 1)
		fmt.Printf("a new key at 12:00:%02d: its window ends in %v\n", int(at.Seconds()), r.ResetAfter)
	}
	// A key filled at 12:00:50, asked again at 12:00:59.999, then at 12:01:00 (missing: its window has ended).
	full := &algo.FixedWindowState{Count: limit, TTL: time.Millisecond}
	r := algo.AlignedWindow(full, limit, window, minute.Add(window-time.Millisecond).UnixMicro(), 1)
	fmt.Printf("12:00:59.999 allowed=%v retry_after=%v\n", r.Allowed, r.RetryAfter)
	r = algo.AlignedWindow(nil, limit, window, minute.Add(window).UnixMicro(), 1)
	fmt.Printf("12:01:00 allowed=%v remaining=%d reset_after=%v\n", r.Allowed, r.Remaining, r.ResetAfter)
	// Output:
	// a new key at 12:00:10: its window ends in 50s
	// a new key at 12:00:50: its window ends in 10s
	// 12:00:59.999 allowed=false retry_after=1ms
	// 12:01:00 allowed=true remaining=2 reset_after=1m0s
}

// A GCRA key holds one time, the theoretical arrival time (TAT): a store passes it in, and writes back
// the TAT an admission returns. 2 per second with a burst of 3: three at once, then one every 500 ms.
func ExampleGCRA() {
	lim := admit.Limit{Algorithm: admit.GCRA, Rate: 2, Period: time.Second, Burst: 3}
	var tat int64 // the key does not exist yet
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for i, wait := range []time.Duration{0, 0, 0, 0, 200 * time.Millisecond, 300 * time.Millisecond} {
		now += wait.Microseconds()
		r := algo.GCRA(tat, now, lim, 1)
		if r.Write {
			tat = r.TAT
		}
		fmt.Printf("request %d after %v: allowed=%v remaining=%d retry_after=%v reset_after=%v\n",
			i, wait, r.Allowed, r.Remaining, r.RetryAfter, r.ResetAfter)
	}
	// Output:
	// request 0 after 0s: allowed=true remaining=2 retry_after=0s reset_after=500ms
	// request 1 after 0s: allowed=true remaining=1 retry_after=0s reset_after=1s
	// request 2 after 0s: allowed=true remaining=0 retry_after=0s reset_after=1.5s
	// request 3 after 0s: allowed=false remaining=0 retry_after=500ms reset_after=1.5s
	// request 4 after 200ms: allowed=false remaining=0 retry_after=300ms reset_after=1.3s
	// request 5 after 300ms: allowed=true remaining=0 retry_after=0s reset_after=1.5s
}
