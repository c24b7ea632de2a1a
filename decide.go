package admit

import "fmt"

// Requests completes rs, whose Limits are set, as the Requests of s at cost n with request ID id:
// the one place where a Limiter and package service (for every entry point of admit serve) make
// Requests. The key of rs[i] is made by keys in version versions[i], or versions[0] for every
// Request when versions has one element, and its OverrideKey is keys' OverrideKey of its Limit's
// Name and s, so that every entry point decides under the subject's [Override] when one is set
// (both keys are one allocation). Each Limit must have passed [Limit.Validate]; each
// Request is then checked against its Limit (as [Request.Validate] does) before any I/O, and
// Requests stops at the first that fails, with that error unchanged: the Request's Key is set
// when its key was made and the check failed, empty when its key could not be made.
func Requests(rs []Request, keys *KeyBuilder, versions []string, s Subject, n int64, id string) error {
	if len(versions) != 1 && len(versions) != len(rs) {
		return fmt.Errorf("%w: %d key versions for %d requests", ErrInvalidRequest, len(versions), len(rs))
	}
	for i := range rs {
		r := &rs[i]
		key, okey, err := keys.keys(r.Limit, versions[min(i, len(versions)-1)], s)
		if err != nil {
			return err
		}
		r.Key, r.OverrideKey, r.Cost, r.ID = key, okey, n, id
		// Before the Store, so that a decorator in between need not; the Limit is valid already.
		if err := r.validateKnownLimit(); err != nil {
			return err
		}
	}
	return nil
}
