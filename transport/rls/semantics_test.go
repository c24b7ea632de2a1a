package rls_test

import (
	"math"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/policy/envoyconf"
)

// semanticsConfig has a shadow rule, a named rule another replaces, an unlimited rule with
// replaces, and a rule of 0 requests, for the answers envoyproxy/ratelimit gives them.
const semanticsConfig = `domain: sem
descriptors:
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: free
    rate_limit: {name: free, unit: hour, requests_per_unit: 1}
  - key: gold
    rate_limit: {name: gold, unit: hour, requests_per_unit: 5, replaces: [{name: free}]}
  - key: vip
    rate_limit: {name: vip, unlimited: true, replaces: [{name: free}, {name: admin}]}
  - key: admin
    rate_limit: {name: admin, unlimited: true}
  - key: closed
    rate_limit: {unit: hour, requests_per_unit: 0}
`

// semanticsCfg returns the configuration of semanticsConfig.
func semanticsCfg(t *testing.T) *envoyconf.Config {
	t.Helper()
	cfg, err := envoyconf.Parse(envoyconf.File{Name: "sem.yaml", Data: []byte(semanticsConfig)})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// overridden returns d with a limit override of n per hour.
func overridden(d *ratelimitv3.RateLimitDescriptor, n uint32) *ratelimitv3.RateLimitDescriptor {
	d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: typev3.RateLimitUnit_HOUR}
	return d
}

// TestShadowOverAnswersNothingLeft: a shadow_mode descriptor over its limit is OK with
// limit_remaining 0, as envoyproxy/ratelimit answers it.
func TestShadowOverAnswersNothingLeft(t *testing.T) {
	stores(t, func(t *testing.T, store admit.Store) {
		c, _ := serveConfig(t, store, semanticsCfg(t))
		r := ask(t, c, "sem", 0, desc("shadow", "x"))
		wantCodes(t, "first", r, "OK", "OK")
		if r.Statuses[0].LimitRemaining != 1 {
			t.Errorf("first: remaining %d, want 1", r.Statuses[0].LimitRemaining)
		}
		r = ask(t, c, "sem", 3, desc("shadow", "x")) // 1 + 3 > 2: over, in shadow
		wantCodes(t, "over", r, "OK", "OK")
		if r.Statuses[0].LimitRemaining != 0 || r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 2 {
			t.Errorf("over: status %v, want limit_remaining 0 of 2", r.Statuses[0])
		}
	})
}

// TestUnlimitedReplaces: an unlimited rule's replaces apply, and an unlimited rule another
// replaces is still answered unlimited, as envoyproxy/ratelimit answers them.
func TestUnlimitedReplaces(t *testing.T) {
	stores(t, func(t *testing.T, store admit.Store) {
		c, _ := serveConfig(t, store, semanticsCfg(t))
		for i := range 3 { // free is 1 per hour, replaced by vip: never counted
			r := ask(t, c, "sem", 0, desc("free", "x"), desc("vip", "y"), desc("admin", "z"))
			wantCodes(t, "replaced by unlimited", r, "OK", "OK", "OK", "OK")
			for j, st := range r.Statuses {
				want := uint32(math.MaxUint32)
				if j == 0 {
					want = 0
				}
				if st.CurrentLimit != nil || st.LimitRemaining != want {
					t.Fatalf("request %d, status %d: %v; want no current_limit, limit_remaining %d", i, j, st, want)
				}
			}
		}
		wantCodes(t, "free alone", ask(t, c, "sem", 0, desc("free", "x")), "OK", "OK")
		wantCodes(t, "free alone, over", ask(t, c, "sem", 0, desc("free", "x")), "OVER_LIMIT", "OVER_LIMIT")
	})
}

// TestOverrideIsARuleOfItsOwn: a descriptor's limit override on a configured rule is a rule of its
// own, as in envoyproxy/ratelimit: no name, no shadow_mode, no replaces, and not replaced.
func TestOverrideIsARuleOfItsOwn(t *testing.T) {
	stores(t, func(t *testing.T, store admit.Store) {
		c, _ := serveConfig(t, store, semanticsCfg(t))
		// shadow_mode dropped: the second of 1 per hour is over, and enforced.
		r := ask(t, c, "sem", 0, overridden(desc("shadow", "o"), 1))
		wantCodes(t, "shadow override 1", r, "OK", "OK")
		if l := r.Statuses[0].CurrentLimit; l.GetName() != "" || l.GetRequestsPerUnit() != 1 {
			t.Errorf("shadow override: current_limit %v, want 1 per hour without a name", l)
		}
		wantCodes(t, "shadow override 2", ask(t, c, "sem", 0, overridden(desc("shadow", "o"), 1)), "OVER_LIMIT", "OVER_LIMIT")
		// gold overridden replaces nothing: free is decided (1 per hour), and over the second time.
		for i, want := range []string{"OK", "OVER_LIMIT"} {
			r := ask(t, c, "sem", 0, desc("free", "f"), overridden(desc("gold", "g"), 10))
			wantCodes(t, "gold overridden", r, want, want, "OK")
			if l := r.Statuses[0].CurrentLimit; l.GetName() != "free" {
				t.Errorf("request %d: free's current_limit %v, want free's", i, l)
			}
			if l := r.Statuses[1].CurrentLimit; l.GetName() != "" || l.GetRequestsPerUnit() != 10 {
				t.Errorf("request %d: gold's current_limit %v, want 10 per hour without a name", i, l)
			}
		}
		// The override counts on the rule's counter: 1 of free's, then 1 more of the override's 2.
		wantCodes(t, "free q", ask(t, c, "sem", 0, desc("free", "q")), "OK", "OK")
		r = ask(t, c, "sem", 0, overridden(desc("free", "q"), 2))
		wantCodes(t, "free q overridden", r, "OK", "OK")
		if r.Statuses[0].LimitRemaining != 0 {
			t.Errorf("free q overridden: %d left of 2, want 0: the override shares the rule's counter", r.Statuses[0].LimitRemaining)
		}
		// free overridden is replaced no more: gold replaces the name free, which the override has not.
		r = ask(t, c, "sem", 0, overridden(desc("free", "f2"), 7), desc("gold", "g2"))
		if l := r.Statuses[0].CurrentLimit; l.GetRequestsPerUnit() != 7 || l.GetName() != "" {
			t.Errorf("free overridden beside gold: current_limit %v, want 7 per hour without a name", l)
		}
	})
}

// TestZeroLimitCheck: under a requests_per_unit of 0 a hit is over, but a check of no hits
// (hits_addend 0) is OK, as envoyproxy/ratelimit answers it: 0 hits are not more than 0.
func TestZeroLimitCheck(t *testing.T) {
	stores(t, func(t *testing.T, store admit.Store) {
		c, _ := serveConfig(t, store, semanticsCfg(t))
		wantCodes(t, "a hit", ask(t, c, "sem", 0, desc("closed", "x")), "OVER_LIMIT", "OVER_LIMIT")
		r := ask(t, c, "sem", 0, hits(desc("closed", "x"), 0))
		wantCodes(t, "a check", r, "OK", "OK")
		if st := r.Statuses[0]; st.LimitRemaining != 0 || st.CurrentLimit.GetRequestsPerUnit() != 0 || st.DurationUntilReset == nil {
			t.Errorf("a check: status %v, want limit_remaining 0 of 0 and the time until the hour ends", st)
		}
		wantCodes(t, "a check beside a hit", ask(t, c, "sem", 0, hits(desc("closed", "x"), 0), desc("closed", "y")), "OVER_LIMIT", "OK", "OVER_LIMIT")
	})
}
