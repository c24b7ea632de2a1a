package limittest

import (
	"sync"
	"testing"
	"time"
)

// A Clock is a fake clock for the Backend of a Store that takes a clock: it moves only when told,
// so Backend.Sleep can advance it instead of sleeping. It is safe for concurrent use (the suite
// calls Take from many goroutines). Make one with [NewClock].
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock that reads start until it is advanced.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time. Pass the method value (c.Now) to a Store as its clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// A ClockBackend is a Backend that tells the time its Stores decide by. The suite then checks the
// windows that are aligned to that clock (admit.Limit.Aligned) against it: each must end at a
// multiple of its Period in Unix time. Without it, the suite checks aligned windows against one
// another only — keys share their windows' ends, a window starts where the last one ended — which a
// Store that aligns its windows to anything else, such as its own start, would pass too.
type ClockBackend interface {
	Backend
	// Now returns the time by the clock the Stores decide by: the fake clock a Store was given, or,
	// for Redis, the server's TIME.
	Now(t *testing.T) time.Time
}
