package redistest_test

import (
	"testing"

	"github.com/admit-dev/admit/internal/redistest"
)

// A test starts its own redis-server, which is gone when the test ends. This example needs redis-server,
// so it is compiled but not run.
func ExampleStart() {
	testCounter := func(t *testing.T) {
		s := redistest.Start(t, "--maxmemory", "1mb")
		if n, err := s.Do(t, "INCR", "hits").AsInt64(); err != nil || n != 1 {
			t.Fatalf("INCR hits = %d, %v; want 1", n, err)
		}
		// A Redis error reply is returned, not reported.
		if err := s.Do(t, "INCRBY", "hits", "lots").Error(); err == nil {
			t.Fatal("INCRBY with a non-integer succeeded")
		}
		s.Kill(t)    // Redis is gone: the code under test should report it unavailable.
		s.Restart(t) // Same address, empty data.
	}
	_ = testCounter
}
