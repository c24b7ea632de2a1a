package ratelimitfield_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/ratelimitfield"
)

// Set sets what Policy and AppendRateLimit make of the Decisions' Limits, each field a value of its
// own, and neither when every Limit is in shadow mode.
func TestSet(t *testing.T) {
	perSecond := admit.Limit{Name: "per-second", Algorithm: admit.FixedWindow, Rate: 10, Period: time.Second}
	burst := admit.Limit{Name: "burst", Algorithm: admit.GCRA, Rate: 5, Period: time.Second, Burst: 20}
	shadow := admit.Limit{Name: "per-day", Algorithm: admit.FixedWindow, Rate: 1000, Period: 24 * time.Hour, Shadow: true}
	for _, ds := range [][]admit.Decision{
		{{Allowed: true, Limit: perSecond, Remaining: 3, ResetAfter: 300 * time.Millisecond}},
		{
			{Allowed: false, Limit: perSecond, RetryAfter: 2 * time.Second, ResetAfter: 2 * time.Second},
			{Allowed: true, Limit: burst, Remaining: 19, ResetAfter: 200 * time.Millisecond},
			{Allowed: false, Limit: shadow, RetryAfter: time.Hour},
		},
	} {
		limits := make([]admit.Limit, len(ds))
		for i := range ds {
			limits[i] = ds[i].Limit
		}
		policy, _ := ratelimitfield.Policy(limits)
		rateLimit := string(ratelimitfield.AppendRateLimit(nil, limits, ds, 2))
		hdr := http.Header{}
		ratelimitfield.Set(hdr, ds, 2)
		if got := hdr[ratelimitfield.PolicyName]; len(got) != 1 || got[0] != policy {
			t.Errorf("%s = %q; want [%q]", ratelimitfield.PolicyName, got, policy)
		}
		if got := hdr[ratelimitfield.Name]; len(got) != 1 || got[0] != rateLimit {
			t.Errorf("%s = %q; want [%q]", ratelimitfield.Name, got, rateLimit)
		}
		hdr.Add(ratelimitfield.PolicyName, "added") // must not reach the other field
		if got := hdr[ratelimitfield.Name]; len(got) != 1 || got[0] != rateLimit {
			t.Errorf("after an Add to %s, %s = %q; want [%q]", ratelimitfield.PolicyName, ratelimitfield.Name, got, rateLimit)
		}
	}
	hdr := http.Header{}
	ratelimitfield.Set(hdr, []admit.Decision{{Allowed: false, Limit: shadow}}, 0)
	if len(hdr) != 0 {
		t.Errorf("Set of a shadow policy's Decision set %v; want nothing", hdr)
	}
}

// Fields writes what Policy and AppendRateLimit make of its Limits, byte for byte, whatever the
// Decisions: shadow members left out, r at least 0, integers capped at 15 digits.
func TestFieldsMatchesAppendRateLimit(t *testing.T) {
	perSecond := admit.Limit{Name: "per-second", Algorithm: admit.FixedWindow, Rate: 10, Period: time.Second}
	burst := admit.Limit{Name: "burst", Algorithm: admit.GCRA, Rate: 5, Period: time.Second, Burst: 20}
	shadow := admit.Limit{Name: "per-day", Algorithm: admit.FixedWindow, Rate: 1000, Period: 24 * time.Hour, Shadow: true}
	huge := admit.Limit{Name: "huge", Algorithm: admit.SlidingWindow, Rate: bound.MaxRate, Period: 366 * 24 * time.Hour}
	values := []int64{-1 << 63, -5, 0, 1, 9, 10, 99, 100, 999, 1000, 3600, 86399, 123456789, 999_999_999_999_999, 1_000_000_000_000_000, 1<<63 - 1}
	for _, limits := range [][]admit.Limit{
		{perSecond},
		{shadow},
		{shadow, perSecond},
		{perSecond, shadow, burst, huge},
	} {
		f, ok := ratelimitfield.NewFields(limits)
		if !ok {
			t.Fatalf("NewFields(%v) reports false", limits)
		}
		if want, _ := ratelimitfield.Policy(limits); f.Policy() != want {
			t.Errorf("Policy() = %q; want %q", f.Policy(), want)
		}
		for i, v := range values {
			ds := make([]admit.Decision, len(limits))
			for j := range ds {
				w := values[(i+j)%len(values)]
				ds[j] = admit.Decision{Allowed: (i+j)%3 != 0, Limit: limits[j], Remaining: v,
					RetryAfter: time.Duration(w), ResetAfter: time.Duration(values[(i+2*j+1)%len(values)])}
			}
			for _, retry := range []int64{0, 1, 86400, 999_999_999_999_999} {
				want := string(ratelimitfield.AppendRateLimit(nil, limits, ds, retry))
				got := string(f.AppendRateLimit(nil, ds, retry))
				if got != want {
					t.Errorf("%v, retry %d: Fields.AppendRateLimit = %q; want %q", ds, retry, got, want)
				}
				if len(got) > f.MaxRateLimitLen() {
					t.Errorf("%q is longer than MaxRateLimitLen %d", got, f.MaxRateLimitLen())
				}
			}
		}
	}
	if _, ok := ratelimitfield.NewFields([]admit.Limit{{Name: "bad\x00name"}}); ok {
		t.Error("NewFields of a name that is no structured-field string reports true")
	}
}

// The fields' integers are what strconv writes, for every number of digits.
func FuzzFieldsInteger(f *testing.F) {
	for n := int64(1); n < 1e18; n *= 10 {
		f.Add(n - 1)
		f.Add(n)
	}
	f.Add(int64(-1))
	lim := admit.Limit{Name: "a", Algorithm: admit.FixedWindow, Rate: 1, Period: time.Second}
	fields, _ := ratelimitfield.NewFields([]admit.Limit{lim})
	f.Fuzz(func(t *testing.T, n int64) {
		ds := []admit.Decision{{Allowed: true, Limit: lim, Remaining: n, ResetAfter: time.Duration(n)}}
		want := string(ratelimitfield.AppendRateLimit(nil, []admit.Limit{lim}, ds, 0))
		if got := string(fields.AppendRateLimit(nil, ds, 0)); got != want {
			t.Errorf("%d: %q; want %q", n, got, want)
		}
	})
}

// TestCeilSeconds: the seconds of a window, and the Retry-After of a rejected Decision.
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
		{bound.MaxPeriod, int64(bound.MaxPeriod / time.Second)},
	} {
		if got := ratelimitfield.CeilSeconds(tc.in); got != tc.want {
			t.Errorf("CeilSeconds(%v) = %d, want %d", tc.in, got, tc.want)
		}
		if got := ratelimitfield.RetryAfter(admit.Decision{RetryAfter: tc.in}); got != tc.want {
			t.Errorf("RetryAfter(Decision{RetryAfter: %v}) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestRetryAfterAllowed: an allowed Decision has no Retry-After, whatever its RetryAfter
// field holds; a rejected one has at least 1 second.
func TestRetryAfterAllowed(t *testing.T) {
	for _, ra := range []time.Duration{0, time.Millisecond, 1500 * time.Millisecond} {
		if got := ratelimitfield.RetryAfter(admit.Decision{Allowed: true, RetryAfter: ra, Remaining: 2}); got != 0 {
			t.Errorf("an allowed RetryAfter(Decision{RetryAfter: %v}) = %d; want 0", ra, got)
		}
		if got, want := ratelimitfield.RetryAfter(admit.Decision{RetryAfter: ra}), ratelimitfield.CeilSeconds(ra); got != want || got < 1 {
			t.Errorf("a rejected RetryAfter(Decision{RetryAfter: %v}) = %d; want %d, at least 1", ra, got, want)
		}
	}
}
