package admit

import (
	"context"
	"fmt"
)

// Requests completes rs, whose Limits are set, as the Requests of s at cost n with request ID id:
// the one place where a Limiter, package service and Envoy's rate limit service make Requests. The
// key of rs[i] is made by keys in version versions[i], or versions[0] for every Request when
// versions has one element. Each Limit must have passed [Limit.Validate]; each Request is then
// checked against its Limit (as [Request.Validate] does) before any I/O, and Requests stops at
// the first that fails, with that error unchanged: the Request's Key is set when its key was made
// and the check failed, empty when its key could not be made.
func Requests(rs []Request, keys *KeyBuilder, versions []string, s Subject, n int64, id string) error {
	if len(versions) != 1 && len(versions) != len(rs) {
		return fmt.Errorf("%w: %d key versions for %d requests", ErrInvalidRequest, len(versions), len(rs))
	}
	for i := range rs {
		r := &rs[i]
		key, err := keys.Key(r.Limit, versions[min(i, len(versions)-1)], s)
		if err != nil {
			return err
		}
		r.Key, r.Cost, r.ID = key, n, id
		// Before the Store, so that a decorator in between need not; the Limit is valid already.
		if err := r.validateKnownLimit(); err != nil {
			return err
		}
	}
	return nil
}

// Decide decides rs together on store, all-or-nothing, fills ds (len(rs) elements) with their
// Decisions, and reports whether all were allowed but those in shadow mode: store.TakeAll. It is
// the one step by which a Limiter of several Limits, package service (its checks, the JSON API,
// forward-auth, the proxy) and Envoy's rate limit service reach a Store; [Hold] and
// [Limiter.Admit] decide through it too. A Limiter of one Limit calls store.Take, which decides
// exactly alike.
func Decide(ctx context.Context, store Store, rs []Request, ds []Decision) (allowed bool, err error) {
	return store.TakeAll(ctx, rs, ds)
}
