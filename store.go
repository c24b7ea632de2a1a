package admit

import "context"

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
	// TakeAll decides rs together, all-or-nothing (SPEC §2.6): each Request is decided on the state
	// before any of them, and only if every one is allowed is every one consumed; a rejection by any
	// writes nothing to any key. It fills ds, which must have len(rs) elements, with each Request's
	// Decision, and reports whether all were allowed. rs and ds must pass [ValidateAll]: 1 to MaxRequests
	// distinct keys in one hash slot, and one ID for all. On an error ds holds nothing useful.
	TakeAll(ctx context.Context, rs []Request, ds []Decision) (allowed bool, err error)
	// Release ends a lease of a concurrency Limit. No algorithm issues leases yet: every Store
	// answers errors.ErrUnsupported.
	Release(ctx context.Context, l Lease) error
	// Settle settles a reservation at the actual cost (SPEC §2.9). No algorithm issues reservations
	// yet: every Store answers errors.ErrUnsupported.
	Settle(ctx context.Context, res Reservation, actual int64) (Decision, error)
}

// A Lease is one unit of a concurrency Limit, held by an admitted request until it is released or
// expires (SPEC §2.5).
type Lease struct {
	// Key and Limit are those of the Request that acquired the lease.
	Key   string
	Limit Limit
	// Token identifies the lease among the key's others.
	Token string
}

// A Reservation is an admitted Request whose actual cost is known only later (SPEC §2.9).
type Reservation struct {
	// Request is the Request as taken; its Cost is the estimate reserved.
	Request Request
	// Token identifies the reservation, and the window it was taken in.
	Token string
}
