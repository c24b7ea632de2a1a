package envoyrl

import (
	"slices"
	"testing"

	"github.com/admit-dev/admit/policy/envoyconf"
	"github.com/envoyproxy/ratelimit/src/config"
)

// metricKeyConfig has value_to_metric at the top, in the middle, on a trailing wildcard, under
// share_threshold, and rules without it.
const metricKeyConfig = `domain: vm
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {unit: hour, requests_per_unit: 60}
      - key: http_method
        value: POST
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {unit: hour, requests_per_unit: 30}
  - key: k1
    descriptors:
      - key: k2
        value_to_metric: true
        descriptors:
          - key: k3
            rate_limit: {unit: hour, requests_per_unit: 1}
      - key: plain
        rate_limit: {unit: hour, requests_per_unit: 1}
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: read*
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit: {unit: hour, requests_per_unit: 100}
      - key: shared
        value: s*
        share_threshold: true
        value_to_metric: true
        rate_limit: {unit: hour, requests_per_unit: 100}
      - key: pattern
        value: p*
        rate_limit: {unit: hour, requests_per_unit: 100}
  - key: empty
    value_to_metric: true
    rate_limit: {unit: hour, requests_per_unit: 100}
`

// TestValueToMetricKeys: envoyconf.Rule.MetricKey, the name of a rule's series in admit's
// envoy_compat metrics, is the stats key envoyproxy/ratelimit's own loader gives the same
// descriptor, with value_to_metric and without.
func TestValueToMetricKeys(t *testing.T) {
	files := []envoyconf.File{{Name: "vm.yaml", Data: []byte(metricKeyConfig)}}
	ref, err := referenceLoad(files)
	if err != nil {
		t.Fatal(err)
	}
	adm, err := envoyconf.Parse(files...)
	if err != nil {
		t.Fatal(err)
	}
	for _, entries := range [][]envoyconf.Entry{
		metricKeyEntries("route", "draw", "http_method", "GET", "subject_id", "123"),
		metricKeyEntries("route", "api", "http_method", "POST", "subject_id", "u1"),
		metricKeyEntries("k1", "X", "k2", "Y", "k3", "Z"),
		metricKeyEntries("k1", "X", "plain", "P"),
		metricKeyEntries("user", "alice", "action", "readfile", "resource", "documents"),
		metricKeyEntries("user", "bob", "shared", "sa"),
		metricKeyEntries("user", "bob", "pattern", "pq"),
		metricKeyEntries("empty", ""),
		metricKeyEntries("empty", "v"),
	} {
		r := referenceMatch(ref, "vm", entries)
		rule, keyed := adm.Lookup("vm", entries)
		if r == nil || rule == nil {
			t.Errorf("%v: envoyproxy/ratelimit's rule %v, admit's %v; want both", entries, r, rule)
			continue
		}
		if got, want := rule.MetricKey(keyed), r.Stats.Key; got != want {
			t.Errorf("%v: admit's key %q, envoyproxy/ratelimit's %q", entries, got, want)
		}
	}
}

// metricKeyEntries returns the entries of kv, keys and values in turn.
func metricKeyEntries(kv ...string) []envoyconf.Entry {
	var es []envoyconf.Entry
	for i := 0; i+1 < len(kv); i += 2 {
		es = append(es, envoyconf.Entry{Key: kv[i], Value: kv[i+1]})
	}
	return es
}

// TestFixtureMetricKeys: for every descriptor of envoyproxy/ratelimit's own configuration fixtures
// that finds a limited rule without detailed_metric in both (TestConfigFixtures holds that they find
// the same), admit's envoy_compat series key (envoyconf.Rule.MetricKey) is envoyproxy/ratelimit's
// stats key.
func TestFixtureMetricKeys(t *testing.T) {
	compared := 0
	for _, fx := range fixtures(t) {
		ref, refErr := referenceLoad(fx.files)
		adm, admErr := envoyconf.Parse(fx.files...)
		if refErr != nil || admErr != nil {
			continue
		}
		for _, f := range fx.files {
			root := config.ConfigFileContentToYaml(f.Name, string(f.Data))
			for _, entries := range descriptorPaths(nil, root.Descriptors) {
				r := referenceMatch(ref, root.Domain, entries)
				rule, keyed := adm.Lookup(root.Domain, entries)
				if r == nil || rule == nil || r.Unlimited || rule.Unlimited || rule.DetailedMetric ||
					slices.ContainsFunc(rawValues(root.Descriptors, entries), middleWildcard) {
					continue
				}
				compared++
				if got, want := rule.MetricKey(keyed), r.Stats.Key; got != want {
					t.Errorf("%s: domain %s, descriptor %v: admit's key %q, envoyproxy/ratelimit's %q", fx.name, root.Domain, entries, got, want)
				}
			}
		}
	}
	if compared < 20 {
		t.Fatalf("%d descriptors compared; the fixtures should give many more", compared)
	}
	t.Logf("%d descriptors of the fixtures have the same stats key in both", compared)
}
