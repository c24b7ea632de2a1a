package policy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit/policy"
)

// TestDurability parses durability, durability_replicas and durability_timeout into the Limit's
// Replicas and ReplicaTimeout, and refuses what makes no sense, naming the field.
func TestDurability(t *testing.T) {
	doc := func(fields string) []byte {
		return []byte("policies:\n  - {name: pay, algorithm: fixed_window, limit: 10, window: 1s" + fields + "}\nroutes:\n  - {path_prefix: /, policies: [pay]}\n")
	}
	for _, tc := range []struct {
		fields   string
		replicas int
		timeout  time.Duration
		err      string // "" for valid, else a substring of the error
	}{
		{"", 0, 0, ""},
		{", durability: async", 0, 0, ""},
		{", durability: replicated", 1, 0, ""},
		{", durability: replicated, durability_replicas: 2", 2, 0, ""},
		{", durability: replicated, durability_replicas: 16, durability_timeout: 1m", 16, time.Minute, ""},
		{", durability: replicated, durability_timeout: 250ms", 1, 250 * time.Millisecond, ""},
		{", durability: sync", 0, 0, `policies[0] (pay).durability: "sync": want async or replicated`},
		{", durability_replicas: 2", 0, 0, "policies[0] (pay).durability_replicas: only a policy with durability: replicated waits for replicas"},
		{", durability: async, durability_timeout: 1s", 0, 0, "durability_timeout: only a policy with durability: replicated"},
		{", durability: replicated, durability_replicas: 0", 0, 0, "durability_replicas: 0 is outside 1-16"},
		{", durability: replicated, durability_replicas: 17", 0, 0, "durability_replicas: 17 is outside 1-16"},
		{", durability: replicated, durability_timeout: 0s", 0, 0, "durability_timeout: 0s: want a whole number of milliseconds, 1ms to 1m0s"},
		{", durability: replicated, durability_timeout: 2m", 0, 0, "durability_timeout: 2m0s"},
		{", durability: replicated, durability_timeout: 1500us", 0, 0, "durability_timeout: 1.5ms"},
		{", durability: replicated, failure: open, local_limit: 5", 0, 0, "replicated with failure: open"},
		{", durability: 3", 0, 0, "durability"},
	} {
		cfg, err := policy.Parse("d.yaml", doc(tc.fields))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v; want an error with %q", tc.fields, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.fields, err)
			continue
		}
		if l := cfg.Policies[0].Limit; l.Replicas != tc.replicas || l.ReplicaTimeout != tc.timeout {
			t.Errorf("%q: Replicas %d, ReplicaTimeout %v; want %d, %v", tc.fields, l.Replicas, l.ReplicaTimeout, tc.replicas, tc.timeout)
		}
	}
	// A tier keeps its policy's durability.
	cfg, err := policy.Parse("d.yaml", []byte("policies:\n  - {name: pay, algorithm: fixed_window, limit: 10, window: 1s, durability: replicated, durability_replicas: 2, tiers: {pro: {limit: 100}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Policies[0].Tiers["pro"]; l.Replicas != 2 {
		t.Errorf("tier pro: Replicas %d, want the policy's 2", l.Replicas)
	}
}
