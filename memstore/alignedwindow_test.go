package memstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/limittest"
	"github.com/admit-dev/admit/memstore"
)

// Aligned fixed windows on a fake clock: every figure is exact.

// alignedSecond is 3 per second, the windows aligned to Unix time.
var alignedSecond = admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Second, Aligned: true}

// boundary is a multiple of every window the tests use (a day, a minute, a second).
var boundary = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// An alignedStep is one Take at an offset from boundary, and its exact Decision.
type alignedStep struct {
	at         time.Duration // since boundary
	key        string
	n          int64
	allowed    bool
	remaining  int64
	retryAfter time.Duration
	resetAfter time.Duration
}

// runAligned performs steps in order on a Store whose clock starts at start, moving the clock to
// each step's time.
func runAligned(t *testing.T, start time.Time, lim admit.Limit, steps []alignedStep) *memstore.Store {
	t.Helper()
	clock := limittest.NewClock(start)
	s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	t.Cleanup(func() { s.Close() })
	for i, st := range steps {
		now := boundary.Add(st.at)
		if now.Before(clock.Now()) {
			t.Fatalf("step %d goes back in time", i)
		}
		clock.Advance(now.Sub(clock.Now()))
		d := take(t, s, st.key, lim, st.n)
		want := admit.Decision{Allowed: st.allowed, Limit: lim, Remaining: st.remaining, RetryAfter: st.retryAfter, ResetAfter: st.resetAfter}
		if st.allowed && st.n > 0 {
			want.Token = uint64(now.Add(st.resetAfter).UnixMilli()) // the window's end, a whole millisecond
		}
		if d != want {
			t.Fatalf("step %d, %v after a boundary: Take(%s, n=%d) = %+v; want %+v", i, st.at, st.key, st.n, d, want)
		}
	}
	return s
}

func TestAlignedWindow(t *testing.T) {
	ms, us := time.Millisecond, time.Microsecond
	runAligned(t, boundary.Add(-time.Hour), alignedSecond, []alignedStep{
		// The first admission 250 ms into a window gets its remaining 750 ms, not a whole second.
		{at: 250 * ms, key: "a", n: 1, allowed: true, remaining: 2, resetAfter: 750 * ms},
		// Another key, started later in the same window, ends with it.
		{at: 750 * ms, key: "b", n: 3, allowed: true, remaining: 0, resetAfter: 250 * ms},
		{at: 750 * ms, key: "a", n: 2, allowed: true, remaining: 0, resetAfter: 250 * ms},
		// The window's last microsecond is still in it.
		{at: time.Second - us, key: "a", n: 1, allowed: false, remaining: 0, retryAfter: us, resetAfter: us},
		{at: time.Second - us, key: "b", n: 0, allowed: true, remaining: 0, resetAfter: us},
		// At the boundary both keys start afresh: the boundary burst, 6 units within a microsecond.
		{at: time.Second, key: "a", n: 3, allowed: true, remaining: 0, resetAfter: time.Second},
		{at: time.Second, key: "b", n: 0, allowed: true, remaining: 3},
		{at: time.Second, key: "b", n: 3, allowed: true, remaining: 0, resetAfter: time.Second},
		// Less than a microsecond before the next boundary is that microsecond: still the window.
		{at: 2*time.Second - 500*time.Nanosecond, key: "a", n: 1, allowed: false, remaining: 0, retryAfter: us, resetAfter: us},
		{at: 2 * time.Second, key: "a", n: 1, allowed: true, remaining: 2, resetAfter: time.Second},
		// A key left alone for windows is missing, then starts in the window of now.
		{at: 5*time.Second + 400*ms, key: "b", n: 0, allowed: true, remaining: 3},
		{at: 5*time.Second + 400*ms, key: "b", n: 2, allowed: true, remaining: 1, resetAfter: 600 * ms},
	})
}

// The windows are multiples of the window in Unix time, whatever instant the Store's clock started
// at: a clock that starts at 123.456789 ms past a second does not shift them.
func TestAlignedWindowIgnoresTheStoresStart(t *testing.T) {
	ms, us := time.Millisecond, time.Microsecond
	runAligned(t, boundary.Add(-time.Minute+123456789*time.Nanosecond), alignedSecond, []alignedStep{
		{at: 0, key: "a", n: 1, allowed: true, remaining: 2, resetAfter: time.Second},
		{at: 3*time.Second + 987654321, key: "b", n: 1, allowed: true, remaining: 2, resetAfter: 12*ms + 346*us},
		{at: 4*time.Second + 1, key: "b", n: 1, allowed: true, remaining: 2, resetAfter: time.Second},
	})
	runAligned(t, boundary.Add(-time.Minute+123456789*time.Nanosecond), admit.Limit{Algorithm: admit.FixedWindow, Rate: 10, Period: 1500 * ms, Aligned: true}, []alignedStep{
		// 12:00:00 is a multiple of 1.5 s since the epoch: the windows are [0, 1.5 s), [1.5 s, 3 s), …
		{at: 100 * ms, key: "a", n: 4, allowed: true, remaining: 6, resetAfter: 1400 * ms},
		{at: 1600 * ms, key: "a", n: 4, allowed: true, remaining: 6, resetAfter: 1400 * ms},
		{at: 2999 * ms, key: "a", n: 7, allowed: false, remaining: 6, retryAfter: ms, resetAfter: ms},
	})
}

// An aligned entry ends at the boundary: the sweeper reclaims it there, not a window after its first
// admission.
func TestAlignedEntryIsReclaimedAtTheBoundary(t *testing.T) {
	clock := limittest.NewClock(boundary.Add(900 * time.Millisecond))
	s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	defer s.Close()
	take(t, s, "a", alignedSecond, 1)
	clock.Advance(100*time.Millisecond - time.Nanosecond)
	if _, removed := memstore.Sweep(s); removed != 0 || s.Len() != 1 {
		t.Fatalf("a sweep just before the boundary removed %d of 1 entries; want none", removed)
	}
	clock.Advance(time.Nanosecond)
	if _, removed := memstore.Sweep(s); removed != 1 || s.Len() != 0 {
		t.Fatalf("a sweep at the boundary removed %d entries, %d left; want the entry gone", removed, s.Len())
	}
}

// State that no aligned window wrote: an expiry after the aligned window's end is corrupt, and
// nothing is written; one before it is decided as it is, as Redis decides it.
func TestAlignedWindowCorruptState(t *testing.T) {
	clock := limittest.NewClock(boundary.Add(500 * time.Millisecond))
	s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	defer s.Close()
	firstAdmission := alignedSecond
	firstAdmission.Aligned = false
	take(t, s, "a", firstAdmission, 2) // ends at 1.5 s: after the aligned window's end at 1 s
	for _, n := range []int64{0, 1} {
		_, err := s.Take(t.Context(), admit.Request{Key: "a", Limit: alignedSecond, Cost: n})
		if !errors.Is(err, admit.ErrCorruptState) || !errors.Is(err, admit.ErrUnavailable) {
			t.Fatalf("aligned Take(n=%d) of a key that ends after the aligned window: %v; want ErrCorruptState", n, err)
		}
	}
	if d := take(t, s, "a", firstAdmission, 0); d.Remaining != 1 || d.ResetAfter != time.Second {
		t.Fatalf("after the refused Takes, the key = %+v; want it as it was: 1 remaining, 1 s left", d)
	}
	// In the next aligned window the same key ends before the window does: it is decided as it is.
	clock.Advance(700 * time.Millisecond)
	if d := take(t, s, "a", alignedSecond, 1); !d.Allowed || d.Remaining != 0 || d.ResetAfter != 300*time.Millisecond {
		t.Fatalf("aligned Take, at 1.2 s, of a key that ends at 1.5 s = %+v; want allowed, 0 remaining, ResetAfter 300ms (the key's own end)", d)
	}
}
