package admit_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/slot"
	"github.com/admit-dev/admit/internal/validate"
)

func TestValidate(t *testing.T) {
	fw := func(rate int64, period time.Duration) admit.Limit {
		return admit.Limit{Algorithm: admit.FixedWindow, Rate: rate, Period: period}
	}
	for _, tc := range []struct {
		lim  admit.Limit
		want string // "" for valid, else a substring of the error
	}{
		{fw(1, time.Millisecond), ""},
		{fw(bound.MaxRate, bound.MaxPeriod), ""},
		{fw(3, 10*time.Second), ""},
		{admit.Limit{Algorithm: admit.FixedWindow, Rate: 1, Period: time.Millisecond, Aligned: true}, ""},
		{admit.Limit{Algorithm: admit.FixedWindow, Rate: bound.MaxRate, Period: bound.MaxPeriod, Aligned: true}, ""},
		{admit.Limit{Algorithm: admit.FixedWindow, Rate: 1, Period: 1500 * time.Microsecond, Aligned: true}, "whole number of milliseconds"},
		{fw(0, time.Second), "rate 0"},
		{fw(-1, time.Second), "rate -1"},
		{fw(bound.MaxRate+1, time.Second), "rate 1000000000000001"},
		{fw(1, 0), "period 0s"},
		{fw(1, time.Millisecond-1), "period 999.999µs"},
		{fw(1, bound.MaxPeriod+time.Millisecond), "period 8784h0m0.001s"},
		{fw(1, 1500*time.Microsecond), "whole number of milliseconds"},
		{admit.Limit{Rate: 1, Period: time.Second}, "unknown algorithm"},
		{admit.Limit{Algorithm: admit.SlidingWindow, Rate: bound.MaxRate, Period: bound.MaxPeriod}, ""},
		{admit.Limit{Algorithm: admit.SlidingWindow, Rate: 1, Period: time.Millisecond}, ""},
		{admit.Limit{Algorithm: admit.SlidingWindow, Rate: 0, Period: time.Second}, "rate 0"},
		{admit.Limit{Algorithm: admit.SlidingWindow, Rate: 1, Period: 1500 * time.Microsecond}, "whole number of milliseconds"},
		{admit.Limit{Algorithm: admit.SlidingWindow, Rate: 3, Period: time.Second, Burst: 3}, "only gcra has a burst"},
		{admit.Limit{Algorithm: admit.SlidingWindow, Rate: 3, Period: time.Second, Aligned: true}, "only fixed_window"},
		{admit.Limit{Algorithm: admit.SlidingLog, Rate: bound.MaxSlidingLogRate, Period: bound.MaxPeriod}, ""},
		{admit.Limit{Algorithm: admit.SlidingLog, Rate: 1, Period: time.Millisecond}, ""},
		{admit.Limit{Algorithm: admit.SlidingLog, Rate: bound.MaxSlidingLogRate + 1, Period: time.Second}, "rate 10001: a sliding_log keeps every admission, so its rate is at most 10000"},
		{admit.Limit{Algorithm: admit.SlidingLog, Rate: bound.MaxRate, Period: time.Second}, "at most 10000"},
		{admit.Limit{Algorithm: admit.SlidingLog, Rate: 0, Period: time.Second}, "rate 0"},
		{admit.Limit{Algorithm: admit.SlidingLog, Rate: 3, Period: time.Second, Aligned: true}, "only fixed_window"},
		{admit.Limit{Algorithm: 99, Rate: 1, Period: time.Second}, "unknown algorithm Algorithm(99)"},
		{admit.Limit{Algorithm: admit.FixedWindow, Rate: 1, Period: time.Second, Replicas: 1}, ""},
		{admit.Limit{Algorithm: admit.GCRA, Rate: 1, Period: time.Second, Replicas: bound.MaxReplicas, ReplicaTimeout: bound.MaxReplicaTimeout}, ""},
		{admit.Limit{Algorithm: admit.FixedWindow, Rate: 1, Period: time.Second, Replicas: -1}, "replicas -1 outside 0-16"},
		{admit.Limit{Algorithm: admit.FixedWindow, Rate: 1, Period: time.Second, Replicas: bound.MaxReplicas + 1}, "replicas 17"},
		{admit.Limit{Algorithm: admit.FixedWindow, Rate: 1, Period: time.Second, ReplicaTimeout: time.Second}, "without replicas"},
		{admit.Limit{Algorithm: admit.FixedWindow, Rate: 1, Period: time.Second, Replicas: 1, ReplicaTimeout: -time.Millisecond}, "replica timeout -1ms"},
		{admit.Limit{Algorithm: admit.FixedWindow, Rate: 1, Period: time.Second, Replicas: 1, ReplicaTimeout: 1500 * time.Microsecond}, "whole number of milliseconds"},
		{admit.Limit{Algorithm: admit.FixedWindow, Rate: 1, Period: time.Second, Replicas: 1, ReplicaTimeout: time.Minute + time.Millisecond}, "up to 1m0s"},
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

func TestMaxWait(t *testing.T) {
	for _, tc := range []struct {
		alg  admit.Algorithm
		want time.Duration
	}{
		{admit.FixedWindow, 10 * time.Second},
		{admit.SlidingWindow, 20 * time.Second}, // the rest of the window, then the next
		{admit.SlidingLog, 10 * time.Second},
	} {
		lim := admit.Limit{Algorithm: tc.alg, Rate: 3, Period: 10 * time.Second}
		if got := lim.MaxWait(); got != tc.want {
			t.Errorf("MaxWait of %v = %v, want %v", lim, got, tc.want)
		}
	}
}

func TestLimitString(t *testing.T) {
	demo := admit.Limit{Name: "demo", Algorithm: admit.FixedWindow, Rate: 3, Period: 10 * time.Second}
	aligned := demo
	aligned.Aligned = true
	for lim, want := range map[admit.Limit]string{
		demo:    "demo: 3 per 10s (fixed_window)",
		aligned: "demo: 3 per 10s (fixed_window, aligned)",
	} {
		if got := lim.String(); got != want {
			t.Errorf("%#v.String() = %q; want %q", lim, got, want)
		}
	}
}

func TestRequestValidate(t *testing.T) {
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Second}
	long := strings.Repeat("k", bound.MaxKeyLen)
	for _, tc := range []struct {
		r    admit.Request
		want error
	}{
		{admit.Request{Key: "k", Limit: lim}, nil},
		{admit.Request{Key: "k", Limit: lim, Cost: 3}, nil},
		{admit.Request{Key: long, Limit: lim, Cost: 1}, nil},
		{admit.Request{Key: "\xff{}\r\n", Limit: lim, Cost: 1}, nil},
		{admit.Request{Key: "k", Limit: lim, Cost: 1, ID: strings.Repeat("i", bound.MaxIDLen)}, nil},
		{admit.Request{Key: "a{t}b}", Limit: lim, Cost: 1, ID: "x"}, nil}, // a hash tag
		{admit.Request{Key: "a{b", Limit: lim, Cost: 1, ID: "x"}, nil},    // no '}': tagged whole
		{admit.Request{Key: "", Limit: lim, Cost: 1}, admit.ErrInvalidRequest},
		{admit.Request{Key: long + "k", Limit: lim, Cost: 1}, admit.ErrInvalidRequest},
		{admit.Request{Key: "k", Limit: lim, Cost: -1}, admit.ErrInvalidRequest},
		{admit.Request{Key: "k", Limit: lim, Cost: 4}, admit.ErrInvalidRequest},
		{admit.Request{Key: "k", Limit: lim, Cost: 1, ID: strings.Repeat("i", bound.MaxIDLen+1)}, admit.ErrInvalidRequest},
		{admit.Request{Key: "a}b", Limit: lim, Cost: 1, ID: "x"}, admit.ErrInvalidRequest}, // neither
		{admit.Request{Key: "k", Cost: 1}, admit.ErrInvalidLimit},
	} {
		err := tc.r.Validate()
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("Validate(%.12q, cost %d, ID %.8q) = %v, want %v", tc.r.Key, tc.r.Cost, tc.r.ID, err, tc.want)
		}
		// Under a valid Limit, validate.Request (memstore's fast path) says what Validate says; it
		// checks no Limit.
		known := checkFields(&tc.r)
		if tc.r.Limit.Validate() == nil && fmt.Sprint(known) != fmt.Sprint(err) {
			t.Errorf("validate.Request(%.12q, cost %d, ID %.8q) = %v; Validate says %v", tc.r.Key, tc.r.Cost, tc.r.ID, known, err)
		}
	}
	unchecked := admit.Request{Key: "k", Cost: 0} // the zero Limit is invalid
	if err := checkFields(&unchecked); err != nil {
		t.Errorf("validate.Request of a peek under the zero Limit = %v; it checks no Limit", err)
	}
}

// checkFields checks r's own fields as memstore's fast path does, under a Limit it knows is valid.
func checkFields(r *admit.Request) error {
	return validate.Request(r.Key, r.Cost, r.ID, r.Limit.Algorithm == admit.Concurrency, r.Limit.Capacity())
}

func TestValidateAll(t *testing.T) {
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Second}
	r := func(key, id string) admit.Request { return admit.Request{Key: key, Limit: lim, Cost: 1, ID: id} }
	var many []admit.Request
	for i := range bound.MaxRequests + 1 {
		many = append(many, r("{t}"+strconv.Itoa(i), ""))
	}
	for _, tc := range []struct {
		name string
		rs   []admit.Request
		want string // "" for valid, else a substring of the error
	}{
		{"one", many[:1], ""},
		{"max", many[:bound.MaxRequests], ""},
		{"none", nil, "0 requests"},
		{"too_many", many, "17 requests"},
		{"two_slots", []admit.Request{r("{a}x", ""), r("{b}x", "")}, "hash slot"},
		{"same_key", []admit.Request{r("{a}x", ""), r("{a}x", "")}, "same key"},
		{"two_ids", []admit.Request{r("{a}x", "1"), r("{a}y", "2")}, "ID differs"},
		{"one_invalid", []admit.Request{r("{a}x", ""), {Key: "{a}y", Limit: lim, Cost: 9}}, "request 1: admit: invalid request: cost 9"},
		{"decisions_short", many[:2], "1 Decisions for 2 Requests"},
	} {
		ds := make([]admit.Decision, len(tc.rs))
		if tc.name == "decisions_short" {
			ds = ds[:1]
		}
		err := admit.ValidateAll(tc.rs, ds)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: ValidateAll = %v, want nil", tc.name, err)
		case tc.want != "" && (!errors.Is(err, admit.ErrInvalidRequest) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: ValidateAll = %v, want ErrInvalidRequest mentioning %q", tc.name, err, tc.want)
		}
	}
}

func TestDeciding(t *testing.T) {
	ok := func(rem int64) admit.Decision { return admit.Decision{Allowed: true, Remaining: rem} }
	no := func(retry time.Duration) admit.Decision { return admit.Decision{RetryAfter: retry} }
	shadow := func(d admit.Decision) admit.Decision { d.Limit.Shadow = true; return d }
	for _, tc := range []struct {
		ds   []admit.Decision
		want int
	}{
		{nil, -1},
		{[]admit.Decision{ok(3)}, 0},
		{[]admit.Decision{ok(3), ok(1), ok(2)}, 1},
		{[]admit.Decision{ok(1), ok(1)}, 0},
		{[]admit.Decision{ok(0), no(time.Second), no(time.Minute), no(time.Second)}, 2},
		{[]admit.Decision{no(time.Second), ok(0)}, 0},
		// A shadow Decision decides only among shadow ones.
		{[]admit.Decision{ok(5), shadow(no(time.Minute)), shadow(ok(0))}, 0},
		{[]admit.Decision{shadow(no(time.Minute)), ok(5), no(time.Second)}, 2},
		{[]admit.Decision{shadow(ok(3)), shadow(no(time.Second)), shadow(no(time.Minute))}, 2},
		{[]admit.Decision{shadow(ok(3)), shadow(ok(1))}, 1},
	} {
		if got := admit.Deciding(tc.ds); got != tc.want {
			t.Errorf("Deciding(%+v) = %d, want %d", tc.ds, got, tc.want)
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
	for _, want := range []admit.Algorithm{admit.FixedWindow, admit.SlidingWindow, admit.SlidingLog} {
		a, err := admit.ParseAlgorithm(want.String())
		if err != nil || a != want {
			t.Fatalf("ParseAlgorithm(%s) = %v, %v", want, a, err)
		}
	}
	if admit.SlidingWindow.String() != "sliding_window" || admit.SlidingLog.String() != "sliding_log" {
		t.Fatalf("names %q and %q; want sliding_window and sliding_log", admit.SlidingWindow, admit.SlidingLog)
	}
	if _, err := admit.ParseAlgorithm("leaky"); !errors.Is(err, admit.ErrInvalidLimit) {
		t.Fatalf("ParseAlgorithm(leaky) = %v, want ErrInvalidLimit", err)
	}
}

// countingStore records calls, to show what a Limiter sends to its Store.
type countingStore struct {
	takes, takeAlls int
	last            []admit.Request
}

func (s *countingStore) Take(ctx context.Context, r admit.Request) (admit.Decision, error) {
	s.takes++
	s.last = []admit.Request{r}
	return admit.Decision{Allowed: true, Limit: r.Limit, Remaining: r.Limit.Rate - r.Cost}, nil
}

func (s *countingStore) TakeAll(ctx context.Context, rs []admit.Request, ds []admit.Decision) (bool, error) {
	s.takeAlls++
	s.last = append([]admit.Request(nil), rs...)
	for i, r := range rs {
		ds[i] = admit.Decision{Allowed: true, Limit: r.Limit, Remaining: r.Limit.Rate - r.Cost}
	}
	return true, nil
}

func (s *countingStore) Release(context.Context, admit.Lease) error { return errors.ErrUnsupported }

func (s *countingStore) Settle(context.Context, admit.Reservation, int64) (admit.Decision, error) {
	return admit.Decision{}, errors.ErrUnsupported
}

func (s *countingStore) Reset(context.Context, []string) error { return errors.ErrUnsupported }

func TestLimiterValidatesBeforeTheStore(t *testing.T) {
	s := &countingStore{}
	keys := newKeyBuilder(t)
	fw := func(name string, rate int64) admit.Limit {
		return admit.Limit{Name: name, Algorithm: admit.FixedWindow, Rate: rate, Period: time.Second}
	}
	for name, l := range map[string]*admit.Limiter{
		"rate 0":        admit.NewLimiter(s, keys, fw("a", 0)),
		"no limits":     admit.NewLimiter(s, keys),
		"unnamed":       admit.NewLimiter(s, keys, fw("", 3)),
		"repeated name": admit.NewLimiter(s, keys, fw("a", 3), fw("a", 5)),
		"no keys":       admit.NewLimiter(s, nil, fw("a", 3)),
	} {
		if _, err := l.Allow(context.Background(), admit.Subject{ID: "alice"}); !errors.Is(err, admit.ErrInvalidLimit) {
			t.Errorf("%s: Allow = %v, want ErrInvalidLimit", name, err)
		}
		if err := l.Validate(); !errors.Is(err, admit.ErrInvalidLimit) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidLimit", name, err)
		}
	}
	var zero admit.Limiter
	if err := zero.Validate(); !errors.Is(err, admit.ErrInvalidLimit) {
		t.Errorf("a zero Limiter: Validate() = %v, want ErrInvalidLimit", err)
	}
	if err := (*admit.Limiter)(nil).Validate(); !errors.Is(err, admit.ErrInvalidLimit) {
		t.Errorf("a nil Limiter: Validate() = %v, want ErrInvalidLimit", err)
	}
	good := admit.NewLimiter(s, keys, fw("a", 3))
	if err := good.Validate(); err != nil {
		t.Fatalf("a valid Limiter: Validate() = %v", err)
	}
	if _, err := good.AllowN(context.Background(), admit.Subject{ID: "alice"}, 4); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Fatalf("AllowN(4) with rate 3: %v", err)
	}
	if _, err := good.Allow(context.Background(), admit.Subject{ID: ""}); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Fatalf("Allow of an empty subject: %v", err)
	}
	if s.takes+s.takeAlls != 0 {
		t.Fatalf("the store was called %d times for invalid requests", s.takes+s.takeAlls)
	}
	d, err := good.Allow(context.Background(), admit.Subject{ID: "alice"})
	if err != nil || s.takes != 1 || d.Remaining != 2 || good.Limits()[0].Rate != 3 {
		t.Fatalf("Allow = %+v, %v after %d calls", d, err, s.takes)
	}
}

func TestLimiterOfSeveralLimits(t *testing.T) {
	s := &countingStore{}
	keys := newKeyBuilder(t)
	perSecond := admit.Limit{Name: "per-second", Algorithm: admit.FixedWindow, Rate: 10, Period: time.Second}
	perDay := admit.Limit{Name: "per-day", Algorithm: admit.FixedWindow, Rate: 1000, Period: 24 * time.Hour}
	l := admit.NewLimiter(s, keys, perSecond, perDay)
	ds := make([]admit.Decision, 2)
	d, err := l.Take(context.Background(), admit.Subject{ID: "alice"}, 2, "req-1", ds)
	if err != nil || s.takeAlls != 1 || s.takes != 0 {
		t.Fatalf("Take = %v; %d TakeAll and %d Take calls, want one TakeAll", err, s.takeAlls, s.takes)
	}
	if d.Limit != perSecond || ds[0].Remaining != 8 || ds[1].Remaining != 998 {
		t.Fatalf("Take = %+v, %+v; want per-second deciding (8 left), per-day 998 left", d, ds)
	}
	rs := s.last
	if len(rs) != 2 || rs[0].ID != "req-1" || rs[1].ID != "req-1" || rs[0].Cost != 2 || slot.Of(rs[0].Key) != slot.Of(rs[1].Key) || rs[0].Key == rs[1].Key {
		t.Fatalf("requests sent: %+v; want two of cost 2, ID req-1, distinct keys in one slot", rs)
	}
	if _, err := l.Take(context.Background(), admit.Subject{ID: "alice"}, 1, "", make([]admit.Decision, 1)); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Fatalf("Take with 1 Decision for 2 limits: %v", err)
	}
}

// TestLimiterRefusesAsRequestValidate checks that a Limiter, which checks only the fields of each
// Request it makes (its Limits passed NewLimiter's check), refuses every Request that
// Request.Validate refuses, with Validate's error and without calling its Store, through Take,
// Admit and Reserve, with one Limit of each kind and with several: costs out of range, request IDs
// too long, leases (a lease costs 0 or 1, whatever the other Limits take).
func TestLimiterRefusesAsRequestValidate(t *testing.T) {
	ctx := context.Background()
	keys := newKeyBuilder(t)
	fixed := admit.Limit{Name: "fixed", Algorithm: admit.FixedWindow, Rate: 5, Period: time.Second}
	gcra := admit.Limit{Name: "gcra", Algorithm: admit.GCRA, Rate: 10, Period: time.Second, Burst: 3}
	lease := admit.Limit{Name: "lease", Algorithm: admit.Concurrency, Rate: 2, Period: time.Minute}
	subject := admit.Subject{ID: "alice"}
	refused, decided := 0, 0
	for _, limits := range [][]admit.Limit{{fixed}, {gcra}, {lease}, {fixed, gcra, lease}} {
		// validate returns what Request.Validate says of the Requests of n units with ID id.
		validate := func(n int64, id string) error {
			for _, lim := range limits {
				key, err := keys.Key(lim, bound.DefaultVersion, subject)
				if err != nil {
					t.Fatal(err)
				}
				r := admit.Request{Key: key, Limit: lim, Cost: n, ID: id}
				if err := r.Validate(); err != nil {
					return err
				}
			}
			return nil
		}
		for _, n := range []int64{-1, 0, 1, 3, 4, 5, 6, 1 << 40} {
			for _, id := range []string{"", "req-1", strings.Repeat("i", bound.MaxIDLen+1)} {
				want := validate(n, id)
				s := &countingStore{}
				l := admit.NewLimiter(s, keys, limits...)
				_, takeErr := l.Take(ctx, subject, n, id, nil)
				_, _, admitErr := l.Admit(ctx, subject, n, id, nil)
				for call, err := range map[string]error{"Take": takeErr, "Admit": admitErr} {
					if fmt.Sprint(err) != fmt.Sprint(want) {
						t.Errorf("%v: %s of %d units, ID %.8q: %v; Request.Validate says %v", limits, call, n, id, err, want)
					}
				}
				if id == "" {
					_, _, err := l.Reserve(ctx, subject, n)
					if fmt.Sprint(err) != fmt.Sprint(want) {
						t.Errorf("%v: Reserve of %d units: %v; Request.Validate says %v", limits, n, err, want)
					}
				}
				calls := s.takes + s.takeAlls
				switch {
				case want != nil && calls != 0:
					t.Errorf("%v: %d units, ID %.8q: the Store was called %d times for an invalid request", limits, n, id, calls)
				case want != nil:
					refused++
				default:
					decided++
				}
			}
		}
	}
	if refused < 20 || decided < 20 {
		t.Fatalf("%d cases refused and %d decided: the test misses its cases", refused, decided)
	}
}

func (*countingStore) SetOverride(context.Context, admit.Override) error {
	return errors.ErrUnsupported
}
func (*countingStore) Override(context.Context, string) (admit.Override, bool, error) {
	return admit.Override{}, false, errors.ErrUnsupported
}
func (*countingStore) DeleteOverride(context.Context, string) (bool, error) {
	return false, errors.ErrUnsupported
}
func (*countingStore) Overrides(context.Context, string, string, int) ([]admit.Override, string, error) {
	return nil, "", errors.ErrUnsupported
}
func (*countingStore) OverrideCount(context.Context, string) (int64, error) {
	return 0, errors.ErrUnsupported
}
