package admin

import (
	"context"
	"errors"
	"log/slog"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
)

// The actions of admin changes, as audit records and Options.OnChange name them.
const (
	// ActionReset is a subject's state deleted: POST /v1/reset.
	ActionReset = "reset"
)

// Actions returns every action a Handler may report to Options.OnChange.
func Actions() []string { return []string{ActionReset, ActionOverrideSet, ActionOverrideDelete} }

// The results of an audit record beside "ok": the class of the error that refused a change.
const (
	resultOK            = "ok"
	resultUnknownPolicy = "unknown_policy"
	resultUnknownTier   = "unknown_tier"
	resultInvalid       = "invalid"
	resultUnavailable   = "unavailable"
)

// A change is one admin change, as its audit record tells it.
type change struct {
	action  string
	policy  string // "" for every policy
	subject admit.Subject
	reason  string // "" for none given
	client  string // the client address, as clientAddr makes it
}

// audit logs the record of c at Info, "admin change", with its result: "ok" for a nil err, else
// err's class; and reports a change made to OnChange. The subject is logged as its digest
// (service.Service.SubjectDigest; for an override, service.Service.OverrideDigest, the digest its
// listing shows), never as itself.
func (h *Handler) audit(ctx context.Context, c change, err error) {
	digest, derr := h.svc.SubjectDigest(c.subject)
	if c.action == ActionOverrideSet || c.action == ActionOverrideDelete {
		digest, derr = h.svc.OverrideDigest(c.policy, c.subject)
	}
	if derr != nil {
		digest = "" // an invalid subject has no digest; it is not logged either
	}
	attrs := []slog.Attr{
		slog.String("action", c.action),
		slog.String("policy", c.policy),
		slog.String("subject_digest", digest),
	}
	if c.reason != "" {
		attrs = append(attrs, slog.String("reason", c.reason))
	}
	attrs = append(attrs, slog.String("client", c.client), slog.String("result", resultOf(err)))
	h.logger.LogAttrs(ctx, slog.LevelInfo, "admin change", attrs...)
	if err == nil {
		h.onChange(c.action)
	}
}

// resultOf returns the result of a change that err refused: its class, or "ok" for nil.
func resultOf(err error) string {
	switch {
	case err == nil:
		return resultOK
	case errors.Is(err, errNoOverride):
		return resultNone
	case errors.Is(err, service.ErrUnknownPolicy):
		return resultUnknownPolicy
	case errors.Is(err, policy.ErrUnknownTier):
		return resultUnknownTier
	case errors.Is(err, admit.ErrInvalidRequest), errors.Is(err, admit.ErrInvalidLimit):
		return resultInvalid
	default:
		return resultUnavailable
	}
}
