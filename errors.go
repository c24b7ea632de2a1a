package admit

import "github.com/admit-dev/admit/internal/validate"

// The errors a Store or Limiter returns wrap one of these; match them with errors.Is.
var (
	// ErrInvalidLimit means a Limit is out of range or names an unknown algorithm. It is a caller's
	// mistake, found before any I/O; nothing was written.
	ErrInvalidLimit = validate.ErrInvalidLimit
	// ErrInvalidRequest means a key or cost is out of range. It is a caller's mistake, found before
	// any I/O; nothing was written.
	ErrInvalidRequest = validate.ErrInvalidRequest
	// ErrUnavailable means the backend could not decide: connection refused, timeout, a backend
	// error or corrupt state. Fail closed on it.
	ErrUnavailable = validate.ErrUnavailable
	// ErrCorruptState means a key held state that no algorithm writes (text, a non-positive count,
	// no expiry, a wrong type). The key is left unchanged, never repaired. An error matching
	// ErrCorruptState also matches ErrUnavailable.
	ErrCorruptState = validate.ErrCorruptState
)
