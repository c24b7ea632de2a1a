// Package validate holds the error kinds of package admit and the checks of a Request's own fields,
// which admit's Request.Validate and a Store's fast path (memstore's, under a Limit it remembers as
// valid) share, with the same errors. It imports only the standard library and internal leaves, so
// the root package may stand on it; admit re-declares the error kinds under their public names.
package validate

import (
	"fmt"

	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/slot"
)

// The error kinds that package admit declares as ErrInvalidLimit, ErrInvalidRequest,
// ErrUnavailable and ErrCorruptState: the same values, so errors.Is matches either name.
var (
	// ErrInvalidLimit means a Limit is out of range or names an unknown algorithm.
	ErrInvalidLimit error = &kindError{msg: "admit: invalid limit"}
	// ErrInvalidRequest means a key or cost is out of range.
	ErrInvalidRequest error = &kindError{msg: "admit: invalid request"}
	// ErrUnavailable means the backend could not decide.
	ErrUnavailable error = &kindError{msg: "admit: limiter unavailable"}
	// ErrCorruptState means a key held state that no algorithm writes; it also matches ErrUnavailable.
	ErrCorruptState error = &kindError{msg: "admit: corrupt limiter state", parent: ErrUnavailable}
	// ErrUndecided means a replicated decision (admit.Limit.Replicas) was not confirmed by its
	// replicas in time: its units stay consumed, nothing is admitted. It matches ErrUnavailable. The
	// backend answered, so guard's Breaker does not count it as a failure and FailOpen does not
	// decide it locally.
	ErrUndecided error = &kindError{msg: "admit: undecided: the replicas did not confirm the write in time; its units stay consumed, nothing is admitted", parent: ErrUnavailable}
	// ErrClientLate marks a Store's own command timeout that passed while the backend answered
	// other calls of the same Store: the client was late (its process descheduled, its callers
	// queued), not the backend. The error of such a call also matches context.DeadlineExceeded and
	// ErrUnavailable; guard's Breaker does not count it as a failure.
	ErrClientLate error = &kindError{msg: "admit: the client was late: other calls were answered meanwhile"}
)

// A LateVerdict is a Store's own timeout whose ErrClientLate verdict may wait for evidence that
// comes after its caller got the error: replies still unread in a starved process's socket when
// the call ended. guard's Breaker asks it through JudgeLate, so that its count waits, not its
// caller.
type LateVerdict interface {
	error
	// JudgeLate returns false when the verdict is known now (errors.Is(err, ErrClientLate) tells
	// it). Otherwise it returns true and calls report once, later, on another goroutine, with the
	// verdict: whether the client was late.
	JudgeLate(report func(late bool)) bool
}

// A kindError is a sentinel that may itself be a kind of another sentinel.
type kindError struct {
	msg    string
	parent error
}

func (e *kindError) Error() string { return e.msg }

// Is reports whether e is a kind of target.
func (e *kindError) Is(target error) bool { return e.parent != nil && target == e.parent }

// Request reports why a Request of key, cost and request ID id cannot be decided under a valid
// Limit of capacity units (concurrency for a Concurrency Limit), as an error matching
// ErrInvalidRequest, or nil: the checks of admit's Request.Validate once its Limit has passed.
func Request(key string, cost int64, id string, concurrency bool, capacity int64) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidRequest)
	case len(key) > bound.MaxKeyLen:
		return fmt.Errorf("%w: key of %d bytes exceeds %d", ErrInvalidRequest, len(key), bound.MaxKeyLen)
	case concurrency && (cost < 0 || cost > 1):
		return fmt.Errorf("%w: cost %d outside 0-1: a concurrency limit counts requests in flight, one lease each", ErrInvalidRequest, cost)
	case cost < 0 || cost > capacity:
		return fmt.Errorf("%w: cost %d outside 0-%d", ErrInvalidRequest, cost, capacity)
	case len(id) > bound.MaxIDLen:
		return fmt.Errorf("%w: request ID of %d bytes exceeds %d", ErrInvalidRequest, len(id), bound.MaxIDLen)
	case id != "" && !slot.HasTag(key) && !slot.CanTagWhole(key):
		return fmt.Errorf("%w: a request ID needs a key with a {hash tag}, or with no '}'", ErrInvalidRequest)
	}
	return nil
}

// ResetKeys reports why keys cannot be reset (Store.Reset), as an error matching ErrInvalidRequest,
// or nil: 1 to bound.MaxResetKeys keys, each of 1 to bound.MaxKeyLen bytes.
func ResetKeys(keys []string) error {
	if len(keys) == 0 || len(keys) > bound.MaxResetKeys {
		return fmt.Errorf("%w: reset of %d keys, want 1-%d", ErrInvalidRequest, len(keys), bound.MaxResetKeys)
	}
	for i, k := range keys {
		switch {
		case k == "":
			return fmt.Errorf("%w: reset key %d is empty", ErrInvalidRequest, i)
		case len(k) > bound.MaxKeyLen:
			return fmt.Errorf("%w: reset key %d of %d bytes exceeds %d", ErrInvalidRequest, i, len(k), bound.MaxKeyLen)
		}
	}
	return nil
}
