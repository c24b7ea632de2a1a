package admit

import (
	"errors"
	"strings"

	"github.com/admit-dev/admit/internal/validate"
)

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

// ClientMessage returns what to tell the client whose request err refuses, when err matches
// ErrInvalidRequest or ErrInvalidLimit: the kind of mistake and what is wrong — the field and its
// bound, such as "invalid request: cost 99 outside 0-3" — without the names of the packages that
// wrapped err on its way (no "memstore: ", "redisstore: " or "admit: "), and without whatever
// they put before it. For any other error, whose cause is for the server's log and not for a
// client, it returns "limiter unavailable"; for nil, "".
func ClientMessage(err error) string {
	if err == nil {
		return ""
	}
	for _, kind := range []error{ErrInvalidRequest, ErrInvalidLimit} {
		if !errors.Is(err, kind) {
			continue
		}
		msg, short := err.Error(), strings.TrimPrefix(kind.Error(), "admit: ")
		if i := strings.LastIndex(msg, kind.Error()); i >= 0 {
			return short + msg[i+len(kind.Error()):]
		}
		return short
	}
	return "limiter unavailable"
}
