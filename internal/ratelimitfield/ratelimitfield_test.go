package ratelimitfield_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/admit-dev/admit"
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
