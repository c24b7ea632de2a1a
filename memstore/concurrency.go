package memstore

import (
	"context"
	"fmt"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
)

// The kernel of admit.Concurrency: e.sliding.leases holds the key's leases, ordered by expiry, Unix
// µs; the entry is live until its last lease expires (docs/concurrency.md, algo.Concurrency). An admission
// removes the leases that have expired and adds its own, in place, as the Redis module does; a
// rejection touches nothing. Release removes one lease. A key holds at most 100,000
// leases, 16 bytes each.

func concurrencyLive(e *entry, now instant) bool { return e.deadline > now.mono }

func concurrencyCheck(x *sliding, lim *admit.Limit, now instant) error {
	if err := algo.CheckConcurrency(x.leases, now.unixMicro); err != nil {
		return fmt.Errorf("%w (%d leases at %d, Limit %v)", err, len(x.leases), now.unixMicro, *lim)
	}
	return nil
}

func concurrencyDecide(e *entry, x *sliding, lim *admit.Limit, cost int64, now instant, d *admit.Decision) write {
	var leases []algo.Lease
	if e != nil {
		leases = x.leases
	}
	res := algo.Concurrency(leases, now.unixMicro, lim.Rate, lim.Period, cost)
	decided(d, lim, res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter)
	return writeOf(res.Write, e)
}

// concurrencyApply adds the lease named token.
func concurrencyApply(e *entry, x **sliding, w write, lim *admit.Limit, cost int64, now instant, token uint64) {
	if w == writeCreate {
		*x = &sliding{leases: make([]algo.Lease, 0, 1)}
	}
	st := *x
	res := algo.Concurrency(st.leases, now.unixMicro, lim.Rate, lim.Period, cost)
	if res.Write == algo.WriteNone {
		return
	}
	leases := algo.AddLease(st.leases, res.Trim, algo.Lease{Token: token, Expiry: res.Expiry})
	st.leases = leases
	e.deadline = now.monoAt(leases[len(leases)-1].Expiry)
}

// Release ends the lease l (docs/concurrency.md): it removes l.Token from the leases of l.Key, if the key
// holds it, under the lock of the key's shard. Releasing a lease that has expired, or was released,
// does nothing and returns nil. An invalid l (see admit.Lease.Validate) is reported as an error
// matching admit.ErrInvalidLimit or admit.ErrInvalidRequest; a key that holds another algorithm's
// live state, as one matching admit.ErrCorruptState. If ctx is already done, Release does nothing
// and returns an error that matches both admit.ErrUnavailable and ctx.Err().
func (s *Store) Release(ctx context.Context, l admit.Lease) error {
	if err := l.Validate(); err != nil {
		return fmt.Errorf("memstore: release: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: release: %w: %w", admit.ErrUnavailable, err)
	}
	sh := s.tab.shard(l.Key)
	read := s.tab.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.release(l.Key, l.Token, s.tab.instant(sh.at(read)))
}

// release removes the lease named token from key's entry, and the entry once it holds no lease;
// otherwise the entry ends when its last remaining lease expires. The caller holds sh.mu.
func (sh *shard) release(key string, token uint64, now instant) error {
	i, ok := sh.find(key, sh.hash(key))
	if !ok {
		return nil
	}
	e := &sh.entries[i]
	switch {
	case e.deadline <= now.mono:
		return nil // ended: reclaim removes it
	case e.alg != admit.Concurrency:
		what := "a request record"
		if e.alg != 0 {
			what = e.alg.String() + " state"
		}
		return fmt.Errorf("memstore: release: %w: key %q holds %s", admit.ErrCorruptState, key, what)
	}
	x := sh.ext(e)
	leases, found := algo.RemoveLease(x.leases, token)
	if !found {
		return nil
	}
	x.leases = leases
	if len(leases) == 0 {
		sh.remove(i) // as Redis deletes an emptied sorted set
		return nil
	}
	e.deadline = now.monoAt(leases[len(leases)-1].Expiry) // the key is as if the lease had never been
	return nil
}
