package benchrun_test

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/admit-dev/admit/internal/benchrun"
)

// firstThree is a Target that admits the first three decisions and limits the rest.
type firstThree struct{ n atomic.Int64 }

func (t *firstThree) Probe(context.Context) error { return nil }

func (t *firstThree) Do(context.Context, string) string {
	if t.n.Add(1) <= 3 {
		return "allowed"
	}
	return "limited"
}

func (t *firstThree) Close() {}

// Drive a target at 100 decisions a second for a tenth of a second, on one hot key, and read the
// report: the open loop schedules exactly 10.
func Example() {
	cfg := benchrun.Config{Target: "memory", Kind: "memory", Rate: 100, Duration: 100 * time.Millisecond,
		Keys: 1, HotKey: true, KeyPrefix: "example-", Policies: []string{"three"}, Timeout: time.Second}
	r, err := benchrun.Run(context.Background(), cfg, &firstThree{}, io.Discard)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Mode, r.Scheduled, r.Allowed, r.Limited, r.Errors, r.Dropped)
	fmt.Println(r.Note)
	// Output:
	// open 10 3 7 0 0
	// 70% of the decisions were rejections, which write nothing: give --policy one that admits the load to measure admissions
}
