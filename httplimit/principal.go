package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/admit-dev/admit"
)

// ErrMisconfigured is the error a [SubjectFunc] wraps to say that the server, not the request, is
// at fault, such as a route limited by principal that no authentication middleware ran before: the
// middleware answers 500 Internal Server Error, as for an invalid limit, and logs it at ERROR. No
// retry of the request can fix it, and admitting it would be a silent pass-through.
var ErrMisconfigured = errors.New("httplimit: server misconfigured")

// principalKey is the context key of the principal that WithPrincipal records.
type principalKey struct{}

// WithPrincipal returns a copy of ctx that carries id, the authenticated principal of a request
// (a user or API client ID, say), for [Principal] to limit the request as. Call it in your
// authentication middleware, once the credential is verified, and pass the request on with
// r.WithContext. An empty id records no principal.
func WithPrincipal(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, principalKey{}, id)
}

// PrincipalFrom returns the principal that [WithPrincipal] recorded in ctx, and reports whether
// there is one (an empty one is none).
func PrincipalFrom(ctx context.Context) (id string, ok bool) {
	id, _ = ctx.Value(principalKey{}).(string)
	return id, id != ""
}

// Principal is the recommended [SubjectFunc]: it limits each request as the authenticated
// principal that the application's authentication middleware recorded in the request's context
// with [WithPrincipal], so that every client is limited by who it proved to be, which it cannot
// choose (docs/keys.md).
//
// A request without a principal is answered 500: its route is limited by principal, so reaching
// the limiter unauthenticated means the handler chain is wrong — authentication missing, or
// wrapped inside the limiter instead of around it. The error wraps [ErrMisconfigured]. To limit
// anonymous requests too, write a SubjectFunc that falls back to a [ClientIP] for them.
func Principal(r *http.Request) (admit.Subject, error) {
	id, ok := PrincipalFrom(r.Context())
	if !ok {
		return admit.Subject{}, errNoPrincipal
	}
	return admit.Subject{ID: id}, nil
}

// errNoPrincipal is Principal's error for a request without a principal.
var errNoPrincipal = fmt.Errorf("%w: no principal in the request's context: authentication must run before the limiter (httplimit.WithPrincipal)", ErrMisconfigured)
