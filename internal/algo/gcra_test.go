package algo

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
)

const now = 1_700_000_000_000_000 // Unix µs

func gcraLimit(rate int64, period time.Duration, burst int64) admit.Limit {
	return admit.Limit{Algorithm: admit.GCRA, Rate: rate, Period: period, Burst: burst}
}

func TestGCRA(t *testing.T) {
	const s = 1_000_000                           // µs
	tenSeconds := gcraLimit(3, 30*time.Second, 0) // T = 10 s, τ = 30 s
	burstOfFive := gcraLimit(1, time.Second, 5)   // T = 1 s, τ = 5 s
	rounded := gcraLimit(3, 10*time.Second, 0)    // T = 3,333,334 µs (rounded up), τ = 10,000,002 µs
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, tc := range []struct {
		name string
		lim  admit.Limit
		tat  int64
		n    int64
		want GCRAResult
	}{
		{"missing key, one unit", tenSeconds, 0, 1, GCRAResult{true, true, 2, 0, 10 * time.Second, now + 10*s}},
		{"missing key, the whole burst", tenSeconds, 0, 3, GCRAResult{true, true, 0, 0, 30 * time.Second, now + 30*s}},
		{"missing key, peek writes nothing", tenSeconds, 0, 0, GCRAResult{false, true, 3, 0, 0, 0}},
		{"emptied bucket is a missing key", tenSeconds, now - 5*s, 1, GCRAResult{true, true, 2, 0, 10 * time.Second, now + 10*s}},
		{"TAT now is an empty bucket", tenSeconds, now, 1, GCRAResult{true, true, 2, 0, 10 * time.Second, now + 10*s}},
		{"one unit used", tenSeconds, now + 10*s, 1, GCRAResult{true, true, 1, 0, 20 * time.Second, now + 20*s}},
		{"fills the bucket", tenSeconds, now + 20*s, 1, GCRAResult{true, true, 0, 0, 30 * time.Second, now + 30*s}},
		{"full bucket rejects, writes nothing", tenSeconds, now + 30*s, 1, GCRAResult{false, false, 0, 10 * time.Second, 30 * time.Second, 0}},
		{"half a unit back is not a unit", tenSeconds, now + 25*s, 1, GCRAResult{false, false, 0, 5 * time.Second, 25 * time.Second, 0}},
		{"peek of a part-full bucket", tenSeconds, now + 25*s, 0, GCRAResult{false, true, 0, 0, 25 * time.Second, 0}},
		{"cost above what fits: remaining is what fits", tenSeconds, now + 15*s, 2, GCRAResult{false, false, 1, 5 * time.Second, 15 * time.Second, 0}},
		{"cost that fits", tenSeconds, now + 15*s, 1, GCRAResult{true, true, 0, 0, 25 * time.Second, now + 25*s}},
		{"a microsecond short of a unit", tenSeconds, now + 10*s + 1, 1, GCRAResult{true, true, 0, 0, ms(20_001), now + 20*s + 1}},
		{"retry after rounds up", tenSeconds, now + 30*s - 1, 1, GCRAResult{false, false, 0, 10 * time.Second, 30 * time.Second, 0}},
		{"over-full bucket rejects a peek", tenSeconds, now + 31*s, 0, GCRAResult{false, false, 0, time.Second, 31 * time.Second, 0}},
		{"burst above rate: all at once", burstOfFive, 0, 5, GCRAResult{true, true, 0, 0, 5 * time.Second, now + 5*s}},
		{"burst above rate: then one per interval", burstOfFive, now + 5*s, 1, GCRAResult{false, false, 0, time.Second, 5 * time.Second, 0}},
		{"burst above rate: cost above rate fits", burstOfFive, now + 1*s, 4, GCRAResult{true, true, 0, 0, 5 * time.Second, now + 5*s}},
		{"rounded interval: a whole burst", rounded, 0, 3, GCRAResult{true, true, 0, 0, ms(10_001), now + 10_000_002}},
		{"rounded interval: one period later, 2 µs short", rounded, now + 2, 3, GCRAResult{false, false, 2, ms(1), ms(1), 0}},
		{"rounded interval: one unit fits", rounded, now + 2, 1, GCRAResult{true, true, 1, 0, ms(3_334), now + 3_333_336}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := GCRA(tc.tat, now, tc.lim, tc.n); got != tc.want {
				t.Fatalf("GCRA(tat %+d µs, %v, %d) = %+v, want %+v", tc.tat-now, tc.lim, tc.n, got, tc.want)
			}
		})
	}
}

func TestGCRAAtItsBounds(t *testing.T) {
	// The largest bucket whose units come back no faster than one a minute: τ just under 2^52 µs.
	lim := gcraLimit(1, time.Minute, bound.MaxTolerance.Microseconds()/60_000_000)
	if err := lim.Validate(); err != nil {
		t.Fatal(err)
	}
	over := lim
	over.Burst++
	if err := over.Validate(); err == nil {
		t.Fatalf("%v is valid; want its burst to be the largest", over)
	}
	tolerance := lim.Burst * 60_000_000
	r := GCRA(0, now, lim, lim.Burst)
	if !r.Allowed || r.Remaining != 0 || r.TAT != now+tolerance || r.TAT > MaxTAT {
		t.Fatalf("the whole burst of %v: %+v; want allowed, TAT now + %d µs, at most 2^53-1", lim, r, tolerance)
	}
	if err := CheckGCRA(GCRAState{r.TAT, GCRAExpiry(tolerance)}, now, lim); err != nil {
		t.Fatalf("the state it writes is refused: %v", err)
	}
	if r := GCRA(r.TAT, now+1, lim, 1); r.Allowed || r.Remaining != 0 || r.RetryAfter != time.Minute {
		t.Fatalf("one more unit a microsecond later: %+v; want rejected, retry after 1m", r)
	}
	// A burst of MaxRate at a microsecond's interval.
	lim = gcraLimit(250_000, time.Second, bound.MaxRate) // T = 4 µs, τ = 4·10^15 µs
	if err := lim.Validate(); err != nil {
		t.Fatal(err)
	}
	r = GCRA(0, now, lim, bound.MaxRate-1)
	if !r.Allowed || r.Remaining != 1 || r.TAT != now+4*(bound.MaxRate-1) {
		t.Fatalf("MaxRate−1 units of %v: %+v", lim, r)
	}
	if r := GCRA(r.TAT, now+7, lim, 3); r.Allowed || r.Remaining != 2 || r.RetryAfter != time.Millisecond {
		t.Fatalf("3 units 7 µs later: %+v; want rejected with 2 remaining (1 + 7/4)", r)
	}
}

func TestCheckGCRA(t *testing.T) {
	lim := gcraLimit(3, 30*time.Second, 0) // τ = 30 s
	const tolerance = 30_000_000
	for _, tc := range []struct {
		st   GCRAState
		want error
	}{
		{GCRAState{now + tolerance, GCRAExpiry(tolerance)}, nil},
		{GCRAState{now + 1, time.Millisecond}, nil},
		{GCRAState{now, 0}, nil},             // emptied, in its expiry millisecond
		{GCRAState{now - 5_000_000, 0}, nil}, // emptied long ago (a test clock ahead of Redis's)
		{GCRAState{1, time.Second}, nil},
		{GCRAState{0, time.Second}, ErrTATOutOfRange},
		{GCRAState{-1, time.Second}, ErrTATOutOfRange},
		{GCRAState{MaxTAT + 1, time.Second}, ErrTATOutOfRange},
		{GCRAState{now + 1, -1}, ErrTATNoExpiry},
		{GCRAState{now + 1, GCRAExpiry(tolerance) + time.Millisecond}, ErrTATExpiryTooLong},
		{GCRAState{now + tolerance + 1, time.Second}, ErrTATTooFar},
	} {
		if got := CheckGCRA(tc.st, now, lim); got != tc.want {
			t.Errorf("CheckGCRA(TAT now%+d µs, TTL %v) = %v, want %v", tc.st.TAT-now, tc.st.TTL, got, tc.want)
		}
	}
}

// Clamp, for a Request with an override key, reads every state CheckGCRA accepts as it is, and a
// TAT too far ahead or expiring too late as an empty bucket at now + τ; the states no numbers write
// stay corrupt. A decision on the clamped TAT rejects any cost, and a peek reports the bucket empty.
func TestGCRAClamp(t *testing.T) {
	lim := gcraLimit(3, 30*time.Second, 0) // τ = 30 s
	p := NewGCRAParams(lim)
	const tolerance = 30_000_000
	for _, tc := range []struct {
		st      GCRAState
		wantTAT int64
		wantErr error
	}{
		{GCRAState{now + tolerance, GCRAExpiry(tolerance)}, now + tolerance, nil},
		{GCRAState{now + 1, time.Millisecond}, now + 1, nil},
		{GCRAState{now - 5_000_000, 0}, now - 5_000_000, nil},
		{GCRAState{now + tolerance + 1, time.Second}, now + tolerance, nil},                  // further ahead than the bucket
		{GCRAState{now + 10*tolerance, 10 * time.Minute}, now + tolerance, nil},              // and expiring later
		{GCRAState{now + 1, GCRAExpiry(tolerance) + time.Millisecond}, now + tolerance, nil}, // expiring later only
		{GCRAState{0, time.Second}, 0, ErrTATOutOfRange},
		{GCRAState{MaxTAT + 1, time.Second}, 0, ErrTATOutOfRange},
		{GCRAState{now + 10*tolerance, -1}, 0, ErrTATNoExpiry},
	} {
		tat, err := p.Clamp(tc.st, now)
		if tat != tc.wantTAT || err != tc.wantErr {
			t.Errorf("Clamp(TAT now%+d µs, TTL %v) = now%+d µs, %v; want now%+d µs, %v", tc.st.TAT-now, tc.st.TTL, tat-now, err, tc.wantTAT-now, tc.wantErr)
		}
		if check := p.Check(tc.st, now); check == nil && (tat != tc.st.TAT || err != nil) {
			t.Errorf("Clamp changed TAT now%+d µs, TTL %v, a state Check accepts", tc.st.TAT-now, tc.st.TTL)
		}
	}
	tat, _ := p.Clamp(GCRAState{now + 5*tolerance, time.Hour}, now)
	if res := p.Decide(tat, now, 1); res.Allowed || res.Write || res.Remaining != 0 {
		t.Errorf("a unit on a clamped bucket: %+v; want a rejection, nothing written", res)
	}
	if res := p.Decide(tat, now, 0); !res.Allowed || res.Remaining != 0 || res.ResetAfter != 30*time.Second {
		t.Errorf("a peek of a clamped bucket: %+v; want an empty bucket, full again in 30 s", res)
	}
}

func TestGCRAExpiry(t *testing.T) {
	for backlog, want := range map[int64]time.Duration{
		1: 2 * time.Millisecond, 999: 2 * time.Millisecond, 1000: 2 * time.Millisecond, 1001: 3 * time.Millisecond,
	} {
		if got := GCRAExpiry(backlog); got != want {
			t.Errorf("GCRAExpiry(%d µs) = %v, want %v", backlog, got, want)
		}
	}
}

// GCRA is a token bucket: on random requests at random times it decides exactly as a bucket of
// capacity × T microseconds of "level", refilled one microsecond per microsecond and drained T per
// unit, written independently here.
func TestGCRAIsATokenBucket(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		lim := gcraLimit(1+r.Int64N(20), time.Duration(1+r.IntN(5000))*time.Millisecond, r.Int64N(30))
		if lim.Validate() != nil {
			continue
		}
		interval := lim.EmissionInterval().Microseconds()
		tolerance := lim.Capacity() * interval
		level, at := tolerance, int64(now) // the bucket starts full
		tat := int64(0)
		clock := int64(now)
		for range 100 {
			clock += r.Int64N(3 * interval)
			n := r.Int64N(lim.Capacity() + 1)
			level = min(tolerance, level+clock-at)
			at = clock
			got := GCRA(tat, clock, lim, n)
			want := GCRAResult{Allowed: level >= n*interval}
			if want.Allowed {
				level -= n * interval
				want.Remaining = level / interval
				want.ResetAfter = ceilMillisecond(tolerance - level)
				if n > 0 {
					want.Write, want.TAT = true, clock+tolerance-level
				}
			} else {
				want.Remaining = level / interval
				want.RetryAfter = ceilMillisecond(n*interval - level)
				want.ResetAfter = ceilMillisecond(tolerance - level)
			}
			if got != want {
				t.Fatalf("%v, n %d at +%d µs: GCRA %+v; the token bucket %+v", lim, n, clock-now, got, want)
			}
			if got.Write {
				tat = got.TAT
			}
		}
	}
}

// A request ID reused with another burst is another request; fingerprints of Limits without a
// burst are what they were before GCRA, so records in flight across an upgrade still replay.
func TestFingerprintOfABurst(t *testing.T) {
	lim := gcraLimit(3, time.Minute, 0)
	rs := []admit.Request{{Key: "{t}a", Limit: lim, Cost: 1}}
	base := Fingerprint(rs)
	rs[0].Limit.Burst = 5
	if Fingerprint(rs) == base {
		t.Error("a request with another burst has the same fingerprint")
	}
	fw := admit.Limit{Name: "p", Algorithm: admit.FixedWindow, Rate: 3, Period: time.Minute}
	if got := Fingerprint([]admit.Request{{Key: "{t}a", Limit: fw, Cost: 1}}); got != "eb588a79f14d2e724239f2002b520646" {
		t.Errorf("a fixed window's fingerprint changed to %s", got)
	}
}

// NewGCRAParams holds the emission interval and the tolerance of the Limit, with an interval of 1 µs
// for a Limit without one, so that a decision never divides by 0.
func TestNewGCRAParams(t *testing.T) {
	for _, tc := range []struct {
		lim  admit.Limit
		want GCRAParams
	}{
		{gcraLimit(3, 30*time.Second, 0), GCRAParams{Interval: 10_000_000, Tolerance: 30_000_000}},
		{gcraLimit(1, time.Second, 5), GCRAParams{Interval: 1_000_000, Tolerance: 5_000_000}},
		{gcraLimit(3, 10*time.Second, 0), GCRAParams{Interval: 3_333_334, Tolerance: 10_000_002}},
		{gcraLimit(0, time.Second, 0), GCRAParams{Interval: 1, Tolerance: 0}},
	} {
		if got := NewGCRAParams(tc.lim); got != tc.want {
			t.Errorf("NewGCRAParams(%v) = %+v; want %+v", tc.lim, got, tc.want)
		}
	}
}
