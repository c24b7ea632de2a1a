package memstore

import (
	"context"
	"fmt"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/validate"
)

// Reset deletes the entries of keys, whatever their algorithm, each under its shard's lock: the next
// Take of one finds it missing. Keys without an entry are fine; the idempotency records of requests on
// them are kept under keys of their own, and stay. Invalid keys
// (see admit.Store) are reported as an error matching admit.ErrInvalidRequest before anything is
// deleted; a done ctx deletes nothing and returns an error matching admit.ErrUnavailable and
// ctx.Err(). See admit.Store for leases and reservations of the keys.
func (s *Store) Reset(ctx context.Context, keys []string) error {
	if err := validate.ResetKeys(keys); err != nil {
		return fmt.Errorf("memstore: reset: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: reset: %w: %w", admit.ErrUnavailable, err)
	}
	for _, key := range keys {
		sh := s.tab.shard(key)
		sh.mu.Lock()
		if i, ok := sh.find(key, sh.hash(key)); ok {
			sh.remove(i)
		}
		sh.mu.Unlock()
	}
	return nil
}
