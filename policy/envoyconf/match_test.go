package envoyconf_test

import (
	"testing"

	"github.com/admit-dev/admit/policy/envoyconf"
)

// TestMatchWildcardBeforeKeyOnly: at one level, a wildcard value is chosen before the key-only
// descriptor of the same key, whichever comes first in the file, and an exact value before both:
// with {key: path} and {key: path, value: /api/*}, /api/x gets the wildcard's limit and /other
// the key-only one's, as envoyproxy/ratelimit matches.
func TestMatchWildcardBeforeKeyOnly(t *testing.T) {
	const keyOnly = `
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 1}`
	const wildcard = `
  - key: path
    value: /api/*
    rate_limit: {unit: minute, requests_per_unit: 2}`
	const exact = `
  - key: path
    value: /api/admin
    rate_limit: {unit: minute, requests_per_unit: 3}`
	for name, order := range map[string][]string{
		"key-only first": {keyOnly, wildcard, exact},
		"wildcard first": {wildcard, keyOnly, exact},
		"exact first":    {exact, keyOnly, wildcard},
	} {
		data := "domain: paths\ndescriptors:"
		for _, d := range order {
			data += d
		}
		cfg, err := envoyconf.Parse(envoyconf.File{Name: "paths.yaml", Data: []byte(data + "\n")})
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, data)
		}
		for value, want := range map[string]int64{
			"/api/x":     2, // the wildcard's
			"/api/":      2,
			"/api/admin": 3, // exact
			"/other":     1, // key-only
			"/ap":        1,
			"":           1,
		} {
			rule := cfg.Match("paths", []envoyconf.Entry{{Key: "path", Value: value}})
			if rule == nil || rule.Limit.Rate != want {
				got := "none"
				if rule != nil {
					got = rule.Limit.String()
				}
				t.Errorf("%s: path %q: rule %s; want the one of %d per minute", name, value, got, want)
			}
		}
	}
}
