package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/admit-dev/admit/transport/httpapi"
)

// tierConfig has a policy api with a pro tier, and a policy day without tiers.
const tierConfig = `
policies:
  - name: api
    algorithm: fixed_window
    limit: 2
    window: 1h
    tiers:
      pro: {limit: 5}
  - name: day
    algorithm: fixed_window
    limit: 100
    window: 24h
`

// TestCheckTier: /v1/check's "tier" decides each policy with tiers under the tier's numbers, and a
// policy without tiers under its own; no tier is the policies' own numbers; an unknown tier, or
// one that is not a tier name, is a 400 that says so, and consumes nothing.
func TestCheckTier(t *testing.T) {
	h := newHandlerOf(t, newMemstore(t), tierConfig, httpapi.Options{})
	check := func(body string) httpapi.CheckResponse {
		t.Helper()
		rec := post(h, body)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %s; want 200", body, rec.Code, rec.Body)
		}
		return decode[httpapi.CheckResponse](t, rec)
	}
	res := check(`{"policies": ["api", "day"], "key": "alice", "tier": "pro"}`)
	if d := res.Decisions; d[0].Limit != 5 || d[0].Remaining != 4 || d[1].Limit != 100 || d[1].Remaining != 99 {
		t.Errorf("tier pro: %+v; want api at the pro limit 5 (4 left), day at its own 100 (99 left)", d)
	}
	if res := check(`{"policy": "api", "key": "bob"}`); res.Limit != 2 || res.Remaining != 1 {
		t.Errorf("no tier: limit %d, %d left; want the policy's own 2, 1 left", res.Limit, res.Remaining)
	}
	if res := check(`{"policy": "day", "key": "bob", "tier": "gold"}`); res.Limit != 100 {
		t.Errorf("a policy without tiers, tier gold: limit %d; want its own 100", res.Limit)
	}
	for body, want := range map[string]string{
		`{"policies": ["day", "api"], "key": "carol", "tier": "gold"}`: `invalid request: unknown tier "gold" for policy "api"`,
		`{"policy": "day", "key": "carol", "tier": "Pro"}`:             `invalid request: tier name "Pro": want 1-64 characters of a-z, 0-9, '_' and '-'`,
		`{"policy": "api", "key": "carol", "tier": 5}`:                 `body is not a check request`,
	} {
		if msg, ok := badRequest(t, post(h, body)); !ok || !strings.HasPrefix(msg, want) {
			t.Errorf("%s: %s; want 400 %q", body, msg, want)
		}
	}
	if res := check(`{"policies": ["api", "day"], "key": "carol", "cost": 0}`); res.Decisions[0].Remaining != 2 || res.Decisions[1].Remaining != 100 {
		t.Errorf("after the refused checks: %+v; want nothing consumed", res.Decisions)
	}
}

// TestForwardAuthTier: forward-auth reads the tier as it reads the subject: tier= in the query,
// or X-Admit-Tier beside X-Admit-Policy; given twice, or in the other source too, it is a 400.
func TestForwardAuthTier(t *testing.T) {
	h := newHandlerOf(t, newMemstore(t), tierConfig, httpapi.Options{})
	send := func(target string, header http.Header) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		r.Header = header
		if r.Header == nil {
			r.Header = http.Header{}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	for _, c := range []struct {
		name, target string
		header       http.Header
	}{
		{"tier= in the query", "/v1/check?policy=api&key=alice&tier=pro", nil},
		{httpapi.TierField, "/v1/check/app", http.Header{httpapi.PolicyField: {"api"}, httpapi.KeyField: {"bob"}, httpapi.TierField: {"pro"}}},
	} {
		rec := send(c.target, c.header)
		if res := decode[httpapi.CheckResponse](t, rec); rec.Code != http.StatusOK || res.Limit != 5 || res.Remaining != 4 {
			t.Errorf("%s: %d, limit %d, %d left; want 200 under the pro limit 5, 4 left", c.name, rec.Code, res.Limit, res.Remaining)
		}
	}
	for _, c := range []struct {
		name, target string
		header       http.Header
		want         string
	}{
		{"two tier parameters", "/v1/check?policy=api&key=alice&tier=pro&tier=pro", nil, "tier given 2 times"},
		{"two tier fields", "/v1/check", http.Header{httpapi.PolicyField: {"api"}, httpapi.KeyField: {"alice"}, httpapi.TierField: {"pro", "pro"}}, "X-Admit-Tier given in 2 header fields"},
		{"a tier field beside the query", "/v1/check?policy=api&key=alice", http.Header{httpapi.TierField: {"pro"}}, "X-Admit-Tier: the check is in the query"},
		{"a tier parameter beside the fields", "/v1/check/app?tier=pro", http.Header{httpapi.PolicyField: {"api"}, httpapi.KeyField: {"alice"}}, "tier=: the check is in the X-Admit-Policy header field"},
		{"an unknown tier", "/v1/check?policy=api&key=alice&tier=gold", nil, `invalid request: unknown tier "gold" for policy "api"`},
	} {
		if msg, ok := badRequest(t, send(c.target, c.header)); !ok || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %s; want 400 saying %q", c.name, msg, c.want)
		}
	}
	if rec := send("/v1/check?policy=api&key=alice&cost=0", nil); decode[httpapi.CheckResponse](t, rec).Remaining != 1 {
		t.Errorf("alice after the refused checks: %s; want 1 left of 2 (one pro check counted)", rec.Body)
	}
}
