package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/validate"
	"github.com/admit-dev/admit/service"
)

// Bounds of the overrides' endpoints.
const (
	// DefaultOverridePage is the number of overrides GET /v1/overrides lists without n.
	DefaultOverridePage = 100
	// MaxOverridePage is the largest n GET /v1/overrides takes.
	MaxOverridePage = validate.MaxOverridePage
)

// OverrideRequest is the JSON body of PUT /v1/overrides: the numbers that replace a policy's (and
// its tiers') for one subject. An override changes numbers only: a field such as "window" or
// "algorithm" is refused, as every unknown field is.
type OverrideRequest struct {
	// Policy names the policy (or the Envoy rule); required.
	Policy string `json:"policy"`
	// Key is the subject, as /v1/check takes it (an Envoy descriptor's, docs/envoy.md); required.
	Key string `json:"key"`
	// Limit replaces the policy's limit; required, and within the policy's bounds.
	Limit int64 `json:"limit"`
	// Burst replaces a gcra policy's burst; omitted or 0 keeps the policy's. Refused for any other
	// algorithm.
	Burst int64 `json:"burst,omitempty"`
	// ExpiresIn is how long the override lasts, a duration such as "90m", "36h" or "7d", at most
	// 366d; omitted or "" for until deleted.
	ExpiresIn string `json:"expires_in,omitempty"`
	// Reason says why, for the audit record and the listing; at most MaxReasonLen bytes.
	Reason string `json:"reason,omitempty"`
}

// OverrideDeleteRequest is the JSON body of DELETE /v1/overrides.
type OverrideDeleteRequest struct {
	// Policy names the policy; required. It need not be loaded any more.
	Policy string `json:"policy"`
	// Key is the subject; required.
	Key string `json:"key"`
	// Reason says why, for the audit record; optional.
	Reason string `json:"reason,omitempty"`
}

// OverrideResponse is an override as the admin API answers it: by the subject's digest, never the
// subject. It is the body of a 200 answer of PUT /v1/overrides, and an element of a listing.
type OverrideResponse struct {
	Policy string `json:"policy"`
	// Digest names the subject: the digest its keys and the audit records hold.
	Digest string `json:"digest"`
	// Limit and Burst are the numbers in force for the subject (Burst 0: the policy's).
	Limit int64 `json:"limit"`
	Burst int64 `json:"burst"`
	// ExpiresInMS is the time left, in milliseconds, and ExpiresAt when it ends (RFC 3339); both
	// omitted for an override without expiry.
	ExpiresInMS int64  `json:"expires_in_ms,omitempty"`
	ExpiresAt   string `json:"expires_at,omitempty"`
	Reason      string `json:"reason,omitempty"`
	// Unused reports that the loaded configuration has no policy of this name (a reload removed
	// it): the override stays stored and decides nothing. Omitted when false.
	Unused bool `json:"unused,omitempty"`
}

// OverrideDeleteResponse is the JSON body of a 200 answer of DELETE /v1/overrides.
type OverrideDeleteResponse struct {
	// Deleted is true: the override is gone.
	Deleted bool   `json:"deleted"`
	Policy  string `json:"policy"`
}

// OverridesResponse is the JSON body of a 200 answer of GET /v1/overrides.
type OverridesResponse struct {
	Overrides []OverrideResponse `json:"overrides"`
	// NextCursor is the cursor of the next page; "" after the last.
	NextCursor string `json:"next_cursor"`
}

// The actions of overrides, as audit records and Options.OnChange name them.
const (
	// ActionOverrideSet is an override stored: PUT /v1/overrides.
	ActionOverrideSet = "override_set"
	// ActionOverrideDelete is an override deleted: DELETE /v1/overrides.
	ActionOverrideDelete = "override_delete"
)

// resultNone is the audit result of a delete that found no override: nothing changed.
const resultNone = "none"

// errNoOverride is the error a delete audits when there was no override.
var errNoOverride = errors.New("no override")

// setOverride serves PUT /v1/overrides: 200 and the OverrideResponse as stored, 400 naming the
// field for a bad body (an unknown policy included), nothing stored; 503 when the Store cannot
// store it. Each override the body allows is audited, refused or not.
func (h *Handler) setOverride(w http.ResponseWriter, r *http.Request, body []byte) {
	var req OverrideRequest
	if err := decodeBody(body, &req, "an override"); err != nil {
		msg := err.Error()
		for _, f := range []string{"window", "algorithm", "period", "rate"} {
			if strings.Contains(msg, `unknown field "`+f+`"`) {
				msg += `: an override changes the numbers only ("limit", "burst"), never the window or the algorithm`
			}
		}
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	expiresIn, err := parseExpiresIn(req.ExpiresIn)
	if err == nil {
		err = checkOverride(req.Policy, req.Key, req.Reason)
	}
	if err == nil && req.Limit < 1 {
		err = fmt.Errorf(`"limit" %d: want 1 or more, within the policy's bounds`, req.Limit)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	c := change{action: ActionOverrideSet, policy: req.Policy, subject: admit.Subject{ID: req.Key}, reason: req.Reason, client: clientAddr(r.RemoteAddr)}
	spec := service.OverrideSpec{Policy: req.Policy, Subject: c.subject, Limit: req.Limit, Burst: req.Burst, ExpiresIn: expiresIn, Reason: req.Reason}
	info, err := h.svc.SetOverride(r.Context(), spec)
	h.audit(r.Context(), c, err)
	if !h.failed(w, r, err) {
		writeJSON(w, http.StatusOK, overrideResponse(info, time.Now()))
	}
}

// deleteOverride serves DELETE /v1/overrides: 200 once the override is gone, 404 when there was
// none, 400 for a bad body, 503 when the Store cannot delete it. Each delete is audited.
func (h *Handler) deleteOverride(w http.ResponseWriter, r *http.Request, body []byte) {
	var req OverrideDeleteRequest
	if err := decodeBody(body, &req, "an override delete"); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := checkOverride(req.Policy, req.Key, req.Reason); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	c := change{action: ActionOverrideDelete, policy: req.Policy, subject: admit.Subject{ID: req.Key}, reason: req.Reason, client: clientAddr(r.RemoteAddr)}
	existed, err := h.svc.DeleteOverride(r.Context(), req.Policy, c.subject)
	if err == nil && !existed {
		h.audit(r.Context(), c, errNoOverride)
		writeError(w, http.StatusNotFound, fmt.Sprintf("no override of this key under policy %q", req.Policy))
		return
	}
	h.audit(r.Context(), c, err)
	if !h.failed(w, r, err) {
		writeJSON(w, http.StatusOK, OverrideDeleteResponse{Deleted: true, Policy: req.Policy})
	}
}

// listOverrides serves GET /v1/overrides?policy=P[&cursor=C][&n=N]: 200 and an OverridesResponse,
// 400 for a bad query, 503 when the Store cannot list.
func (h *Handler) listOverrides(w http.ResponseWriter, r *http.Request, _ []byte) {
	query, ok := strictQuery(w, r, "policy", "cursor", "n")
	if !ok {
		return
	}
	n := DefaultOverridePage
	if query.Has("n") {
		v, err := strconv.Atoi(query.Get("n"))
		if err != nil || v < 1 || v > MaxOverridePage {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("n %q: want 1-%d", query.Get("n"), MaxOverridePage))
			return
		}
		n = v
	}
	if query.Get("policy") == "" {
		writeError(w, http.StatusBadRequest, "policy is required: the policy whose overrides to list")
		return
	}
	page, next, err := h.svc.Overrides(r.Context(), query.Get("policy"), query.Get("cursor"), n)
	if h.failed(w, r, err) {
		return
	}
	now := time.Now()
	out := OverridesResponse{Overrides: make([]OverrideResponse, len(page)), NextCursor: next}
	for i, info := range page {
		out.Overrides[i] = overrideResponse(info, now)
	}
	writeJSON(w, http.StatusOK, out)
}

// overrideResponse returns info as the admin API answers it at now.
func overrideResponse(info service.OverrideInfo, now time.Time) OverrideResponse {
	o := info.Override
	out := OverrideResponse{Policy: info.Policy, Digest: info.Digest, Limit: o.Rate, Burst: o.Burst, Reason: o.Reason, Unused: info.Unused}
	if !o.Expires.IsZero() {
		out.ExpiresInMS = info.ExpiresIn(now).Milliseconds()
		out.ExpiresAt = o.Expires.UTC().Format(time.RFC3339Nano)
	}
	return out
}

// checkOverride checks the fields of an override's body beside the numbers: a policy, a key and
// a reason (checkChange). Its error names the field, for a 400.
func checkOverride(policy, key, reason string) error {
	if policy == "" {
		return errors.New(`"policy" is required: an override is of one policy`)
	}
	return checkChange(key, reason)
}

// parseExpiresIn returns the duration of an override's "expires_in": "" for none (0), a Go
// duration ("90m", "36h") or a whole number of days ("7d"), of 0 to service.MaxOverrideExpiry.
func parseExpiresIn(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int64
		n, err = strconv.ParseInt(days, 10, 64)
		if err == nil && (n < 0 || n > int64(service.MaxOverrideExpiry/(24*time.Hour))) {
			return 0, fmt.Errorf(`"expires_in" %q: want at most %dd`, s, service.MaxOverrideExpiry/(24*time.Hour))
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	switch {
	case err != nil:
		return 0, fmt.Errorf(`"expires_in" %q: want a duration such as "90m", "36h" or "7d"`, s)
	case d <= 0 || d > service.MaxOverrideExpiry:
		return 0, fmt.Errorf(`"expires_in" %q: want more than 0 and at most %dd; omit it for no expiry`, s, service.MaxOverrideExpiry/(24*time.Hour))
	case d%time.Millisecond != 0:
		return 0, fmt.Errorf(`"expires_in" %q: want a whole number of milliseconds`, s)
	}
	return d, nil
}
