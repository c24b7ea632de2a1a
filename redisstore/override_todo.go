package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/admit-dev/admit"
)

// TODO(override): the stubs of the Override methods, until they are built.

// SetOverride is not built yet.
func (s *Store) SetOverride(ctx context.Context, o admit.Override) error {
	return fmt.Errorf("redisstore: overrides: %w", errors.ErrUnsupported)
}

// Override is not built yet.
func (s *Store) Override(ctx context.Context, key string) (admit.Override, bool, error) {
	return admit.Override{}, false, fmt.Errorf("redisstore: overrides: %w", errors.ErrUnsupported)
}

// DeleteOverride is not built yet.
func (s *Store) DeleteOverride(ctx context.Context, key string) (bool, error) {
	return false, fmt.Errorf("redisstore: overrides: %w", errors.ErrUnsupported)
}

// Overrides is not built yet.
func (s *Store) Overrides(ctx context.Context, policy, cursor string, n int) ([]admit.Override, string, error) {
	return nil, "", fmt.Errorf("redisstore: overrides: %w", errors.ErrUnsupported)
}

// OverrideCount is not built yet.
func (s *Store) OverrideCount(ctx context.Context, policy string) (int64, error) {
	return 0, fmt.Errorf("redisstore: overrides: %w", errors.ErrUnsupported)
}
