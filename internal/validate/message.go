package validate

import (
	"errors"
	"strings"
)

// ClientMessage returns what to tell the client whose request err refuses, when err matches
// ErrInvalidRequest or ErrInvalidLimit: the kind of mistake and what is wrong - the field and its
// bound, such as "invalid request: cost 99 outside 0-3" - without the names of the packages that
// wrapped err on its way (no "memstore: ", "redisstore: " or "admit: "), and without whatever
// they put before it. For any other error, whose cause is for the server's log and not for a
// client, it returns "limiter unavailable"; for nil, "". The service, its transports and cmd/admit
// answer with it; a library user has the error itself.
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
