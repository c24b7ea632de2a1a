package validate

import (
	"fmt"
	"strings"
	"time"

	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/slot"
)

// MaxReasonLen is the longest reason an Override keeps, in bytes.
const MaxReasonLen = 200

// MaxOverridePage is the most Overrides one page of a listing holds.
const MaxOverridePage = 1000

// Override reports why an Override of key, rate, burst, expires and reason cannot be stored at
// now, as an error matching ErrInvalidRequest naming the field, or nil: the checks every Store
// makes in SetOverride before any I/O.
func Override(key string, rate, burst int64, expires time.Time, reason string, now time.Time) error {
	if err := OverrideKey(key); err != nil {
		return err
	}
	switch {
	case rate < 1 || rate > bound.MaxRate:
		return fmt.Errorf("%w: override limit %d outside 1-%d", ErrInvalidRequest, rate, bound.MaxRate)
	case burst < 0 || burst > bound.MaxRate:
		return fmt.Errorf("%w: override burst %d outside 0-%d", ErrInvalidRequest, burst, bound.MaxRate)
	case len(reason) > MaxReasonLen:
		return fmt.Errorf("%w: override reason of %d bytes exceeds %d", ErrInvalidRequest, len(reason), MaxReasonLen)
	case !expires.IsZero() && !expires.After(now):
		return fmt.Errorf("%w: override expires at %v, not after now", ErrInvalidRequest, expires.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// OverrideKey reports why key cannot be the key of an Override, as an error matching
// ErrInvalidRequest, or nil: it must be 1 to bound.MaxKeyLen bytes of the form
// rl:<policy>:o:{<tag>}..., as admit's KeyBuilder.OverrideKey makes.
func OverrideKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty override key", ErrInvalidRequest)
	case len(key) > bound.MaxKeyLen:
		return fmt.Errorf("%w: override key of %d bytes exceeds %d", ErrInvalidRequest, len(key), bound.MaxKeyLen)
	case OverridePolicy(key) == "" || !slot.HasTag(key):
		return fmt.Errorf("%w: override key %q is not of the form rl:<policy>:o:{<subject>}", ErrInvalidRequest, key)
	}
	return nil
}

// OverridePolicy returns the policy name of an override key rl:<policy>:o:{...}, or "" when key is
// not of that form.
func OverridePolicy(key string) string {
	rest, ok := strings.CutPrefix(key, "rl:")
	if !ok {
		return ""
	}
	policy, rest, ok := strings.Cut(rest, ":")
	if !ok || policy == "" || !strings.HasPrefix(rest, "o:{") {
		return ""
	}
	return policy
}

// OverridePrefix returns the prefix every override key of the policy named policy starts with.
func OverridePrefix(policy string) string { return "rl:" + policy + ":o:" }

// OverridePage reports why a listing of the Overrides of policy from cursor in pages of n cannot
// be made, as an error matching ErrInvalidRequest, or nil: policy must be a policy name, n 1 to
// MaxOverridePage, and cursor empty or an override key of policy.
func OverridePage(policy, cursor string, n int) error {
	switch {
	case policy == "" || len(policy) > bound.MaxNameLen || strings.ContainsAny(policy, ":{}"):
		return fmt.Errorf("%w: override listing of policy %q", ErrInvalidRequest, policy)
	case n < 1 || n > MaxOverridePage:
		return fmt.Errorf("%w: override page of %d; want 1-%d", ErrInvalidRequest, n, MaxOverridePage)
	case cursor != "" && OverridePolicy(cursor) != policy:
		return fmt.Errorf("%w: override cursor is not one of policy %q", ErrInvalidRequest, policy)
	}
	return nil
}

// RequestOverrideKey reports why overrideKey cannot be the OverrideKey of a Request of key, as an
// error matching ErrInvalidRequest, or nil: it is empty, or an override key (OverrideKey) in key's
// Redis Cluster hash slot, so that a Store reads both in one call.
func RequestOverrideKey(key, overrideKey string) error {
	if overrideKey == "" {
		return nil
	}
	if err := OverrideKey(overrideKey); err != nil {
		return err
	}
	if slot.Tag(key) != slot.Tag(overrideKey) && slot.Of(key) != slot.Of(overrideKey) {
		return fmt.Errorf("%w: override key in hash slot %d, the key's in %d: want KeyBuilder.OverrideKey of the key's subject", ErrInvalidRequest, slot.Of(overrideKey), slot.Of(key))
	}
	return nil
}
