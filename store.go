package admit

import (
	"context"
	"fmt"

	"github.com/admit-dev/admit/internal/bound"
)

// A Store keeps limit state for many keys and decides requests atomically. Implementations are safe
// for concurrent use.
//
// Every operation is on this one interface, so a decorator (metrics, a circuit breaker, a local
// cache) forwards all of them. A Store that cannot do an operation answers an error matching
// errors.ErrUnsupported.
//
// Being over the limit is a Decision with Allowed false. An error means the Store could not decide;
// it matches ErrInvalidLimit or ErrInvalidRequest (nothing was attempted), or ErrUnavailable.
type Store interface {
	// Take decides r: it consumes r.Cost units of r.Key under r.Limit if they are available and
	// reports the Decision. A rejected Take writes nothing. Take(ctx, r) decides exactly as
	// TakeAll(ctx, []Request{r}, ds) does.
	Take(ctx context.Context, r Request) (Decision, error)
	// TakeAll decides rs together, all-or-nothing (G2 of docs/guarantees.md): each Request is decided on the state
	// before any of them, and only if every one is allowed is every one consumed; a rejection by any
	// writes nothing to any key. A Request whose Limit is in shadow mode (Limit.Shadow) takes no part
	// in all-or-nothing: its rejection rejects nothing and writes nothing, and, when the others are
	// admitted, it is consumed if it fits. It fills ds, which must have len(rs) elements, with each
	// Request's Decision, and reports whether all were allowed but those in shadow mode. rs and ds
	// must pass [ValidateAll]: 1 to 16 distinct keys in one hash slot, and one ID for all. On
	// an error ds holds nothing useful. TakeAll must not keep rs or ds once it returns: the caller
	// may reuse them ([Limiter.Take] does). A replay reports a shadow Request that would have limited as
	// allowed: its record keeps Remaining and ResetAfter only.
	TakeAll(ctx context.Context, rs []Request, ds []Decision) (allowed bool, err error)
	// Release ends the lease l of a Concurrency Limit (docs/concurrency.md) by compare-and-delete: it removes
	// l.Token from l.Key's leases, and nothing else. Releasing a lease that has expired, or was
	// released already, does nothing and returns nil. l must pass [Lease.Validate].
	Release(ctx context.Context, l Lease) error
	// Settle settles res at its actual cost (docs/reserve-settle.md): when actual is below the units reserved
	// (res.Request.Cost) it gives the difference back to the window res was counted in, if that
	// window is still the key's — never to a later one; when above, it consumes as much of the
	// difference as the key has left now. It reports the key's state after, Allowed false when an
	// overrun did not fit whole. A reservation never settled stays consumed. res must pass
	// [Reservation.Validate], before any I/O (it refuses Concurrency, whose leases are released); a
	// Store that cannot settle an algorithm answers errors.ErrUnsupported (memstore and redisstore
	// settle every other). Settle keeps no record of settlements: settling one reservation twice
	// settles it twice ([Limiter.Reserve]'s settle settles once). Settle ignores Overrides: it
	// settles under res.Request.Limit, whatever Override decided the Take (a GCRA bucket an Override
	// left fuller than that Limit holds is then corrupt state, docs/gcra.md#overrides-the-clamp).
	Settle(ctx context.Context, res Reservation, actual int64) (Decision, error)
	// Reset deletes the state of keys, whatever the algorithm that wrote it: the next Take of one
	// finds it missing, with its full allowance. Keys without state are fine; idempotency records
	// stay (a retry of an admitted request still replays). keys must hold 1 to 1,024 keys of 1 to 512
	// bytes each, checked before any I/O (ErrInvalidRequest); on ErrUnavailable, some keys may have
	// been reset and not others: Reset again. The leases of a Concurrency key reset are gone: their
	// requests still in flight are not counted, so the key may hold up to its limit more in flight
	// for a Period at most, and their later Release does nothing (compare-and-delete). A Reservation
	// taken before is settled on the key as it is now: a refund gives nothing back to a window the
	// reset ended (docs/concurrency.md, docs/reserve-settle.md). Reset deletes state only: a
	// subject's Override stays, and decides the reset key's next Take (delete it with
	// DeleteOverride).
	Reset(ctx context.Context, keys []string) error
	// SetOverride stores o at o.Key, replacing any Override there: from then on a Request whose
	// OverrideKey is o.Key is decided under o's numbers, by every process sharing the Store, until
	// o.Expires. o must pass the checks of an Override — a key made by KeyBuilder.OverrideKey, Rate
	// 1 to the largest Rate, Burst 0 to the largest Rate, Reason at most 200 bytes, Expires zero or
	// after now — checked before any I/O (ErrInvalidRequest).
	SetOverride(ctx context.Context, o Override) error
	// Override returns the Override stored at key and true, or false when there is none (an
	// expired Override is none). Stored bytes that no SetOverride writes are an error matching
	// ErrCorruptState; the Store changes nothing.
	Override(ctx context.Context, key string) (Override, bool, error)
	// DeleteOverride deletes the Override at key and reports whether there was one: the next
	// Request with that OverrideKey is decided under its own Limit.
	DeleteOverride(ctx context.Context, key string) (bool, error)
	// Overrides lists the unexpired Overrides of the policy named policy in key order: at most n
	// (1 to 1,000) of those after cursor ("" for the first page), and the cursor of the next page,
	// "" after the last. A listing holds one page in memory at a time, whatever the number of
	// Overrides; an Override set or deleted during a listing may or may not be in it, every other is
	// listed exactly once.
	Overrides(ctx context.Context, policy, cursor string, n int) ([]Override, string, error)
	// OverrideCount returns the number of Overrides of the policy named policy, without listing
	// them: the unexpired ones, and at most those that expired since the Store last tidied.
	OverrideCount(ctx context.Context, policy string) (int64, error)
}

// A Lease is one unit of a Concurrency Limit, held by an admitted request until it is released or
// its Limit's Period, the lease TTL, has passed (docs/concurrency.md).
type Lease struct {
	// Key and Limit are those of the Request that acquired the lease.
	Key   string
	Limit Limit
	// Token identifies the lease among the key's others: the Decision's Token.
	Token uint64
}

// Validate reports why l cannot be released, as an error matching [ErrInvalidLimit] or
// [ErrInvalidRequest], or nil.
func (l *Lease) Validate() error {
	r := Request{Key: l.Key, Limit: l.Limit}
	if err := r.Validate(); err != nil {
		return err
	}
	switch {
	case l.Limit.Algorithm != Concurrency:
		return fmt.Errorf("%w: a lease of a %v limit; only concurrency limits lease", ErrInvalidRequest, l.Limit.Algorithm)
	case l.Token == 0:
		return fmt.Errorf("%w: a lease needs the token of an admitted request", ErrInvalidRequest)
	}
	return nil
}

// A Reservation is an admitted Request whose actual cost is known only later (docs/reserve-settle.md): reserve
// an estimate with Take, then Settle the actual cost.
type Reservation struct {
	// Request is the Request as taken; its Cost is the estimate reserved.
	Request Request
	// Token is the Decision's Token: it names the window the reservation was counted in.
	Token uint64
}

// Validate reports why res cannot be settled at actual, as an error matching [ErrInvalidLimit] or
// [ErrInvalidRequest], or nil.
func (res *Reservation) Validate(actual int64) error {
	r := res.Request
	r.ID = "" // a reservation's window is its own; its request ID played its part in Take
	if err := r.Validate(); err != nil {
		return err
	}
	switch {
	case r.Limit.Algorithm == Concurrency:
		return fmt.Errorf("%w: a concurrency lease is released, not settled", ErrInvalidRequest)
	case r.Cost == 0 || res.Token == 0:
		return fmt.Errorf("%w: a reservation needs the cost and token of an admitted request", ErrInvalidRequest)
	case actual < 0 || actual > bound.MaxRate:
		return fmt.Errorf("%w: actual cost %d outside 0-%d", ErrInvalidRequest, actual, bound.MaxRate)
	}
	return nil
}
