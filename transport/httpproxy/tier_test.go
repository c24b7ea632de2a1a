package httpproxy_test

import (
	"net/http"
	"testing"
)

// tierConfig has a route whose tier is the header X-Tier: policy per-user has a pro tier, and
// per-day has none, so ignores it.
const tierConfig = `
server:
  trusted_proxies: [127.0.0.1/32]
  forwarded_header: x-forwarded-for
policies:
  - name: per-user
    algorithm: fixed_window
    limit: 1
    window: 1h
    tiers:
      pro: {limit: 3}
  - name: per-day
    algorithm: fixed_window
    limit: 100
    window: 24h
routes:
  - path_prefix: /ip/
    policies: [per-user]
    tier:
      header: X-Tier
  - path_prefix: /
    policies: [per-user, per-day]
    subject:
      from: header
      header: X-User-Id
    tier:
      header: X-Tier
`

// TestRouteTier: a route's tier header from a trusted peer decides under the tier's numbers; a
// request without it under the policies' own; from an untrusted peer, a request carrying it is
// refused (400) as a subject header would be, and one without it decided under the policies' own
// numbers; repeated, empty or unknown tiers are 400.
func TestRouteTier(t *testing.T) {
	up := newUpstream(t, ok)
	base := newProxy(t, tierConfig, up.URL)
	trusted, other := peer(t, "127.0.0.1"), peer(t, "127.0.0.2")
	get := func(c *http.Client, hdr ...string) result { return do(t, c, "GET", base+"/x", hdr...) }
	for i, want := range []int{200, 200, 200, 429} {
		if r := get(trusted, "X-User-Id: pro-user", "X-Tier: pro"); r.status != want {
			t.Errorf("pro request %d: %d %q; want %d", i+1, r.status, r.body, want)
		}
	}
	for i, want := range []int{200, 429} {
		if r := get(trusted, "X-User-Id: plain-user"); r.status != want {
			t.Errorf("request %d without a tier: %d %q; want %d", i+1, r.status, r.body, want)
		}
	}
	for _, tc := range []struct {
		name string
		c    *http.Client
		path string
		hdr  []string
	}{
		{"an untrusted peer's tier", other, "/ip/", []string{"X-Tier: pro"}},
		{"a repeated tier", trusted, "/x", []string{"X-User-Id: fresh", "X-Tier: pro", "X-Tier: pro"}},
		{"an empty tier", trusted, "/x", []string{"X-User-Id: fresh", "X-Tier: "}},
	} {
		if r := do(t, tc.c, "GET", base+tc.path, tc.hdr...); r.status != 400 || r.body != "bad request\n" {
			t.Errorf("%s: %d %q; want 400 bad request", tc.name, r.status, r.body)
		}
	}
	for _, tier := range []string{"gold", "PRO"} { // unknown; not a tier name
		if r := get(trusted, "X-User-Id: fresh", "X-Tier: "+tier); r.status != 400 || r.body != "bad request\n" {
			t.Errorf("tier %q: %d %q; want 400 bad request", tier, r.status, r.body)
		}
	}
	// The untrusted peer without a tier: its own address, the policy's own limit of 1.
	for i, want := range []int{200, 429} {
		if r := do(t, other, "GET", base+"/ip/"); r.status != want {
			t.Errorf("untrusted request %d without a tier: %d %q; want %d", i+1, r.status, r.body, want)
		}
	}
	if n := up.hits.Load(); n != 5 {
		t.Errorf("the upstream saw %d requests; want 5: the admitted ones", n)
	}
}
