package algo

import (
	"testing"
	"time"
)

// at returns the Unix microseconds of 2026-11-30 00:00:00 UTC plus d: a multiple of every window
// the tests use up to a day (the day is a multiple of a minute, a second and 1.5 s).
func at(d time.Duration) int64 {
	return time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC).Add(d).UnixMicro()
}

func TestAlignedWindowLeft(t *testing.T) {
	for _, tc := range []struct {
		now    int64
		window time.Duration
		want   time.Duration
	}{
		{at(0), time.Second, time.Second}, // on a boundary: a whole window
		{at(time.Microsecond), time.Second, time.Second - time.Microsecond},
		{at(999_999 * time.Microsecond), time.Second, time.Microsecond}, // the window's last microsecond
		{at(time.Second), time.Second, time.Second},
		{at(250 * time.Millisecond), time.Second, 750 * time.Millisecond},
		{at(40 * time.Second), time.Minute, 20 * time.Second},
		{at(2 * time.Second), 1500 * time.Millisecond, time.Second}, // 3 s is the next multiple of 1.5 s
		{at(5 * time.Hour), 24 * time.Hour, 19 * time.Hour},         // days end at midnight UTC
		{at(1234567 * time.Microsecond), time.Millisecond, 433 * time.Microsecond},
		{0, time.Minute, time.Minute},       // the Unix epoch is a boundary of every window
		{-1, time.Second, time.Microsecond}, // before it too
		{-1_500_000, time.Second, 500 * time.Millisecond},
		{at(0), 0, time.Microsecond},            // an invalid window does not panic
		{at(0), -time.Second, time.Microsecond}, // nor does a negative one
		// A week from the epoch, a Thursday, as envoyproxy/ratelimit's WEEK unit counts.
		{time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC).UnixMicro(), 7 * 24 * time.Hour, 7 * 24 * time.Hour},
		{time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC).UnixMicro(), 7 * 24 * time.Hour, 3 * 24 * time.Hour},
	} {
		if got := AlignedWindowLeft(tc.now, tc.window); got != tc.want {
			t.Errorf("AlignedWindowLeft(%d, %v) = %v; want %v", tc.now, tc.window, got, tc.want)
		}
	}
}

func TestAlignedWindow(t *testing.T) {
	const w = 10 * time.Second
	st := func(count int64, ttl time.Duration) *FixedWindowState { return &FixedWindowState{count, ttl} }
	for _, tc := range []struct {
		name  string
		state *FixedWindowState
		now   int64
		n     int64
		want  FixedWindowResult
	}{
		{"missing key: the window ends at the next multiple", nil, at(4 * time.Second), 1, FixedWindowResult{WriteCreate, true, 2, 0, 6 * time.Second}},
		{"missing key on a boundary: a whole window", nil, at(0), 1, FixedWindowResult{WriteCreate, true, 2, 0, w}},
		{"missing key in the window's last microsecond", nil, at(w - time.Microsecond), 3, FixedWindowResult{WriteCreate, true, 0, 0, time.Microsecond}},
		{"missing key, peek writes nothing", nil, at(4 * time.Second), 0, FixedWindowResult{WriteNone, true, 3, 0, 0}},
		{"increments, expiry untouched", st(1, 6*time.Second), at(4 * time.Second), 1, FixedWindowResult{WriteIncrement, true, 1, 0, 6 * time.Second}},
		{"over the limit writes nothing", st(3, time.Second), at(9 * time.Second), 1, FixedWindowResult{WriteNone, false, 0, time.Second, time.Second}},
		{"cost does not fit", st(2, time.Second), at(9 * time.Second), 2, FixedWindowResult{WriteNone, false, 1, time.Second, time.Second}},
		{"peek on a live key", st(2, time.Second), at(9 * time.Second), 0, FixedWindowResult{WriteNone, true, 1, 0, time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := AlignedWindow(tc.state, 3, w, tc.now, tc.n); got != tc.want {
				t.Fatalf("AlignedWindow(%+v, 3, %v, %d, %d) = %+v, want %+v", tc.state, w, tc.now, tc.n, got, tc.want)
			}
		})
	}
}

// Two keys started at different times in one aligned window end together; a first-admission window
// would not.
func TestAlignedWindowsShareTheirEnd(t *testing.T) {
	const w = time.Minute
	for _, into := range []time.Duration{0, time.Millisecond, 17 * time.Second, w - 2*time.Microsecond} {
		a := AlignedWindow(nil, 5, w, at(into), 1)
		b := AlignedWindow(nil, 5, w, at(into/2), 1)
		if endA, endB := into+a.ResetAfter, into/2+b.ResetAfter; endA != w || endB != w {
			t.Errorf("keys started %v and %v into a window end %v and %v into it; want both at %v", into/2, into, endB, endA, w)
		}
	}
}

func TestCheckAlignedWindow(t *testing.T) {
	const w = 10 * time.Second
	now := at(4 * time.Second) // 6 s left in the window
	for _, tc := range []struct {
		st   FixedWindowState
		want error
	}{
		{FixedWindowState{1, 6 * time.Second}, nil}, // written in this window
		{FixedWindowState{MaxCount, time.Microsecond}, nil},
		{FixedWindowState{3, time.Second}, nil}, // expires before the end: another Limit's, decided as it is
		{FixedWindowState{0, time.Second}, ErrCountOutOfRange},
		{FixedWindowState{MaxCount + 1, time.Second}, ErrCountOutOfRange},
		{FixedWindowState{1, 0}, ErrNoExpiry},
		{FixedWindowState{1, -1}, ErrNoExpiry},
		{FixedWindowState{1, 6*time.Second + time.Microsecond}, ErrExpiryAfterWindowEnd},
		{FixedWindowState{1, w}, ErrExpiryAfterWindowEnd}, // a whole window: valid only on a boundary
	} {
		if got := CheckAlignedWindow(tc.st, w, now); got != tc.want {
			t.Errorf("CheckAlignedWindow(%+v) = %v, want %v", tc.st, got, tc.want)
		}
	}
	if err := CheckAlignedWindow(FixedWindowState{1, w}, w, at(0)); err != nil {
		t.Errorf("a whole window's expiry on a boundary: %v; want nil", err)
	}
}
