package policy_test

import (
	"fmt"

	"github.com/admit-dev/admit/policy"
)

func ExampleParse() {
	cfg, err := policy.Parse("admit.yaml", []byte(`
policies:
  - name: per-second
    algorithm: gcra
    limit: 10
    window: 1s
    burst: 20
  - name: per-day
    algorithm: fixed_window
    limit: 1000
    window: 24h
    mode: shadow
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range cfg.Policies {
		fmt.Println(p.Limit)
	}

	_, err = policy.Parse("bad.yaml", []byte(`
policies:
  - name: per-second
    algorithm: gcra
    limit: 0
    windw: 1s
`))
	fmt.Println(err)
	// Output:
	// per-second: 10 per 1s, burst 20 (gcra)
	// per-day: 1000 per 24h0m0s (fixed_window) [shadow]
	// bad.yaml:3:5: policies[0] (per-second): want a window
	// bad.yaml:5:12: policies[0] (per-second).limit: 0 is outside 1-1000000000000000
	// bad.yaml:6:5: policies[0].windw: unknown field; did you mean window?
}
