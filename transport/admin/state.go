package admin

import (
	"net/http"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
)

// StateResponse is the JSON body of a 200 answer of GET /v1/state.
type StateResponse struct {
	// Decisions holds the subject's state under each policy read, in the configuration's order.
	Decisions []PolicyState `json:"decisions"`
}

// PolicyState is a subject's state under one policy, as a peek reads it: nothing is consumed or
// written.
type PolicyState struct {
	Policy string `json:"policy"`
	// Tier is the tier whose numbers are in force; omitted for the policy's own.
	Tier string `json:"tier,omitempty"`
	// Source says where the numbers in force come from: "policy", "tier" or "override" (an
	// override of the subject, which replaces the tier's numbers too).
	Source string `json:"source"`
	// Algorithm is the policy's algorithm; omitted for an unused override.
	Algorithm string `json:"algorithm,omitempty"`
	// Limit is the quota in force, as /v1/check's limit is (admit.Limit.Capacity): for gcra, the
	// burst; WindowMS its window in milliseconds (for concurrency, the lease TTL).
	Limit    int64 `json:"limit"`
	WindowMS int64 `json:"window_ms"`
	// Remaining is the units a request may still take now.
	Remaining int64 `json:"remaining"`
	// Limited reports whether a request of one unit would be refused now (Remaining is 0).
	Limited bool `json:"limited"`
	// ResetAfterMS is the time until the subject is back to its full allowance.
	ResetAfterMS int64 `json:"reset_after_ms"`
	// RetryAfterMS is the time until the subject is no longer over its limit: 0 unless it holds
	// more than the numbers in force allow (a limit lowered since, another tier).
	RetryAfterMS int64 `json:"retry_after_ms"`
	// Shadow reports that the policy is in shadow mode: it rejects nothing. Omitted when false.
	Shadow bool `json:"shadow,omitempty"`
	// Degraded reports that a local limiter answered while the backend could not (a policy with
	// failure: open): the numbers are this instance's, not global. Omitted when false.
	Degraded bool `json:"degraded,omitempty"`
	// ExpiresInMS is the time left of the override in force, in milliseconds, and Reason its
	// reason: for source "override" only, ExpiresInMS omitted for one without expiry.
	ExpiresInMS int64  `json:"expires_in_ms,omitempty"`
	Reason      string `json:"reason,omitempty"`
	// Corrupt reports that the subject's override (source "override") or state under the policy
	// holds bytes admit never writes: its decisions answer 503 until it is deleted, and Error says
	// which key and how. Limit and WindowMS are then the policy's (or the tier's), Remaining 0
	// and Limited true. Omitted when false.
	Corrupt bool   `json:"corrupt,omitempty"`
	Error   string `json:"error,omitempty"`
	// Unused reports an override of the subject under a policy the loaded configuration no longer
	// has (a reload removed it): stored, deciding nothing. Source is "override", Limit the
	// override's limit, with its expiry and reason; no algorithm, and nothing else is read.
	// Omitted when false.
	Unused bool `json:"unused,omitempty"`
}

// state serves GET /v1/state?policy=P&key=K[&tier=T]: 200 and a StateResponse, a policy whose
// override or state is corrupt marked so, an override of a policy a reload removed marked unused;
// 400 for a bad query, 404 for an unknown policy (without such an override) or tier, 503 when the
// Store cannot decide.
func (h *Handler) state(w http.ResponseWriter, r *http.Request, _ []byte) {
	query, ok := strictQuery(w, r, "policy", "key", "tier")
	if !ok {
		return
	}
	if query.Get("key") == "" {
		writeError(w, http.StatusBadRequest, "key is required: the subject, as /v1/check takes it")
		return
	}
	if query.Has("policy") && query.Get("policy") == "" || query.Has("tier") && query.Get("tier") == "" {
		writeError(w, http.StatusBadRequest, "policy and tier, when given, name one")
		return
	}
	q := service.StateQuery{Subject: admit.Subject{ID: query.Get("key")}, Policy: query.Get("policy"), Tier: query.Get("tier")}
	states, err := h.svc.State(r.Context(), q)
	if h.failed(w, r, err, service.ErrUnknownPolicy, policy.ErrUnknownTier) {
		return
	}
	out := StateResponse{Decisions: make([]PolicyState, len(states))}
	for i, st := range states {
		d := st.Decision
		if st.Unused {
			out.Decisions[i] = PolicyState{Policy: d.Limit.Name, Source: st.Source, Unused: true}
			if st.Override != nil {
				out.Decisions[i].Limit = st.Override.Rate
			}
			if st.Corrupt != nil {
				out.Decisions[i].Corrupt, out.Decisions[i].Error = true, corruptMessage(st.Corrupt)
			}
			out.Decisions[i].ExpiresInMS, out.Decisions[i].Reason = overrideTerms(st.Override)
			continue
		}
		out.Decisions[i] = PolicyState{
			Policy: d.Limit.Name, Tier: st.Tier, Source: st.Source, Algorithm: d.Limit.Algorithm.String(),
			Limit: d.Limit.Capacity(), WindowMS: d.Limit.Period.Milliseconds(),
			Remaining: d.Remaining, Limited: !d.Allowed || d.Remaining == 0,
			ResetAfterMS: d.ResetAfter.Milliseconds(), RetryAfterMS: d.RetryAfter.Milliseconds(),
			Shadow: d.Limit.Shadow, Degraded: d.Degraded,
		}
		if st.Corrupt != nil {
			out.Decisions[i].Corrupt, out.Decisions[i].Error = true, corruptMessage(st.Corrupt)
			out.Decisions[i].Remaining, out.Decisions[i].Limited = 0, true
		}
		out.Decisions[i].ExpiresInMS, out.Decisions[i].Reason = overrideTerms(st.Override)
	}
	writeJSON(w, http.StatusOK, out)
}

// overrideTerms returns the time left of o in milliseconds (0 for none, or no expiry) and its
// reason; nothing for nil.
func overrideTerms(o *admit.Override) (expiresInMS int64, reason string) {
	if o == nil {
		return 0, ""
	}
	if !o.Expires.IsZero() {
		expiresInMS = max(time.Until(o.Expires), time.Millisecond).Milliseconds()
	}
	return expiresInMS, o.Reason
}
