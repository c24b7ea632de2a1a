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

// The recommended subject: the principal your authentication middleware verified. It records the
// principal with WithPrincipal; Principal limits by it. Authentication wraps the limiter, so it
// runs first.
func ExamplePrincipal() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	keys, err := admit.NewKeyBuilder([]byte("a secret every instance shares"))
	if err != nil {
		panic(err)
	}
	limited := (&httplimit.Middleware{
		Limiter: admit.NewLimiter(store, keys, admit.Limit{Name: "per-user", Algorithm: admit.FixedWindow, Rate: 1, Period: time.Minute}),
		Subject: httplimit.Principal,
	}).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, _ := httplimit.PrincipalFrom(r.Context())
		fmt.Fprintln(w, "hello", user)
	}))
	tokens := map[string]string{"secret-token-a": "alice", "secret-token-b": "bob"} // a stand-in for real verification
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

	for _, token := range []string{"secret-token-a", "secret-token-a", "secret-token-b", "forged"} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		fmt.Printf("%d %q\n", rec.Code, rec.Body.String())
	}
	// Output:
	// 200 "hello alice\n"
	// 429 "rate limit exceeded\n"
	// 200 "hello bob\n"
	// 401 "unauthorized\n"
}

// Behind a load balancer at 10.0.0.0/8 that appends the address it received each request from to
// X-Forwarded-For, the client is the rightmost address that is not a trusted proxy. A client that
// connects directly cannot choose its address by sending the header.
func ExampleClientIP() {
	clientIP, err := httplimit.NewClientIP(httplimit.ClientIPConfig{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		Header:         httplimit.XForwardedFor,
	})
	if err != nil {
		panic(err)
	}
	for _, tc := range []struct{ peer, xff string }{
		{"10.0.0.1:4711", "198.51.100.7"},                    // through the load balancer
		{"10.0.0.1:4711", "1.2.3.4, 198.51.100.7, 10.0.0.2"}, // a forged entry on the left, two proxies
		{"203.0.113.9:4711", "198.51.100.7"},                 // directly, forging the header
		{"[2001:db8:1:2::99]:4711", ""},                      // IPv6: one /64 is one client
		{"10.0.0.1:4711", "unknown"},                         // malformed: 400
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = tc.peer
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		s, err := clientIP.Subject(r)
		fmt.Printf("%s: %q %v\n", tc.peer, s.ID, errors.Is(err, httplimit.ErrMalformedRequest))
	}
	// Output:
	// 10.0.0.1:4711: "198.51.100.7" false
	// 10.0.0.1:4711: "198.51.100.7" false
	// 203.0.113.9:4711: "203.0.113.9" false
	// [2001:db8:1:2::99]:4711: "2001:db8:1:2::/64" false
	// 10.0.0.1:4711: "" true
}

// Admitted and rejected responses carry the RateLimit-Policy and RateLimit fields, one member per
// policy; a rejection's problem details name the policies that rejected it.
func ExampleMiddleware_rateLimitHeaders() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	keys, err := admit.NewKeyBuilder([]byte("a secret every instance shares"))
	if err != nil {
		panic(err)
	}
	m := &httplimit.Middleware{
		Limiter: admit.NewLimiter(store, keys,
			admit.Limit{Name: "per-minute", Algorithm: admit.FixedWindow, Rate: 1, Period: time.Minute},
			admit.Limit{Name: "per-day", Algorithm: admit.FixedWindow, Rate: 1000, Period: 24 * time.Hour},
		),
		Subject:        httplimit.Constant("everyone"),
		ProblemDetails: true,
	}
	h := m.Wrap(http.NotFoundHandler())
	for range 2 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		fmt.Println(rec.Code, "Retry-After:", rec.Header().Values("Retry-After"))
		fmt.Println("RateLimit-Policy:", rec.Header().Get("RateLimit-Policy"))
		fmt.Println("RateLimit:", rec.Header().Get("RateLimit"))
		fmt.Print(rec.Body.String())
	}
	// Output:
	// 404 Retry-After: []
	// RateLimit-Policy: "per-minute";q=1;w=60, "per-day";q=1000;w=86400
	// RateLimit: "per-minute";r=0;t=60, "per-day";r=999;t=86400
	// 404 page not found
	// 429 Retry-After: [60]
	// RateLimit-Policy: "per-minute";q=1;w=60, "per-day";q=1000;w=86400
	// RateLimit: "per-minute";r=0;t=60, "per-day";r=999;t=86400
	// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Request cannot be satisfied as assigned quota has been exceeded","status":429,"detail":"Too many requests: retry after 60 s.","violated-policies":["per-minute"]}
}
