package policy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit/policy"
)

const rlqsPolicies = `policies:
  - {name: api-global, algorithm: token_bucket, limit: 100, window: 1s}
  - {name: conc, algorithm: concurrency, limit: 10, lease_ttl: 30s}
  - {name: half, algorithm: fixed_window, limit: 10, window: 500ms}
`

// TestRLQSSection parses the pinned form and an extended one.
func TestRLQSSection(t *testing.T) {
	cfg, err := policy.Parse("t.yaml", []byte(rlqsPolicies+`rlqs:
  - domain: mesh
    buckets:
      - match: {name: api}
        policy: api-global
  - domain: edge
    unmatched: deny_all
    assignment_ttl: 20s
    idle_after: 2m
    buckets:
      - {match: {name: api, tier: free}, policy: api-global}
`))
	if err != nil {
		t.Fatal(err)
	}
	mesh, ok := cfg.RLQSDomain("mesh")
	if !ok || len(mesh.Buckets) != 1 || mesh.Buckets[0].Policy != "api-global" || mesh.Buckets[0].Match["name"] != "api" {
		t.Fatalf("mesh = %+v, %v", mesh, ok)
	}
	if mesh.Unmatched != policy.RLQSIgnore || mesh.AssignmentTTL != policy.DefaultRLQSTTL || mesh.IdleAfter != policy.DefaultRLQSIdleAfter {
		t.Errorf("mesh defaults = %+v", mesh)
	}
	edge, _ := cfg.RLQSDomain("edge")
	if edge.Unmatched != policy.RLQSDenyAll || edge.AssignmentTTL != 20*time.Second || edge.IdleAfter != 2*time.Minute {
		t.Errorf("edge = %+v", edge)
	}
	b := edge.Buckets[0]
	if !b.Matches(map[string]string{"name": "api", "tier": "free", "tenant": "acme"}) || b.Matches(map[string]string{"name": "api"}) {
		t.Error("Matches: want a superset to match and a subset not")
	}
	if _, ok := cfg.RLQSDomain("other"); ok {
		t.Error("an unknown domain found")
	}
}

// TestRLQSDefaults parses unmatched: {policy: NAME} and the "*" domain, which answers the domains
// no other entry names.
func TestRLQSDefaults(t *testing.T) {
	cfg, err := policy.Parse("t.yaml", []byte(rlqsPolicies+`rlqs:
  - domain: "*"
    unmatched: {policy: api-global}
    buckets: []
  - domain: mesh
    buckets:
      - {match: {name: api}, policy: api-global}
`))
	if err != nil {
		t.Fatal(err)
	}
	mesh, ok := cfg.RLQSDomain("mesh")
	if !ok || mesh.Domain != "mesh" || mesh.Unmatched != policy.RLQSIgnore || mesh.UnmatchedPolicy != "" {
		t.Errorf("mesh = %+v, %v; want its own entry, not the \"*\" one before it", mesh, ok)
	}
	other, ok := cfg.RLQSDomain("other")
	if !ok || other.Domain != policy.RLQSAnyDomain || other.Unmatched != policy.RLQSDefaultPolicy || other.UnmatchedPolicy != "api-global" {
		t.Errorf("other = %+v, %v; want the \"*\" entry, unmatched buckets to api-global", other, ok)
	}
}

// TestRLQSSectionErrors checks that each bad rlqs field is refused with an error naming it.
func TestRLQSSectionErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"rlqs: {domain: mesh}", "rlqs: want a list"},
		{"rlqs:\n  - buckets: [{match: {name: a}, policy: api-global}]", "rlqs[0].domain: want the domain"},
		{"rlqs:\n  - {domain: mesh}", "rlqs[0]: want buckets"},
		{"rlqs:\n  - {domain: mesh, buckets: [{match: {name: a}, policy: nope}]}", `rlqs[0].buckets[0].policy: "nope": no such policy`},
		{"rlqs:\n  - {domain: mesh, buckets: [{match: {name: a}, policy: conc}]}", "concurrency policy"},
		{"rlqs:\n  - {domain: mesh, buckets: [{match: {name: a}, policy: half}]}", "want whole seconds"},
		{"rlqs:\n  - {domain: mesh, buckets: [{policy: api-global}]}", "rlqs[0].buckets[0]: want match"},
		{"rlqs:\n  - {domain: mesh, buckets: [{match: {name: a}}]}", "rlqs[0].buckets[0]: want a policy"},
		{"rlqs:\n  - {domain: mesh, buckets: [{match: {name: 3}, policy: api-global}]}", "rlqs[0].buckets[0].match.name"},
		{"rlqs:\n  - {domain: mesh, bucket: []}", "rlqs[0].bucket: unknown field; did you mean buckets?"},
		{"rlqs:\n  - {domain: mesh, unmatched: maybe, buckets: []}", `rlqs[0].unmatched: "maybe": want ignore, allow_all, deny_all or {policy: NAME}`},
		{"rlqs:\n  - domain: mesh\n    buckets: []\n    unmatched: {policy: nope}", `t.yaml:8:25: rlqs[0].unmatched.policy: "nope": no such policy (have [api-global conc half])`},
		{"rlqs:\n  - {domain: mesh, unmatched: {policy: conc}, buckets: []}", `rlqs[0].unmatched.policy: "conc" is a concurrency policy`},
		{"rlqs:\n  - {domain: mesh, unmatched: {policy: half}, buckets: []}", `rlqs[0].unmatched.policy: "half" has a window of 500ms`},
		{"rlqs:\n  - {domain: mesh, unmatched: {}, buckets: []}", "rlqs[0].unmatched: want a policy"},
		{"rlqs:\n  - {domain: mesh, unmatched: {polcy: api-global}, buckets: []}", "rlqs[0].unmatched.polcy: unknown field; did you mean policy?"},
		{"rlqs:\n  - {domain: mesh, unmatched: [allow_all], buckets: []}", "rlqs[0].unmatched"},
		{"rlqs:\n  - {domain: \"*\", buckets: []}\n  - {domain: \"*\", buckets: []}", `rlqs[1].domain: "*": another rlqs entry`},
		{"rlqs:\n  - {domain: mesh, assignment_ttl: 1500ms, buckets: []}", "rlqs[0].assignment_ttl: 1.5s: want whole seconds"},
		{"rlqs:\n  - {domain: mesh, assignment_ttl: 30s, idle_after: 10s, buckets: []}", "rlqs[0].idle_after: 10s: want whole seconds from 30s"},
		{"rlqs:\n  - {domain: mesh, buckets: []}\n  - {domain: mesh, buckets: []}", `rlqs[1].domain: "mesh": another rlqs entry`},
	} {
		_, err := policy.Parse("t.yaml", []byte(rlqsPolicies+c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\ngot %v\nwant an error containing %q", c.yaml, err, c.want)
		}
	}
}
