package memstore

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/admit-dev/admit"
)

// TestValidLimitsConcurrentFirstUse has 16 goroutines take under the same 160 distinct Limits at
// once, more than the cache's slots, each valid Limit beside an invalid one that differs from it in
// one field: every valid Take must be decided and every invalid one refused, whichever goroutine
// filled a slot first (run it with -race: the slots are filled without a lock).
func TestValidLimitsConcurrentFirstUse(t *testing.T) {
	s := New(Options{SweepInterval: -1})
	defer s.Close()
	type pair struct{ valid, invalid admit.Limit }
	var pairs []pair
	for i := range 160 {
		v := admit.Limit{Name: fmt.Sprint("p", i), Algorithm: admit.Algorithm(1 + i%4), Rate: int64(1 + i), Period: time.Second}
		bad := v
		switch i % 3 {
		case 0:
			bad.Period = time.Second + 1 // not whole milliseconds
		case 1:
			bad.Name = fmt.Sprint("P", i) // an upper-case name
		case 2:
			bad.Rate = 0
		}
		pairs = append(pairs, pair{v, bad})
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for k := range pairs {
				p := pairs[(k+g*10)%len(pairs)] // each goroutine starts elsewhere
				key := fmt.Sprint("k", g, "-", k)
				if _, err := s.Take(t.Context(), admit.Request{Key: key, Limit: p.valid, Cost: 0}); err != nil {
					t.Errorf("Take under %v: %v", p.valid, err)
				}
				if _, err := s.Take(t.Context(), admit.Request{Key: key, Limit: p.invalid, Cost: 0}); !errors.Is(err, admit.ErrInvalidLimit) {
					t.Errorf("Take under %v: %v; want ErrInvalidLimit", p.invalid, err)
				}
			}
		})
	}
	wg.Wait()
}

// TestValidLimitsOwnTheirName takes under a Limit whose name is a view of a caller's buffer, then
// rewrites the buffer into an invalid name: the Take under the rewritten name must be refused, as the
// cache holds the name it validated, not the caller's bytes.
func TestValidLimitsOwnTheirName(t *testing.T) {
	s := New(Options{SweepInterval: -1})
	defer s.Close()
	buf := []byte("tenant-api and more bytes of a larger buffer")
	name := unsafe.String(&buf[0], len("tenant-api"))
	lim := admit.Limit{Name: name, Algorithm: admit.FixedWindow, Rate: 10, Period: time.Second}
	if _, err := s.Take(t.Context(), admit.Request{Key: "k", Limit: lim, Cost: 1}); err != nil {
		t.Fatal(err)
	}
	copy(buf, "TENANT-API") // the same length, so the same slot; upper case is invalid
	if _, err := s.Take(t.Context(), admit.Request{Key: "k", Limit: lim, Cost: 1}); !errors.Is(err, admit.ErrInvalidLimit) {
		t.Fatalf("Take under the name %q after its bytes changed: %v; want ErrInvalidLimit", lim.Name, err)
	}
}
