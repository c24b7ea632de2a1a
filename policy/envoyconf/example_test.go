package envoyconf_test

import (
	"fmt"

	"github.com/admit-dev/admit/policy/envoyconf"
)

func ExampleConfig_Match() {
	cfg, err := envoyconf.Parse(envoyconf.File{Name: "messaging.yaml", Data: []byte(`
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	marketing := cfg.Match("messaging", []envoyconf.Entry{{"message_type", "marketing"}, {"to_number", "2061111111"}})
	any := cfg.Match("messaging", []envoyconf.Entry{{"to_number", "2061111111"}})
	fmt.Println(marketing.Path, marketing.Limit)
	fmt.Println(any.Path, any.Limit)
	fmt.Println(cfg.Match("messaging", []envoyconf.Entry{{"message_type", "marketing"}}))
	// Output:
	// message_type_marketing.to_number envoy: 5 per 24h0m0s (fixed_window, aligned)
	// to_number envoy: 100 per 24h0m0s (fixed_window, aligned)
	// <nil>
}

func ExampleConfig_Lookup() {
	cfg, err := envoyconf.Parse(envoyconf.File{Name: "paths.yaml", Data: []byte(`
domain: paths
descriptors:
  - key: path
    value: /api/*/users
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 100}
`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Every path the wildcard matches is counted by the wildcard's value: one counter.
	for _, p := range []string{"/api/v1/users", "/api/v2/users", "/api/v1/orders"} {
		rule, keyed := cfg.Lookup("paths", []envoyconf.Entry{{Key: "path", Value: p}})
		if rule == nil {
			fmt.Println(p, "no rule")
			continue
		}
		fmt.Println(p, rule.Limit.Rate, keyed[0].Value)
	}
	// Output:
	// /api/v1/users 100 /api/*/users
	// /api/v2/users 100 /api/*/users
	// /api/v1/orders no rule
}

func ExampleWildcard() {
	fmt.Println(envoyconf.Wildcard("foo*bar*baz", "foo-bar-baz"), envoyconf.Wildcard("bar*b", "bar-b"), envoyconf.Wildcard("bar*b", "bar-bc"))
	// Output: true true false
}
