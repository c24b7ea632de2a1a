package policy_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/validate"
	"github.com/admit-dev/admit/policy"
)

// tiersFile has a policy with tiers of each algorithm: what docs/configuration.md#tiers says of
// moving a subject between tiers is checked on its Limits.
const tiersFile = `
policies:
  - name: api
    algorithm: fixed_window
    limit: 100
    window: 1m
    mode: shadow
    failure: open
    local_limit: 10
    tiers:
      pro: {limit: 1000}
      enterprise: {limit: 10000}
      hourly: {window: 1h}
  - name: aligned
    algorithm: fixed_window
    limit: 100
    window: 1m
    aligned: true
    tiers:
      pro: {limit: 1000}
  - name: bucket
    algorithm: gcra
    limit: 10
    window: 1s
    burst: 20
    tiers:
      minute: {limit: 600, window: 1m}
      faster: {limit: 20}
      bigger: {burst: 40}
  - name: plain-bucket
    algorithm: gcra
    limit: 10
    window: 1s
    tiers:
      pro: {limit: 100}
  - name: in-flight
    algorithm: concurrency
    limit: 5
    lease_ttl: 30s
    tiers:
      pro: {limit: 50, lease_ttl: 1m}
  - name: plain
    algorithm: sliding_window
    limit: 5
    window: 1s
`

func parseTiers(t *testing.T) *policy.Config {
	t.Helper()
	cfg, err := policy.Parse("tiers.yaml", []byte(tiersFile))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// limitFor returns the Limit of tier under the policy named name of cfg.
func limitFor(t *testing.T, cfg *policy.Config, name, tier string) admit.Limit {
	t.Helper()
	p, ok := cfg.Policy(name)
	if !ok {
		t.Fatalf("no policy %q", name)
	}
	lim, err := p.LimitFor(tier)
	if err != nil {
		t.Fatalf("%s.LimitFor(%q): %v", name, tier, err)
	}
	return lim
}

// TestLimitFor: no tier is the policy's own Limit; a tier is the policy's Limit with the tier's
// numbers, everything else the policy's; an unknown tier is an invalid request that reads
// `unknown tier "x" for policy "api"`.
func TestLimitFor(t *testing.T) {
	cfg := parseTiers(t)
	api, _ := cfg.Policy("api")
	if lim := limitFor(t, cfg, "api", ""); lim != api.Limit {
		t.Errorf(`LimitFor("") = %+v; want the policy's Limit %+v`, lim, api.Limit)
	}
	for tier, want := range map[string]admit.Limit{
		"pro":        {Name: "api", Tier: "pro", Algorithm: admit.FixedWindow, Rate: 1000, Period: time.Minute, Shadow: true},
		"enterprise": {Name: "api", Tier: "enterprise", Algorithm: admit.FixedWindow, Rate: 10000, Period: time.Minute, Shadow: true},
		"hourly":     {Name: "api", Tier: "hourly", Algorithm: admit.FixedWindow, Rate: 100, Period: time.Hour, Shadow: true},
	} {
		if lim := limitFor(t, cfg, "api", tier); lim != want {
			t.Errorf("LimitFor(%q) = %+v; want %+v", tier, lim, want)
		}
	}
	if lim := limitFor(t, cfg, "aligned", "pro"); !lim.Aligned || lim.Rate != 1000 {
		t.Errorf(`aligned.LimitFor("pro") = %+v; want the policy's alignment, limit 1000`, lim)
	}
	if lim := limitFor(t, cfg, "bucket", "faster"); lim.Burst != 20 || lim.Rate != 20 {
		t.Errorf(`bucket.LimitFor("faster") = %+v; want limit 20 with the policy's burst 20`, lim)
	}
	if lim := limitFor(t, cfg, "plain-bucket", "pro"); lim.Capacity() != 100 {
		t.Errorf(`plain-bucket.LimitFor("pro") = %+v, capacity %d; want the tier's limit as burst, 100`, lim, lim.Capacity())
	}
	for _, tc := range []struct{ policy, tier, msg string }{
		{"api", "gold", `invalid request: unknown tier "gold" for policy "api"`},
		{"plain", "pro", `invalid request: unknown tier "pro" for policy "plain"`},
		{"api", "PRO", `invalid request: unknown tier "PRO" for policy "api"`},
	} {
		p, _ := cfg.Policy(tc.policy)
		lim, err := p.LimitFor(tc.tier)
		if !errors.Is(err, admit.ErrInvalidRequest) || !errors.Is(err, policy.ErrUnknownTier) || lim != (admit.Limit{}) {
			t.Errorf("%s.LimitFor(%q) = %+v, %v; want ErrUnknownTier, an invalid request", tc.policy, tc.tier, lim, err)
		}
		if got := validate.ClientMessage(err); got != tc.msg {
			t.Errorf("ClientMessage(%s.LimitFor(%q)) = %q; want %q", tc.policy, tc.tier, got, tc.msg)
		}
	}
}

// TestTierShapes checks, on the keys of one subject under each tier (a key changes with the state's
// shape, docs/keys.md), what docs/configuration.md#tiers says a move between tiers does.
func TestTierShapes(t *testing.T) {
	cfg := parseTiers(t)
	keys, err := admit.NewKeyBuilder([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	shape := func(name, tier string) string {
		key, err := keys.Key(limitFor(t, cfg, name, tier), "1", admit.Subject{ID: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		return key
	}
	for _, tc := range []struct {
		policy, a, b string
		same         bool
		why          string
	}{
		{"api", "", "pro", true, "a fixed window's limit alone keeps the counter"},
		{"api", "pro", "enterprise", true, "a fixed window's limit alone keeps the counter"},
		{"api", "", "hourly", false, "a new window starts fresh"},
		{"aligned", "", "pro", true, "an aligned window's limit alone keeps the counter"},
		{"bucket", "", "minute", true, "10/s and 600/min with one burst are one bucket"},
		{"bucket", "", "faster", false, "a gcra's new rate starts a full bucket"},
		{"bucket", "", "bigger", false, "a gcra's new burst starts a full bucket"},
		{"plain-bucket", "", "pro", false, "a gcra's new rate starts a full bucket"},
		{"in-flight", "", "pro", true, "leases are kept whatever the limit and the TTL"},
	} {
		if a, b := shape(tc.policy, tc.a), shape(tc.policy, tc.b); (a == b) != tc.same {
			t.Errorf("%s: tier %q has key %s, tier %q %s: %s", tc.policy, tc.a, a, tc.b, b, tc.why)
		}
	}
}

// TestTiersAllAtOnce: a file with mistakes in a policy's tiers and elsewhere has all of them
// reported, each at its place; a tier's numbers are checked only once the policy's own are valid,
// so that the policy's mistake is not reported again for each tier.
func TestTiersAllAtOnce(t *testing.T) {
	_, err := policy.Parse("many.yaml", []byte(`policies:
  - name: a
    algorithm: fixed_window
    limit: 0
    window: 1s
    tiers:
      pro: {limit: 0}
      Bad: {limit: 5}
  - name: b
    algorithm: gcra
    limit: 10
    window: 1s
    tiers:
      pro: {limit: 0, burst: 0}
      empty: {}
`))
	want := `many.yaml:4:12: policies[0] (a).limit: 0 is outside 1-1000000000000000
many.yaml:8:7: policies[0] (a).tiers: tier name "Bad": want 1-64 characters of a-z, 0-9, '_' and '-'
many.yaml:14:20: policies[1] (b).tiers.pro.limit: 0 is outside 1-1000000000000000
many.yaml:14:30: policies[1] (b).tiers.pro.burst: 0 is outside 1-1000000000000000
many.yaml:15:14: policies[1] (b).tiers.empty: sets nothing: such a tier is the policy itself, which a request naming no tier gets; set the numbers the tier changes`
	if err == nil || err.Error() != want {
		t.Errorf("errors:\n%v\nwant:\n%s", err, want)
	}
}

// TestTierFieldsDocumented: every field a tier accepts is named, in backquotes, in the Tiers
// section of docs/configuration.md (TestConfigFieldsDocumented stops at policies.tiers, whose
// names are the file's own).
func TestTierFieldsDocumented(t *testing.T) {
	fields, ok := probe([]string{"policies", "tiers", "t"}, []bool{true, false, false})
	if !ok || len(fields) == 0 {
		t.Fatal("the parser names no field a tier accepts")
	}
	data, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(data), "\n### Tiers\n")
	section, _, _ = strings.Cut(section, "\n## ")
	for _, f := range fields {
		if !strings.Contains(section, "`"+f+"`") {
			t.Errorf("a tier accepts %s, which the Tiers section of docs/configuration.md does not name", f)
		}
	}
	t.Logf("a tier accepts %s", strings.Join(fields, ", "))
}
