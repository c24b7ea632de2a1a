package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/httplimit"
	"github.com/admit-dev/admit/memstore"
)

// userKey is the context key under which the example's authentication puts the user.
type userKey struct{}

// Each authenticated user is limited apart, under two policies at once: a request is admitted only
// if both have room, and then consumes from both.
func Example() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	keys, err := admit.NewKeyBuilder([]byte("a secret every instance shares"))
	if err != nil {
		panic(err)
	}
	limiter := admit.NewLimiter(store, keys,
		admit.Limit{Name: "per-minute", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Minute},
		admit.Limit{Name: "per-day", Algorithm: admit.FixedWindow, Rate: 1000, Period: 24 * time.Hour},
	)

	m := &httplimit.Middleware{
		Limiter: limiter,
		// The subject is the user that authentication (below) verified, never a value the
		// client chose.
		Subject: func(r *http.Request) (admit.Subject, error) {
			user, ok := r.Context().Value(userKey{}).(string)
			if !ok {
				return admit.Subject{}, errors.New("no authenticated user")
			}
			return admit.Subject{ID: user}, nil
		},
	}
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}))
	// A stand-in for authentication, which would verify a credential and put its user in the context.
	authenticated := func(user string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		return r.WithContext(context.WithValue(r.Context(), userKey{}, user))
	}

	for _, user := range []string{"alice", "alice", "alice", "bob"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, authenticated(user))
		fmt.Printf("%s: %d Retry-After=%q %q\n", user, rec.Code, rec.Header().Get("Retry-After"), rec.Body.String())
	}
	// Output:
	// alice: 200 Retry-After="" "hello\n"
	// alice: 200 Retry-After="" "hello\n"
	// alice: 429 Retry-After="60" "rate limit exceeded\n"
	// bob: 200 Retry-After="" "hello\n"
}

// A global limit: every request is the one subject, so all of them share the allowance.
func ExampleConstant() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	keys, err := admit.NewKeyBuilder([]byte("a secret every instance shares"))
	if err != nil {
		panic(err)
	}
	m := &httplimit.Middleware{
		Limiter: admit.NewLimiter(store, keys, admit.Limit{Name: "global", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Minute}),
		Subject: httplimit.Constant("everyone"),
	}
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}))

	for range 3 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		fmt.Printf("%d Retry-After=%q %q\n", rec.Code, rec.Header().Get("Retry-After"), rec.Body.String())
	}
	// Output:
	// 200 Retry-After="" "hello\n"
	// 200 Retry-After="" "hello\n"
	// 429 Retry-After="60" "rate limit exceeded\n"
}

// A subject function that finds the request malformed wraps ErrMalformedRequest: the middleware
// answers 400 Bad Request instead of 503, and the client knows not to retry unchanged.
func Example_malformedRequest() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	keys, err := admit.NewKeyBuilder([]byte("a secret every instance shares"))
	if err != nil {
		panic(err)
	}

	m := &httplimit.Middleware{
		Limiter: admit.NewLimiter(store, keys, admit.Limit{Name: "per-client", Algorithm: admit.FixedWindow, Rate: 100, Period: time.Minute}),
		// Behind a trusted reverse proxy that sets Client-IP, the client's address is the subject.
		// A request without a valid one is malformed: the proxy is misconfigured, or was bypassed.
		Subject: func(r *http.Request) (admit.Subject, error) {
			ip, err := netip.ParseAddr(r.Header.Get("Client-IP"))
			if err != nil {
				return admit.Subject{}, fmt.Errorf("Client-IP: %w: %w", httplimit.ErrMalformedRequest, err)
			}
			return admit.Subject{ID: ip.String()}, nil
		},
		Logger: slog.New(slog.DiscardHandler),
	}
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}))

	for _, clientIP := range []string{"203.0.113.7", "not-an-address"} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Client-IP", clientIP)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		fmt.Printf("%d Retry-After=%q %q\n", rec.Code, rec.Header().Get("Retry-After"), rec.Body.String())
	}
	// Output:
	// 200 Retry-After="" "hello\n"
	// 400 Retry-After="" "bad request\n"
}
