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
