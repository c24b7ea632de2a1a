package algo

import (
	"slices"
	"testing"
	"time"
)

func TestFixedWindowSettle(t *testing.T) {
	const w = 10 * time.Second
	st := func(count int64, ttl time.Duration) *FixedWindowState { return &FixedWindowState{count, ttl} }
	res := func(write Write, allowed bool, remaining int64, retry, reset time.Duration, units int64) FixedWindowSettled {
		return FixedWindowSettled{FixedWindowResult{write, allowed, remaining, retry, reset}, units}
	}
	for _, tc := range []struct {
		name  string
		state *FixedWindowState
		same  bool
		delta int64
		want  FixedWindowSettled
	}{
		{"refund gives units back", st(8, 4*time.Second), true, -3, res(WriteDecrement, true, 5, 0, 4*time.Second, 3)},
		{"refund of the whole count deletes the key", st(3, 4*time.Second), true, -3, res(WriteDelete, true, 10, 0, 0, 3)},
		{"refund never below 0", st(2, 4*time.Second), true, -5, res(WriteDelete, true, 10, 0, 0, 2)},
		{"refund to a later window lands nowhere", st(4, 9*time.Second), false, -3, res(WriteNone, true, 6, 0, 9*time.Second, 0)},
		{"refund to a missing key lands nowhere", nil, false, -3, res(WriteNone, true, 10, 0, 0, 0)},
		{"exact settles nothing", st(4, time.Second), true, 0, res(WriteNone, true, 6, 0, time.Second, 0)},
		{"overrun that fits", st(4, time.Second), true, 5, res(WriteIncrement, true, 1, 0, time.Second, 5)},
		{"overrun takes what is left", st(8, time.Second), true, 5, res(WriteIncrement, false, 0, time.Second, time.Second, 2)},
		{"overrun on a full key consumes nothing", st(10, time.Second), true, 1, res(WriteNone, false, 0, time.Second, time.Second, 0)},
		{"overrun in a later window counts there", st(1, 9*time.Second), false, 2, res(WriteIncrement, true, 7, 0, 9*time.Second, 2)},
		{"overrun on a missing key starts a window", nil, false, 4, res(WriteCreate, true, 6, 0, w, 4)},
		{"overrun beyond the limit on a missing key", nil, false, 25, res(WriteCreate, false, 0, w, w, 10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FixedWindowSettle(tc.state, tc.same, 10, w, tc.delta); got != tc.want {
				t.Fatalf("FixedWindowSettle(%+v, %v, 10, %v, %d) = %+v, want %+v", tc.state, tc.same, w, tc.delta, got, tc.want)
			}
		})
	}
}

func TestAlignedWindowSettle(t *testing.T) {
	const w = 10 * time.Second
	at := int64(1_700_000_003_000_000) // 3 s into a window of 10 s: 7 s left
	got := AlignedWindowSettle(nil, false, 10, w, at, 4)
	want := FixedWindowSettled{FixedWindowResult{WriteCreate, true, 6, 0, 7 * time.Second}, 4}
	if got != want {
		t.Fatalf("an overrun on a missing aligned key = %+v, want %+v: the window ends with the aligned one", got, want)
	}
	got = AlignedWindowSettle(&FixedWindowState{5, 7 * time.Second}, true, 10, w, at, -2)
	want = FixedWindowSettled{FixedWindowResult{WriteDecrement, true, 7, 0, 7 * time.Second}, 2}
	if got != want {
		t.Fatalf("a refund in the aligned window = %+v, want %+v", got, want)
	}
}

func TestSlidingWindowSettle(t *testing.T) {
	const s = 1_000_000
	const w = 10 * time.Second
	cur := int64(1_700_000_000_000_000) // a multiple of 10 s
	at := cur + 5*s                     // half way: the previous window weighs half
	st := func(start, prev, curr int64) *SlidingWindowState { return &SlidingWindowState{start, prev, curr} }
	ms := func(us int64) time.Duration { return ceilMillis(us) }
	for _, tc := range []struct {
		name   string
		state  *SlidingWindowState
		token  int64
		delta  int64
		write  Write
		units  int64
		after  SlidingWindowState // the State a WriteCreate stores
		allow  bool
		remain int64
		reset  time.Duration
	}{
		{"refund from the current window", st(cur, 4, 6), cur, -2, WriteCreate, 2, SlidingWindowState{cur, 4, 4}, true, 4, ms(15 * s)},
		{"refund from the previous window", st(cur, 4, 6), cur - 10*s, -2, WriteCreate, 2, SlidingWindowState{cur, 2, 6}, true, 3, ms(15 * s)},
		{"refund from the stored window, now the previous", st(cur-10*s, 3, 6), cur - 10*s, -2, WriteCreate, 2, SlidingWindowState{cur - 10*s, 0, 4}, true, 8, ms(5 * s)},
		{"refund of the whole current count keeps the previous", st(cur, 4, 3), cur, -3, WriteCreate, 3, SlidingWindowState{cur - 10*s, 0, 4}, true, 8, ms(5 * s)},
		{"refund of everything deletes", st(cur, 0, 3), cur, -5, WriteDelete, 3, SlidingWindowState{}, true, 10, 0},
		{"refund of an older window lands nowhere", st(cur, 4, 6), cur - 20*s, -2, WriteNone, 0, SlidingWindowState{}, true, 2, ms(15 * s)},
		{"refund of a window the key no longer holds", st(cur, 4, 6), cur + 10*s, -2, WriteNone, 0, SlidingWindowState{}, true, 2, ms(15 * s)},
		{"overrun that fits", st(cur, 4, 6), cur, 1, WriteIncrement, 1, SlidingWindowState{}, true, 1, ms(15 * s)},
		{"overrun takes what is left", st(cur, 4, 6), cur, 5, WriteIncrement, 2, SlidingWindowState{}, false, 0, ms(15 * s)},
		{"overrun in a new window", st(cur-10*s, 0, 4), cur - 10*s, 3, WriteCreate, 3, SlidingWindowState{cur, 4, 3}, true, 5, ms(15 * s)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := SlidingWindowSettle(tc.state, tc.token, at, 10, w, tc.delta)
			if got.Write != tc.write || got.Units != tc.units || got.Allowed != tc.allow || got.Remaining != tc.remain || got.ResetAfter != tc.reset {
				t.Fatalf("SlidingWindowSettle = %+v; want write %v of %d, allowed %v, remaining %d, reset %v", got, tc.write, tc.units, tc.allow, tc.remain, tc.reset)
			}
			if tc.write == WriteCreate && (got.State != tc.after || got.Expiry != tc.after.Start+20*s) {
				t.Fatalf("SlidingWindowSettle stores %+v expiring at %d; want %+v expiring two windows after its start", got.State, got.Expiry, tc.after)
			}
			if !tc.allow && got.RetryAfter <= 0 {
				t.Fatalf("an overrun that did not fit: RetryAfter %v; want the time until a unit fits", got.RetryAfter)
			}
		})
	}
}

func TestSlidingLogSettle(t *testing.T) {
	const w = 10 * time.Second
	const at = int64(1_700_000_000_000_000)
	a, b := at-8_000_000, at-2_000_000 // two admissions in the window
	old := at - 12_000_000             // one that has left it
	log := []int64{old, a, a, a, b, b}
	for _, tc := range []struct {
		name   string
		log    []int64
		token  int64
		delta  int64
		write  Write
		units  int64
		allow  bool
		remain int64
	}{
		{"refund removes the reservation's entries", log, a, -2, WriteDecrement, 2, true, 7},
		{"refund of more than were logged then", log, b, -3, WriteDecrement, 2, true, 7},
		{"refund of a reservation that left the window", log, old, -1, WriteNone, 0, true, 5},
		{"refund of the only entries deletes", []int64{b, b}, b, -2, WriteDelete, 2, true, 10},
		{"overrun that fits", log, a, 3, WriteIncrement, 3, true, 2},
		{"overrun takes what is left", log, a, 9, WriteIncrement, 5, false, 0},
		{"overrun on a missing key", nil, a, 4, WriteCreate, 4, true, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(tc.log)
			got := SlidingLogSettle(tc.log, tc.token, at, 10, w, tc.delta)
			if got.Write != tc.write || got.Units != tc.units || got.Allowed != tc.allow || got.Remaining != tc.remain {
				t.Fatalf("SlidingLogSettle = %+v; want write %v of %d, allowed %v, remaining %d", got, tc.write, tc.units, tc.allow, tc.remain)
			}
			if !slices.Equal(tc.log, before) {
				t.Fatalf("SlidingLogSettle changed the log it was given: %v, was %v", tc.log, before)
			}
			if tc.write == WriteIncrement && got.Trim != 1 {
				t.Fatalf("an overrun: Trim %d; want 1, the entry that left the window", got.Trim)
			}
		})
	}
}

func TestGCRASettle(t *testing.T) {
	const s = 1_000_000
	lim := gcraLimit(3, 30*time.Second, 0) // T = 10 s, τ = 30 s
	for _, tc := range []struct {
		name   string
		tat    int64
		token  int64
		delta  int64
		write  bool
		del    bool
		newTAT int64
		allow  bool
		remain int64
	}{
		{"refund of an undrained reservation", now + 30*s, now + 30*s, -2, true, false, now + 10*s, true, 2},
		{"refund of a partly drained reservation", now + 5*s, now + 5*s, -2, false, true, 0, true, 3},
		{"refund after later admissions gives back only what the reservation holds", now + 30*s, now + 8*s, -2, true, false, now + 22*s, true, 0},
		{"refund of a drained reservation lands nowhere", now + 20*s, now - s, -1, false, false, 0, true, 1},
		{"refund of an emptied bucket", now - s, now - s, -1, false, false, 0, true, 3},
		{"overrun that fits", now + 10*s, now + 10*s, 2, true, false, now + 30*s, true, 0},
		{"overrun takes what is left", now + 15*s, now + 15*s, 3, true, false, now + 25*s, false, 0},
		{"overrun on a missing key", 0, now, 1, true, false, now + 10*s, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := GCRASettle(tc.tat, tc.token, now, lim, tc.delta)
			if got.Write != tc.write || got.Delete != tc.del || got.TAT != tc.newTAT || got.Allowed != tc.allow || got.Remaining != tc.remain {
				t.Fatalf("GCRASettle = %+v; want write %v, delete %v, TAT %d, allowed %v, remaining %d", got, tc.write, tc.del, tc.newTAT, tc.allow, tc.remain)
			}
			if got.TAT != 0 && got.TAT <= now {
				t.Fatalf("GCRASettle writes TAT %d, not after now", got.TAT)
			}
		})
	}
}
