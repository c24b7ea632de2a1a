package admin

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/service"
)

// Bounds of a change's fields.
const (
	// MaxKeyLen is the longest key (subject) a change names, in bytes.
	MaxKeyLen = 8 << 10
	// MaxReasonLen is the longest reason a change gives, in bytes.
	MaxReasonLen = 200
)

// ResetRequest is the JSON body of POST /v1/reset.
type ResetRequest struct {
	// Policy names the policy whose state to reset; "" or omitted for every policy.
	Policy string `json:"policy,omitempty"`
	// Key is the subject, as /v1/check takes it; required.
	Key string `json:"key"`
	// Reason says why, for the audit record; at most MaxReasonLen bytes, optional.
	Reason string `json:"reason,omitempty"`
}

// ResetResponse is the JSON body of a 200 answer of POST /v1/reset.
type ResetResponse struct {
	// Reset is true: the subject's state is gone.
	Reset bool `json:"reset"`
	// Policy is the policy reset; omitted for every policy.
	Policy string `json:"policy,omitempty"`
	// Keys is the number of keys reset (the policies' own and their tiers'), present or not.
	Keys int `json:"keys"`
}

// reset serves POST /v1/reset: 200 and a ResetResponse once the subject's keys are deleted, 400 for
// a bad body, 404 for an unknown policy, 503 when the Store cannot reset. Each reset the body
// allows is audited, refused or not.
func (h *Handler) reset(w http.ResponseWriter, r *http.Request, body []byte) {
	var req ResetRequest
	if err := decodeBody(body, &req, "a reset request"); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := checkChange(req.Key, req.Reason); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	c := change{action: ActionReset, policy: req.Policy, subject: admit.Subject{ID: req.Key}, reason: req.Reason, client: clientAddr(r.RemoteAddr)}
	n, err := h.svc.Reset(r.Context(), c.subject, req.Policy)
	h.audit(r.Context(), c, err)
	if !h.failed(w, r, err, service.ErrUnknownPolicy) {
		writeJSON(w, http.StatusOK, ResetResponse{Reset: true, Policy: req.Policy, Keys: n})
	}
}

// checkChange checks the fields every change has: a key of 1 to MaxKeyLen bytes, a reason of at
// most MaxReasonLen. Its error names the field, for a 400.
func checkChange(key, reason string) error {
	switch {
	case key == "":
		return errors.New(`"key" is required: the subject, as /v1/check takes it`)
	case len(key) > MaxKeyLen:
		return fmt.Errorf(`"key" of %d bytes; want at most %d`, len(key), MaxKeyLen)
	case len(reason) > MaxReasonLen:
		return fmt.Errorf(`"reason" of %d bytes; want at most %d`, len(reason), MaxReasonLen)
	}
	return nil
}
