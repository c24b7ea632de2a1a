// Package policyjson describes a policy in force as the JSON of GET /v1/policies: one shape for
// the data plane's endpoint (transport/httpapi) and the admin API's (transport/admin), which adds
// fields of its own around it.
package policyjson

import (
	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/policy"
)

// Policy describes one policy in force: its numbers, its mode and its failure mode.
type Policy struct {
	Name      string `json:"name"`
	Algorithm string `json:"algorithm"`
	// Limit is the configured limit (admit.Limit.Rate) per WindowMS, the window in milliseconds
	// (for a concurrency policy, the lease TTL).
	Limit    int64 `json:"limit"`
	WindowMS int64 `json:"window_ms"`
	// Burst is a gcra policy's bucket size; omitted for others.
	Burst int64 `json:"burst,omitempty"`
	// Aligned reports windows aligned to the clock; omitted when false.
	Aligned bool `json:"aligned,omitempty"`
	// Mode is "enforce" or "shadow" (rejects nothing, counts what it would have).
	Mode string `json:"mode"`
	// Failure is "closed" or "open".
	Failure string `json:"failure"`
}

// Of describes p.
func Of(p policy.Policy) Policy {
	lim := p.Limit
	mode := "enforce"
	if lim.Shadow {
		mode = "shadow"
	}
	return Policy{Name: lim.Name, Algorithm: lim.Algorithm.String(), Limit: lim.Rate, WindowMS: lim.Period.Milliseconds(),
		Burst: Burst(lim), Aligned: lim.Aligned, Mode: mode, Failure: p.Failure.String()}
}

// Burst returns a gcra Limit's bucket size, and 0 for another algorithm's.
func Burst(lim admit.Limit) int64 {
	if lim.Algorithm != admit.GCRA {
		return 0
	}
	return lim.Capacity()
}
