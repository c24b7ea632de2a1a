package admin

import (
	"net/http"
	"slices"

	"github.com/admit-dev/admit/internal/policyjson"
	"github.com/admit-dev/admit/policy"
)

// PoliciesResponse is the JSON body of a 200 answer of GET /v1/policies: the policies in force in
// this instance, in the configuration's order.
type PoliciesResponse struct {
	// ConfigHash is the hex SHA-256 of the configuration file the policies came from.
	ConfigHash string       `json:"config_hash"`
	Policies   []PolicyInfo `json:"policies"`
	// Top is the setting of the top-subjects sketches (server.top), which GET /v1/top reads.
	Top TopSettings `json:"top"`
}

// TopSettings is server.top as GET /v1/policies answers it.
type TopSettings struct {
	// Size is the subjects each policy's sketch counts; 0 when GET /v1/top is off.
	Size     int   `json:"size"`
	PeriodMS int64 `json:"period_ms"`
	Revealed bool  `json:"revealed"`
}

// PolicyInfo describes one policy in force: its numbers, its tiers', its mode and failure mode.
type PolicyInfo struct {
	// Policy is the policy as the data plane's GET /v1/policies describes it: name, algorithm,
	// limit, window_ms, burst (gcra only), aligned, mode ("enforce" or "shadow") and failure
	// ("closed" or "open").
	policyjson.Policy
	// LocalLimit is the limit per window of the local limiter that decides under failure "open"
	// while the backend cannot, per instance; omitted under "closed".
	LocalLimit int64 `json:"local_limit,omitempty"`
	// Tiers are the policy's tiers by name order; omitted when it has none.
	Tiers []TierInfo `json:"tiers,omitempty"`
}

// TierInfo is the numbers of one tier of a policy.
type TierInfo struct {
	Name     string `json:"name"`
	Limit    int64  `json:"limit"`
	WindowMS int64  `json:"window_ms"`
	Burst    int64  `json:"burst,omitempty"`
}

// policies serves GET /v1/policies: 200 and a PoliciesResponse of the loaded configuration. It
// takes no query: a parameter is a 400.
func (h *Handler) policies(w http.ResponseWriter, r *http.Request, _ []byte) {
	if r.URL.RawQuery != "" {
		writeError(w, http.StatusBadRequest, "GET /v1/policies takes no query")
		return
	}
	cfg := h.svc.Config()
	out := PoliciesResponse{ConfigHash: cfg.Hash, Policies: make([]PolicyInfo, len(cfg.Policies)),
		Top: TopSettings{Size: cfg.Server.Top.Size, PeriodMS: cfg.Server.Top.Period.Milliseconds(), Revealed: cfg.Server.Top.RevealSubjects}}
	for i, p := range cfg.Policies {
		out.Policies[i] = policyInfo(p)
	}
	writeJSON(w, http.StatusOK, out)
}

// policyInfo describes p.
func policyInfo(p policy.Policy) PolicyInfo {
	info := PolicyInfo{Policy: policyjson.Of(p), LocalLimit: p.LocalLimit}
	names := make([]string, 0, len(p.Tiers))
	for name := range p.Tiers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t := p.Tiers[name]
		info.Tiers = append(info.Tiers, TierInfo{Name: name, Limit: t.Rate, WindowMS: t.Period.Milliseconds(), Burst: policyjson.Burst(t)})
	}
	return info
}
