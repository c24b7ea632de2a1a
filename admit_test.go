package admit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
)

func TestCeilSeconds(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want int64
	}{
		{0, 1},
		{-time.Second, 1},
		{time.Nanosecond, 1},
		{time.Millisecond, 1},
		{999 * time.Millisecond, 1},
		{time.Second, 1},
		{time.Second + time.Millisecond, 2},
		{1500 * time.Millisecond, 2},
		{9999 * time.Millisecond, 10},
		{10 * time.Second, 10},
		{admit.MaxPeriod, int64(admit.MaxPeriod / time.Second)},
	} {
		if got := admit.CeilSeconds(tc.in); got != tc.want {
			t.Errorf("CeilSeconds(%v) = %d, want %d", tc.in, got, tc.want)
		}
		if got := (admit.Decision{RetryAfter: tc.in}).RetryAfterSeconds(); got != tc.want {
			t.Errorf("Decision{RetryAfter: %v}.RetryAfterSeconds() = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	fw := func(rate int64, period time.Duration) admit.Limit {
		return admit.Limit{Algorithm: admit.FixedWindow, Rate: rate, Period: period}
	}
	for _, tc := range []struct {
		lim  admit.Limit
		want string // "" for valid, else a substring of the error
	}{
		{fw(1, time.Millisecond), ""},
		{fw(admit.MaxRate, admit.MaxPeriod), ""},
		{fw(3, 10*time.Second), ""},
		{fw(0, time.Second), "rate 0"},
		{fw(-1, time.Second), "rate -1"},
		{fw(admit.MaxRate+1, time.Second), "rate 1000000000000001"},
		{fw(1, 0), "period 0s"},
		{fw(1, time.Millisecond-1), "period 999.999µs"},
		{fw(1, admit.MaxPeriod+time.Millisecond), "period 8784h0m0.001s"},
		{fw(1, 1500*time.Microsecond), "whole number of milliseconds"},
		{admit.Limit{Rate: 1, Period: time.Second}, "unknown algorithm"},
		{admit.Limit{Algorithm: 99, Rate: 1, Period: time.Second}, "unknown algorithm Algorithm(99)"},
	} {
		err := tc.lim.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%+v.Validate() = %v, want nil", tc.lim, err)
			}
			continue
		}
		if !errors.Is(err, admit.ErrInvalidLimit) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v.Validate() = %v, want ErrInvalidLimit mentioning %q", tc.lim, err, tc.want)
		}
	}
}

func TestValidateRequest(t *testing.T) {
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Second}
	long := strings.Repeat("k", admit.MaxKeyLen)
	for _, tc := range []struct {
		key  string
		lim  admit.Limit
		n    int64
		want error
	}{
		{"k", lim, 0, nil},
		{"k", lim, 3, nil},
		{long, lim, 1, nil},
		{"\xff{}\r\n", lim, 1, nil},
		{"", lim, 1, admit.ErrInvalidRequest},
		{long + "k", lim, 1, admit.ErrInvalidRequest},
		{"k", lim, -1, admit.ErrInvalidRequest},
		{"k", lim, 4, admit.ErrInvalidRequest},
		{"k", admit.Limit{}, 1, admit.ErrInvalidLimit},
	} {
		err := admit.ValidateRequest(tc.key, tc.lim, tc.n)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("ValidateRequest(%.8q, %v, %d) = %v, want %v", tc.key, tc.lim, tc.n, err, tc.want)
		}
	}
}

func TestErrorKinds(t *testing.T) {
	corrupt := errors.Join(errors.New("context"), admit.ErrCorruptState)
	if !errors.Is(corrupt, admit.ErrCorruptState) || !errors.Is(corrupt, admit.ErrUnavailable) {
		t.Error("corrupt state must match ErrCorruptState and ErrUnavailable")
	}
	if errors.Is(admit.ErrUnavailable, admit.ErrCorruptState) {
		t.Error("ErrUnavailable must not match ErrCorruptState")
	}
	for _, err := range []error{admit.ErrInvalidLimit, admit.ErrInvalidRequest} {
		if errors.Is(err, admit.ErrUnavailable) {
			t.Errorf("%v matches ErrUnavailable; a caller's mistake is not an outage", err)
		}
	}
}

func TestParseAlgorithm(t *testing.T) {
	a, err := admit.ParseAlgorithm("fixed_window")
	if err != nil || a != admit.FixedWindow || a.String() != "fixed_window" {
		t.Fatalf("ParseAlgorithm(fixed_window) = %v, %v", a, err)
	}
	if _, err := admit.ParseAlgorithm("leaky"); !errors.Is(err, admit.ErrInvalidLimit) {
		t.Fatalf("ParseAlgorithm(leaky) = %v, want ErrInvalidLimit", err)
	}
}

// countingStore records calls, to show what a Limiter sends to its Store.
type countingStore struct{ calls int }

func (s *countingStore) Take(ctx context.Context, key string, lim admit.Limit, n int64) (admit.Decision, error) {
	s.calls++
	return admit.Decision{Allowed: true, Limit: lim, Remaining: lim.Rate - n}, nil
}

func TestLimiterValidatesBeforeTheStore(t *testing.T) {
	s := &countingStore{}
	bad := admit.NewLimiter(s, admit.Limit{Algorithm: admit.FixedWindow, Rate: 0, Period: time.Second})
	if _, err := bad.Allow(context.Background(), "k"); !errors.Is(err, admit.ErrInvalidLimit) {
		t.Fatalf("Allow with rate 0: %v", err)
	}
	good := admit.NewLimiter(s, admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Second})
	if _, err := good.AllowN(context.Background(), "k", 4); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Fatalf("AllowN(4) with rate 3: %v", err)
	}
	if s.calls != 0 {
		t.Fatalf("the store was called %d times for invalid requests", s.calls)
	}
	d, err := good.Allow(context.Background(), "k")
	if err != nil || s.calls != 1 || d.Remaining != 2 || good.Limit().Rate != 3 {
		t.Fatalf("Allow = %+v, %v after %d calls", d, err, s.calls)
	}
}
