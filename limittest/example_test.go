package limittest_test

import (
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/limittest"
	"github.com/admit-dev/admit/memstore"
)

// This is how a Store's own tests wire the suite, here for memstore on a fake clock. In the Store's
// package, the Test function is simply
//
//	func TestConformance(t *testing.T) { limittest.TestStore(t, newBackend) }
//
// A Redis backend would instead open a new client of one test server in Open, close it with
// t.Cleanup, and call time.Sleep in Sleep.
func ExampleTestStore() {
	conformance := func(t *testing.T) { limittest.TestStore(t, newBackend) }
	_ = conformance
}

// newBackend returns a fresh Backend for one subtest.
func newBackend(t *testing.T) limittest.Backend {
	c := limittest.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	s := memstore.New(memstore.Options{Now: c.Now})
	t.Cleanup(func() { s.Close() })
	return &backend{clock: c, store: s}
}

// backend is a limittest.Backend: one in-process Store, and the clock it reads.
type backend struct {
	clock *limittest.Clock
	store *memstore.Store
}

// Open returns the one Store: every Store of a Backend must share state.
func (b *backend) Open(t *testing.T) admit.Store { return b.store }

// Sleep advances the fake clock.
func (b *backend) Sleep(t *testing.T, d time.Duration) { b.clock.Advance(d) }
