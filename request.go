package admit

import (
	"fmt"
	"time"

	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/slot"
	"github.com/admit-dev/admit/internal/validate"
)

// A Request asks for Cost units of Key under Limit.
//
// Cost 0 is a peek: it reports the state and consumes nothing. ID, if not empty, makes a retry
// idempotent (docs/keys.md, "Idempotency records"): a repeat of an admitted request with the same ID, keys, Limits and costs,
// within the longest Period of the request, returns the first Decisions marked Replayed and consumes
// nothing. The ID is scoped to the keys' hash slot — the slot subject of a [KeyBuilder] key, by
// default the subject itself — and reusing it there for a different request is an invalid request.
type Request struct {
	// Key is the key whose state decides: 1 to 512 bytes, normally made by a KeyBuilder.
	Key string
	// Limit is the policy the Key is decided under.
	Limit Limit
	// Cost is the number of units asked for, 0 … Limit.Capacity(): the Rate, or a GCRA Limit's Burst;
	// under a Concurrency Limit, 0 (a peek) or 1 (one lease: one request in flight), whatever its
	// Rate. Any other Cost is an invalid request, at every entry point that takes a cost.
	Cost int64
	// ID identifies the request for idempotent retries; empty for none. At most 128 bytes.
	ID string
	// OverrideKey is the key of the subject's [Override] under this policy, in Key's hash slot, or
	// empty for none: the Store reads it in the same call as Key's state and, when an unexpired
	// Override is stored there, decides under its numbers (Decision.Overridden). [Requests] sets it;
	// Validate refuses one that is not an override key in Key's hash slot.
	OverrideKey string
}

// Validate reports why r cannot be decided, as an error matching [ErrInvalidLimit] or
// [ErrInvalidRequest], or nil. Every Store calls it, or [ValidateAll], before any I/O.
func (r *Request) Validate() error {
	if err := r.Limit.Validate(); err != nil {
		return err
	}
	return r.validateKnownLimit()
}

// validateKnownLimit is [Request.Validate] for a Request whose Limit is known to be valid: it checks
// only the Request's own fields, against the Limit, with Validate's errors.
func (r *Request) validateKnownLimit() error {
	if err := validate.Request(r.Key, r.Cost, r.ID, r.Limit.Algorithm == Concurrency, r.Limit.Capacity()); err != nil {
		return err
	}
	return validate.RequestOverrideKey(r.Key, r.OverrideKey)
}

// ValidateAll reports why rs cannot be decided together by TakeAll into ds, as an error matching
// [ErrInvalidLimit] or [ErrInvalidRequest], or nil: each Request must be valid; there must be 1 to
// 16 of them, with distinct keys in one Redis Cluster hash slot (CRC16 of the key's {hash tag}, as
// CLUSTER KEYSLOT computes it), and one ID (or
// none) for all; and ds must have a Decision for each.
func ValidateAll(rs []Request, ds []Decision) error {
	switch {
	case len(rs) == 0 || len(rs) > bound.MaxRequests:
		return fmt.Errorf("%w: %d requests; want 1-%d", ErrInvalidRequest, len(rs), bound.MaxRequests)
	case len(ds) != len(rs):
		return fmt.Errorf("%w: %d Decisions for %d Requests", ErrInvalidRequest, len(ds), len(rs))
	}
	if len(rs) == 1 {
		return rs[0].Validate()
	}
	first := slot.Of(rs[0].Key)
	for i := range rs {
		r := &rs[i]
		if err := r.Validate(); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		if i == 0 {
			continue
		}
		if s := slot.Of(r.Key); s != first {
			return fmt.Errorf("%w: request %d: key in hash slot %d, request 0's in %d; keys decided together must share a slot (use one slot subject)",
				ErrInvalidRequest, i, s, first)
		}
		if r.ID != rs[0].ID {
			return fmt.Errorf("%w: request %d: ID differs from request 0's; requests decided together share one ID", ErrInvalidRequest, i)
		}
		for j := range i {
			if rs[j].Key == r.Key {
				return fmt.Errorf("%w: requests %d and %d have the same key", ErrInvalidRequest, j, i)
			}
		}
	}
	return nil
}

// A Decision is the outcome of one Request. Being over the limit is a Decision with Allowed false,
// never an error. A Decision marked Degraded was made by a process's local limiter while the Store
// could not decide (a policy that fails open, docs/failure-modes.md): it is not a global guarantee.
type Decision struct {
	// Allowed reports whether the request was admitted. A peek (cost 0) is allowed unless the key
	// is already over its limit.
	Allowed bool
	// Limit is the Limit that decided; its Name names the policy. Under an Override it is the
	// Request's Limit with the Override's numbers.
	Limit Limit
	// Overridden reports that an Override's numbers decided (Request.OverrideKey), not the Limit's.
	Overridden bool
	// Remaining is the number of units still available in the current window.
	Remaining int64
	// RetryAfter is 0 when Allowed; otherwise the time after which the same request could first be
	// admitted if no one else consumed meanwhile. It is a lower bound, never a reservation.
	RetryAfter time.Duration
	// ResetAfter is the time until the key returns to its full allowance.
	ResetAfter time.Duration
	// Replayed reports whether this is the recorded Decision of an earlier request with the same ID:
	// nothing was consumed this time.
	Replayed bool
	// Degraded reports that a local limiter decided this Request because the Store could not: the
	// decision is per process, not global (docs/failure-modes.md). Limit is then the local Limit that decided —
	// its Rate the policy's local limit — and Remaining, RetryAfter and ResetAfter are the local
	// limiter's (package guard's FailOpen, docs/failure-modes.md).
	Degraded bool
	// Token names what an admitted Request that consumed holds until it ends; 0 for nothing (a
	// rejection, a peek, a Replayed Decision — a replay consumed nothing and cannot be settled).
	// Under a Concurrency Limit it is the lease: pass it in a [Lease] to Store.Release. Under any
	// other it names the window the units were counted in, so that a [Reservation] can be settled in
	// it, or 0 where the Store cannot settle. Tokens are opaque, and meaningful only to the Store
	// that made them (docs/reserve-settle.md).
	Token uint64
}

// Deciding returns the index of the Decision among ds that decides them together, considering the
// Decisions of enforced Limits only (not Limit.Shadow), or all of them when every one is in shadow
// mode: when any is rejected, the rejected one with the longest RetryAfter (the one to wait for);
// otherwise the one with the least Remaining (the nearest to its limit). Ties go to the first. It
// returns -1 for no ds.
func Deciding(ds []Decision) int {
	enforced := false
	for i := range ds {
		enforced = enforced || !ds[i].Limit.Shadow
	}
	best := -1
	for i := range ds {
		d := &ds[i]
		switch {
		case enforced && d.Limit.Shadow:
		case best < 0:
			best = i
		case !d.Allowed && (ds[best].Allowed || d.RetryAfter > ds[best].RetryAfter):
			best = i
		case d.Allowed && ds[best].Allowed && d.Remaining < ds[best].Remaining:
			best = i
		}
	}
	return best
}
