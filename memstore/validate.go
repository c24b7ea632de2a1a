package memstore

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
	"github.com/admit-dev/admit/internal/validate"
)

// validLimitSlots is the number of Limits a Store remembers as valid: more than the policies of
// most deployments.
const validLimitSlots = 64

// validLimits remembers Limits that have passed admit.Limit.Validate, so that a Take under a Limit
// seen before compares it with the one remembered instead of validating it again: validation takes
// 64-bit divisions for a GCRA Limit and a pass over the policy name, a comparison a few loads. The
// verdict depends on the Limit's value alone, so an equal Limit is as valid as the one remembered.
//
// Each slot is filled once, by the first valid Limit that hashes to it, and never replaced: a Store
// used under ever new Limits (a Rate per tenant, say) allocates at most validLimitSlots copies, and
// validates the Limits it cannot remember on every call, as without the cache. It is safe for
// concurrent use without a lock.
type validLimits struct {
	slots [validLimitSlots]atomic.Pointer[knownLimit]
}

// A knownLimit is a Limit remembered as valid, with the figures a decision under it needs, which
// its Limit alone determines and which never change: a GCRA Limit's (algo.NewGCRAParams), computed
// once instead of on every decision. Take's fast path reads them without a lock.
type knownLimit struct {
	admit.Limit
	gcra algo.GCRAParams // the figures of a GCRA Limit; zero for any other
}

// validate reports why r cannot be decided, exactly as r.Validate does, or nil: only the Limit's
// validation is remembered; the Request's own fields are checked on every call. It also returns the
// remembered Limit equal to r's, or nil when r's is not (or not yet) remembered.
func (c *validLimits) validate(r *admit.Request) (*knownLimit, error) {
	lim := &r.Limit
	slot := &c.slots[limitSlot(lim)]
	if known := slot.Load(); known != nil && sameLimit(&known.Limit, lim) {
		if err := validate.Request(r.Key, r.Cost, r.ID, lim.Algorithm == admit.Concurrency, lim.Capacity()); err != nil {
			return known, err
		}
		return known, validate.RequestOverrideKey(r.Key, r.OverrideKey)
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if err := notReplicated(lim); err != nil {
		return nil, err // never remembered: a remembered Limit is one a Take may decide
	}
	if slot.Load() == nil {
		// The copy owns its name: a caller's string might share bytes it later changes (unsafe).
		known := &knownLimit{Limit: *lim}
		known.Name, known.Tier = strings.Clone(known.Name), strings.Clone(known.Tier)
		if lim.Algorithm == admit.GCRA {
			known.gcra = algo.NewGCRAParams(*lim)
		}
		slot.CompareAndSwap(nil, known)
	}
	return nil, nil
}

// limitSlot returns the slot of validLimits that lim is remembered in.
func limitSlot(lim *admit.Limit) uint64 {
	h := uint64(lim.Rate) ^ uint64(lim.Period)>>20 ^ uint64(lim.Burst)<<17 ^
		uint64(lim.Algorithm)<<40 ^ uint64(len(lim.Name))<<50
	return (h * 0x9e3779b97f4a7c15) >> (64 - 6) // 6 bits: validLimitSlots
}

// sameLimit reports whether a and b are equal Limits, as a == b does, field by field: cheaper than
// the comparison the compiler makes for ==, a call. TestSameLimitComparesEveryField keeps the list
// whole.
func sameLimit(a, b *admit.Limit) bool {
	return a.Rate == b.Rate && a.Period == b.Period && a.Burst == b.Burst && a.Algorithm == b.Algorithm &&
		a.Aligned == b.Aligned && a.Shadow == b.Shadow && a.Name == b.Name && a.Tier == b.Tier &&
		a.Replicas == b.Replicas && a.ReplicaTimeout == b.ReplicaTimeout
}

// notReplicated reports lim's replicated durability (admit.Limit.Replicas) as an error matching
// admit.ErrInvalidLimit, or nil: a Store in one process has no replica to confirm a write, and
// its state goes with the process, so it cannot give the guarantee the Limit asks for.
func notReplicated(lim *admit.Limit) error {
	if lim.Replicas == 0 {
		return nil
	}
	return fmt.Errorf("%w: replicas %d: durability replicated needs Redis replicas to confirm each write, and memstore's state lives in this process", admit.ErrInvalidLimit, lim.Replicas)
}
