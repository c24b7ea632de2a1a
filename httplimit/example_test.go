package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
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
