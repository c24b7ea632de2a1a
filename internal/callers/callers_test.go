package callers_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/admit-dev/admit/internal/callers"
)

func TestRunCallsEachIndexOnce(t *testing.T) {
	res := testing.Benchmark(func(b *testing.B) {
		seen := make([]atomic.Int32, b.N)
		callers.Run(b, 16, func(i int) error {
			seen[i].Add(1)
			return nil
		})
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Errorf("index %d called %d times", i, seen[i].Load())
			}
		}
	})
	if res.N == 0 {
		t.Fatal("the benchmark did not run")
	}
}

func TestRunReportsAnError(t *testing.T) {
	var failed bool
	testing.Benchmark(func(b *testing.B) {
		defer func() { failed = b.Failed() }()
		callers.Run(b, 4, func(i int) error { return errors.New("boom") })
	})
	if !failed {
		t.Fatal("an error from op did not fail the benchmark")
	}
}

func ExampleName() {
	for _, n := range callers.Counts {
		fmt.Println(callers.Name(n))
	}
	// Output:
	// callers=1
	// callers=16
	// callers=256
}
