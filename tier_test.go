package admit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/validate"
	"github.com/admit-dev/admit/memstore"
)

// tierLimits are a policy "api" with tiers pro and hourly, and a policy "day" without tiers.
var (
	apiLimit    = admit.Limit{Name: "api", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Minute}
	apiPro      = admit.Limit{Name: "api", Tier: "pro", Algorithm: admit.FixedWindow, Rate: 5, Period: time.Minute}
	apiHourly   = admit.Limit{Name: "api", Tier: "hourly", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Hour}
	dayLimit    = admit.Limit{Name: "day", Algorithm: admit.FixedWindow, Rate: 100, Period: 24 * time.Hour}
	testSecret  = []byte("0123456789abcdef0123456789abcdef")
	ctxTierTest = context.Background()
)

// newTierLimiter returns a Limiter of limits on a fresh memstore.
func newTierLimiter(t *testing.T, limits ...admit.Limit) *admit.Limiter {
	t.Helper()
	store := memstore.New(memstore.Options{})
	t.Cleanup(func() { store.Close() })
	keys, err := admit.NewKeyBuilder(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	l := admit.NewLimiter(store, keys, limits...)
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLimiterTiers: a subject of a tier is decided under its policy's Limit of that tier, Decision.Limit
// telling which; one of no tier under the policy's own; a policy without tiers ignores the tier; a
// tier the policy does not have is an invalid request, before any I/O; Limits lists the own Limits.
func TestLimiterTiers(t *testing.T) {
	l := newTierLimiter(t, apiLimit, apiPro, apiHourly, dayLimit)
	if got := l.Limits(); len(got) != 2 || got[0] != apiLimit || got[1] != dayLimit {
		t.Errorf("Limits() = %v; want the policies' own Limits, api and day", got)
	}
	ds := make([]admit.Decision, 2)
	for _, tc := range []struct {
		tier     string
		api, day admit.Limit
	}{
		{"", apiLimit, dayLimit},
		{"pro", apiPro, dayLimit},
		{"hourly", apiHourly, dayLimit},
	} {
		if _, err := l.Take(ctxTierTest, admit.Subject{ID: "alice-" + tc.tier, Tier: tc.tier}, 1, "", ds); err != nil {
			t.Fatalf("tier %q: %v", tc.tier, err)
		}
		if ds[0].Limit != tc.api || ds[1].Limit != tc.day {
			t.Errorf("tier %q decided under %v and %v; want %v and %v", tc.tier, ds[0].Limit, ds[1].Limit, tc.api, tc.day)
		}
	}
	// One Limit with tiers: the straight path of Take.
	one := newTierLimiter(t, apiPro, apiLimit)
	if d, err := one.Allow(ctxTierTest, admit.Subject{ID: "bob", Tier: "pro"}); err != nil || d.Limit != apiPro || d.Remaining != 4 {
		t.Errorf(`Allow(tier "pro") = %+v, %v; want the pro Limit, remaining 4`, d, err)
	}
	noTiers := newTierLimiter(t, dayLimit)
	if d, err := noTiers.Allow(ctxTierTest, admit.Subject{ID: "bob", Tier: "pro"}); err != nil || d.Limit != dayLimit {
		t.Errorf(`a Limiter without tiers: Allow(tier "pro") = %+v, %v; want its own Limit`, d, err)
	}
	for _, lim := range []*admit.Limiter{l, one} {
		_, err := lim.Allow(ctxTierTest, admit.Subject{ID: "carol", Tier: "gold"})
		if !errors.Is(err, admit.ErrInvalidRequest) || validate.ClientMessage(err) != `invalid request: unknown tier "gold" for policy "api"` {
			t.Errorf(`Allow(tier "gold") = %v (client message %q); want the invalid request unknown tier "gold" for policy "api"`, err, validate.ClientMessage(err))
		}
		if _, release, err := lim.Admit(ctxTierTest, admit.Subject{ID: "carol", Tier: "gold"}, 1, "", nil); !errors.Is(err, admit.ErrInvalidRequest) {
			t.Errorf(`Admit(tier "gold") = %v; want an invalid request`, err)
		} else {
			release()
		}
	}
}

// TestLimiterTierSharesTheShape: the tier is not in the key, so a subject that moves to a tier of
// the same shape keeps its counter, and one that moves to another window starts afresh.
func TestLimiterTierSharesTheShape(t *testing.T) {
	l := newTierLimiter(t, apiLimit, apiPro, apiHourly)
	alice := admit.Subject{ID: "alice"}
	for range 2 {
		if d, err := l.Allow(ctxTierTest, alice); err != nil || !d.Allowed {
			t.Fatalf("Allow = %+v, %v; want allowed", d, err)
		}
	}
	if d, err := l.Allow(ctxTierTest, alice); err != nil || d.Allowed {
		t.Fatalf("third Allow = %+v, %v; want rejected, the limit is 2", d, err)
	}
	alice.Tier = "pro"
	if d, err := l.Allow(ctxTierTest, alice); err != nil || !d.Allowed || d.Remaining != 2 {
		t.Errorf("pro Allow = %+v, %v; want allowed, remaining 2: the counter of 2 kept, under a limit of 5", d, err)
	}
	alice.Tier = "hourly"
	if d, err := l.Allow(ctxTierTest, alice); err != nil || !d.Allowed || d.Remaining != 1 {
		t.Errorf("hourly Allow = %+v, %v; want allowed, remaining 1: another window, a fresh counter", d, err)
	}
}

// TestLimiterRefusesBadTiers: Validate refuses a tier variant without its policy's own Limit, two
// Limits of one Name and Tier, a variant of another Algorithm, and an invalid tier name.
func TestLimiterRefusesBadTiers(t *testing.T) {
	keys, err := admit.NewKeyBuilder(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New(memstore.Options{})
	defer store.Close()
	gcraPro := apiPro
	gcraPro.Algorithm = admit.GCRA
	badName := apiPro
	badName.Tier = "Pro"
	for _, tc := range []struct {
		limits []admit.Limit
		want   string
	}{
		{[]admit.Limit{dayLimit, apiPro}, `tier "pro" of "api": no limit named "api" of no tier`},
		{[]admit.Limit{apiLimit, apiPro, apiPro}, `two limits named "api" of tier "pro"`},
		{[]admit.Limit{apiLimit, gcraPro}, `tier "pro" of "api" is gcra, the limit fixed_window: a tier keeps its policy's algorithm`},
		{[]admit.Limit{apiLimit, badName}, `tier name "Pro": want 1-64 characters`},
	} {
		err := admit.NewLimiter(store, keys, tc.limits...).Validate()
		if !errors.Is(err, admit.ErrInvalidLimit) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewLimiter(%v).Validate() = %v; want an invalid limit: %s", tc.limits, err, tc.want)
		}
	}
}

// TestLimitTier: Limit.Validate checks Tier with the rule of names, and String names the tier.
func TestLimitTier(t *testing.T) {
	long := apiPro
	long.Tier = strings.Repeat("a", 65)
	if err := long.Validate(); !errors.Is(err, admit.ErrInvalidLimit) {
		t.Errorf("Validate(a tier of 65 characters) = %v; want an invalid limit", err)
	}
	if err := apiPro.Validate(); err != nil {
		t.Errorf("Validate(%v) = %v", apiPro, err)
	}
	if got, want := apiPro.String(), "api tier pro: 5 per 1m0s (fixed_window)"; got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
}
