package algo

import (
	"testing"
	"time"
)

func TestFixedWindow(t *testing.T) {
	const w = 10 * time.Second
	st := func(count int64, ttl time.Duration) *FixedWindowState { return &FixedWindowState{count, ttl} }
	for _, tc := range []struct {
		name  string
		state *FixedWindowState
		limit int64
		n     int64
		want  FixedWindowResult
	}{
		{"missing key starts a window", nil, 3, 1, FixedWindowResult{WriteCreate, true, 2, 0, w}},
		{"missing key, whole limit", nil, 3, 3, FixedWindowResult{WriteCreate, true, 0, 0, w}},
		{"missing key, peek writes nothing", nil, 3, 0, FixedWindowResult{WriteNone, true, 3, 0, 0}},
		{"increments, ttl untouched", st(1, 4*time.Second), 3, 1, FixedWindowResult{WriteIncrement, true, 1, 0, 4 * time.Second}},
		{"reaches the limit", st(2, 4*time.Second), 3, 1, FixedWindowResult{WriteIncrement, true, 0, 0, 4 * time.Second}},
		{"over the limit writes nothing", st(3, 4*time.Second), 3, 1, FixedWindowResult{WriteNone, false, 0, 4 * time.Second, 4 * time.Second}},
		{"cost does not fit", st(7, time.Second), 10, 4, FixedWindowResult{WriteNone, false, 3, time.Second, time.Second}},
		{"peek on a full key", st(3, time.Second), 3, 0, FixedWindowResult{WriteNone, true, 0, 0, time.Second}},
		{"count above a lowered limit", st(5, time.Second), 3, 0, FixedWindowResult{WriteNone, false, 0, time.Second, time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FixedWindow(tc.state, tc.limit, w, tc.n); got != tc.want {
				t.Fatalf("FixedWindow(%+v, %d, %v, %d) = %+v, want %+v", tc.state, tc.limit, w, tc.n, got, tc.want)
			}
		})
	}
}

func TestCheckFixedWindow(t *testing.T) {
	const w = 10 * time.Second
	for _, tc := range []struct {
		st   FixedWindowState
		want error
	}{
		{FixedWindowState{1, w}, nil},
		{FixedWindowState{MaxCount, time.Millisecond}, nil},
		{FixedWindowState{0, w}, ErrCountOutOfRange},
		{FixedWindowState{-3, w}, ErrCountOutOfRange},
		{FixedWindowState{MaxCount + 1, w}, ErrCountOutOfRange},
		{FixedWindowState{1, 0}, ErrNoExpiry},
		{FixedWindowState{1, -1}, ErrNoExpiry},
		{FixedWindowState{1, w + time.Millisecond}, ErrExpiryTooLong},
	} {
		if got := CheckFixedWindow(tc.st, w); got != tc.want {
			t.Errorf("CheckFixedWindow(%+v) = %v, want %v", tc.st, got, tc.want)
		}
	}
}
