package admit_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
)

func gcra(rate int64, period time.Duration, burst int64) admit.Limit {
	return admit.Limit{Algorithm: admit.GCRA, Rate: rate, Period: period, Burst: burst}
}

func TestValidateGCRA(t *testing.T) {
	for _, tc := range []struct {
		lim  admit.Limit
		want string // "" for valid, else a substring of the error
	}{
		{gcra(3, 10*time.Second, 0), ""},
		{gcra(10, time.Second, 50), ""},
		{gcra(10, time.Second, 1), ""},
		{gcra(1, bound.MaxPeriod, 0), ""},
		{gcra(1000, time.Millisecond, 0), ""},                          // 1 µs: the shortest interval
		{gcra(bound.MaxPeriod.Microseconds(), bound.MaxPeriod, 0), ""}, // the highest rate there is
		{gcra(3, time.Millisecond, 0), ""},                             // 333.33… µs → 334: 0.2% slower
		{gcra(250_000, time.Second, bound.MaxRate), ""},                // τ = 4·10^15 µs ≤ 2^52
		{gcra(1001, time.Millisecond, 0), "more than one unit per microsecond"},
		{gcra(bound.MaxRate, time.Minute, 0), "more than one unit per microsecond"},
		{gcra(300_000, time.Second, 0), "rounds up to 4us, a rate 16.67% lower"},
		{gcra(999, time.Millisecond, 0), "at most 1% is allowed"},
		{gcra(1, time.Second, 4_503_599_628), "exceeds 1250999h"}, // 2^52 µs ≈ 1251000 h; 1 s × burst
		{gcra(1, time.Minute, 75_059_994), "at most 75059993 units"},
		{gcra(3, time.Second, -1), "burst -1"},
		{gcra(3, time.Second, bound.MaxRate+1), "burst 1000000000000001"},
		{gcra(0, time.Second, 0), "rate 0"},
		{gcra(3, 0, 0), "period 0s"},
		{gcra(3, 1500*time.Microsecond, 0), "whole number of milliseconds"},
		{admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Second, Burst: 3}, "only gcra has a burst"},
		{admit.Limit{Algorithm: admit.GCRA, Rate: 3, Period: time.Second, Aligned: true}, "only fixed_window"},
	} {
		err := tc.lim.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%v.Validate() = %v, want nil", tc.lim, err)
			}
			continue
		}
		if !errors.Is(err, admit.ErrInvalidLimit) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v.Validate() = %v, want ErrInvalidLimit mentioning %q", tc.lim, err, tc.want)
		}
	}
	// Both bounds are stated where they are checked.
	if err := gcra(1, time.Second, 4_503_599_628).Validate(); !strings.Contains(err.Error(), "2^52 us") {
		t.Errorf("the tolerance bound is not named: %v", err)
	}
	if err := gcra(2000, time.Millisecond, 0).Validate(); !strings.Contains(err.Error(), "at least 1us") {
		t.Errorf("the interval bound is not named: %v", err)
	}
}

func TestEmissionIntervalAndCapacity(t *testing.T) {
	for _, tc := range []struct {
		lim      admit.Limit
		interval time.Duration
		capacity int64
		maxWait  time.Duration
	}{
		{gcra(10, time.Second, 0), 100 * time.Millisecond, 10, time.Second},
		{gcra(10, time.Second, 25), 100 * time.Millisecond, 25, 2500 * time.Millisecond},
		{gcra(600, time.Minute, 0), 100 * time.Millisecond, 600, time.Minute},
		{gcra(3, 10*time.Second, 0), 3_333_334 * time.Microsecond, 3, 10_001 * time.Millisecond}, // rounded up; 10.000002 s → ms
		{gcra(7, time.Second, 1), 142_858 * time.Microsecond, 1, 143 * time.Millisecond},
		{admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: 10 * time.Second}, 3_333_334 * time.Microsecond, 3, 10 * time.Second},
		{admit.Limit{}, 0, 0, 0},
	} {
		if got := tc.lim.EmissionInterval(); got != tc.interval {
			t.Errorf("%v.EmissionInterval() = %v, want %v", tc.lim, got, tc.interval)
		}
		if got := tc.lim.Capacity(); got != tc.capacity {
			t.Errorf("%v.Capacity() = %d, want %d", tc.lim, got, tc.capacity)
		}
		if got := tc.lim.MaxWait(); got != tc.maxWait {
			t.Errorf("%v.MaxWait() = %v, want %v", tc.lim, got, tc.maxWait)
		}
	}
}

func TestRequestValidateGCRA(t *testing.T) {
	for _, tc := range []struct {
		lim  admit.Limit
		cost int64
		want error
	}{
		{gcra(3, time.Second, 0), 3, nil},
		{gcra(3, time.Second, 0), 4, admit.ErrInvalidRequest},
		{gcra(3, time.Second, 10), 10, nil}, // above the rate, within the burst
		{gcra(3, time.Second, 10), 11, admit.ErrInvalidRequest},
		{gcra(3, time.Second, 1), 2, admit.ErrInvalidRequest}, // below the rate, above the burst: never fits
		{gcra(3, time.Second, 1), 0, nil},
	} {
		r := admit.Request{Key: "k", Limit: tc.lim, Cost: tc.cost}
		if err := r.Validate(); tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("cost %d under %v: Validate() = %v, want %v", tc.cost, tc.lim, err, tc.want)
		}
	}
}

func TestGCRAShape(t *testing.T) {
	for _, tc := range []struct {
		lim  admit.Limit
		want string
	}{
		{gcra(10, time.Second, 0), "gcra100000b10"},
		{gcra(10, time.Second, 20), "gcra100000b20"},
		{gcra(3, 10*time.Second, 0), "gcra3333334b3"},
	} {
		if got := keyShape(t, tc.lim); got != tc.want {
			t.Errorf("%v: the shape of its keys is %q, want %q", tc.lim, got, tc.want)
		}
	}
	if got := gcra(10, time.Second, 20).String(); got != "10 per 1s, burst 20 (gcra)" {
		t.Errorf("String() = %q", got)
	}
	if a, err := admit.ParseAlgorithm("token_bucket"); err != nil || a != admit.GCRA {
		t.Errorf("ParseAlgorithm(token_bucket) = %v, %v; want gcra", a, err)
	}
}

// A GCRA key holds a time, which is a number of units only at one emission interval: a new rate or
// burst starts on fresh keys; the same bucket written another way keeps them.
func TestGCRAKeys(t *testing.T) {
	kb := newKeyBuilder(t)
	alice := admit.Subject{ID: "alice"}
	api := gcra(10, time.Second, 20)
	api.Name = "api"
	base := key(t, kb, api, "1", alice)
	if want := "rl:api:v1-gcra100000b20:{"; !strings.HasPrefix(base, want) {
		t.Fatalf("key = %q; want it to start with %q", base, want)
	}
	perMinute := api
	perMinute.Rate, perMinute.Period = 600, time.Minute
	if key(t, kb, perMinute, "1", alice) != base {
		t.Error("600 per minute is the bucket of 10 per second, but has another key")
	}
	faster := api
	faster.Rate = 20
	if key(t, kb, faster, "1", alice) == base {
		t.Error("a new rate keeps a GCRA key: its TAT would count the units used twice over")
	}
	bigger := api
	bigger.Burst = 30
	if key(t, kb, bigger, "1", alice) == base {
		t.Error("a new burst keeps a GCRA key")
	}
	implicit := api
	implicit.Burst = 0
	explicit := api
	explicit.Burst = 10
	if key(t, kb, implicit, "1", alice) != key(t, kb, explicit, "1", alice) {
		t.Error("burst 0 and burst = rate are one bucket, but have two keys")
	}
	fw := api
	fw.Algorithm, fw.Burst = admit.FixedWindow, 0
	if key(t, kb, fw, "1", alice) == base {
		t.Error("a fixed window and a GCRA share a key")
	}
}

// A GCRA key, as docs/keys.md and docs/gcra.md show it, must never change: it is stored state.
func TestGCRAKeyFormatIsStable(t *testing.T) {
	api := admit.Limit{Name: "api", Algorithm: admit.GCRA, Rate: 10, Period: time.Second, Burst: 20}
	const want = "rl:api:v1-gcra100000b20:{d9e6d899cf23189c77c5e86126feed62}"
	if got := key(t, newKeyBuilder(t), api, "1", admit.Subject{ID: "alice"}); got != want {
		t.Fatalf("key of alice under %v = %q; want %q", api, got, want)
	}
	for _, doc := range []string{"docs/keys.md", "docs/gcra.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s does not show the GCRA key as the builder makes it, %s", doc, want)
		}
	}
}

// keyShape returns the shape segment of a key under lim: what follows "v1-" in
// rl:<policy>:v1-<shape>:{<slot digest>}.
func keyShape(t *testing.T, lim admit.Limit) string {
	t.Helper()
	lim.Name = "shape"
	k := key(t, newKeyBuilder(t), lim, "1", admit.Subject{ID: "alice"})
	shape, ok := strings.CutPrefix(k, "rl:shape:v1-")
	if i := strings.Index(shape, ":{"); ok && i > 0 {
		return shape[:i]
	}
	t.Fatalf("key %q has no shape segment", k)
	return ""
}
