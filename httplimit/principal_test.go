package httplimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/httplimit"
)

func TestPrincipal(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	for _, tc := range []struct {
		ctx  context.Context
		want string // "" for none
	}{
		{r.Context(), ""},
		{httplimit.WithPrincipal(r.Context(), ""), ""},
		{httplimit.WithPrincipal(r.Context(), "alice"), "alice"},
		{httplimit.WithPrincipal(httplimit.WithPrincipal(r.Context(), "alice"), "bob"), "bob"},
		{context.WithValue(r.Context(), ctxKey{}, "alice"), ""}, // another key is not the principal
	} {
		id, ok := httplimit.PrincipalFrom(tc.ctx)
		s, err := httplimit.Principal(r.WithContext(tc.ctx))
		if tc.want == "" {
			if ok || id != "" || !errors.Is(err, httplimit.ErrMisconfigured) {
				t.Errorf("no principal: PrincipalFrom = %q, %v; Principal = %+v, %v; want none and ErrMisconfigured", id, ok, s, err)
			}
			continue
		}
		if !ok || id != tc.want || err != nil || s != (admit.Subject{ID: tc.want}) {
			t.Errorf("PrincipalFrom = %q, %v; Principal = %+v, %v; want %s", id, ok, s, err, tc.want)
		}
	}
}

// TestPrincipalIgnoresClientHeaders checks the recommended setup end to end: an authentication
// middleware records the principal of a verified credential, and the limiter limits by it,
// whatever forwarding or identity headers the client adds.
func TestPrincipalIgnoresClientHeaders(t *testing.T) {
	tokens := map[string]string{"token-a": "alice", "token-b": "bob"} // verified credentials
	limiter := newLimiter(t, newMemstore(t), admit.Limit{Name: "per-user", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Hour})
	limited := (&httplimit.Middleware{Limiter: limiter, Subject: httplimit.Principal}).Wrap(http.NotFoundHandler())
	authenticate := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			user, ok := tokens[r.Header.Get("Authorization")]
			if !ok {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r.WithContext(httplimit.WithPrincipal(r.Context(), user)))
		})
	}
	h := authenticate(limited)
	for i, step := range []struct {
		token, forged string
		want          int
	}{
		{"token-a", "bob", 404}, {"token-a", "carol", 404}, {"token-a", "dave", 429},
		{"token-b", "alice", 404}, {"nope", "alice", 401}, {"token-b", "", 404}, {"token-b", "x", 429},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", step.token)
		for _, f := range []string{"X-Forwarded-For", "X-Real-Ip", "X-User", "Forwarded"} {
			r.Header.Set(f, step.forged)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != step.want {
			t.Errorf("step %d (%s, forging %q): %d, want %d", i+1, step.token, step.forged, rec.Code, step.want)
		}
	}
}
