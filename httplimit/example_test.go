package httplimit_test

import (
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

func Example() {
	store := memstore.New(memstore.Options{})
	defer store.Close()

	m := &httplimit.Middleware{
		Limiter: admit.NewLimiter(store, admit.Limit{Algorithm: admit.FixedWindow, Rate: 2, Period: time.Minute}),
		// A real key function derives the key from a verified subject, such as the
		// authenticated user; this one limits all requests together.
		Key: func(r *http.Request) (string, error) { return "rl:example:v1:{all}", nil },
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

// A key function that finds the request malformed wraps ErrMalformedRequest: the middleware
// answers 400 Bad Request instead of 503, and the client knows not to retry unchanged.
func Example_malformedRequest() {
	store := memstore.New(memstore.Options{})
	defer store.Close()

	m := &httplimit.Middleware{
		Limiter: admit.NewLimiter(store, admit.Limit{Algorithm: admit.FixedWindow, Rate: 100, Period: time.Minute}),
		// Behind a trusted reverse proxy that sets Client-IP, the client's address keys its bucket.
		// A request without a valid one is malformed: the proxy is misconfigured, or was bypassed.
		Key: func(r *http.Request) (string, error) {
			ip, err := netip.ParseAddr(r.Header.Get("Client-IP"))
			if err != nil {
				return "", fmt.Errorf("Client-IP: %w: %w", httplimit.ErrMalformedRequest, err)
			}
			return "rl:example:v1:{" + ip.String() + "}", nil
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
