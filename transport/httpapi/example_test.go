package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/httpapi"
)

// The origin design's demo: /demo is one fixed account, here under 3 requests per 10 seconds.
func Example() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	keys, err := admit.NewKeyBuilder([]byte("a secret every instance shares"))
	if err != nil {
		panic(err)
	}
	demo, err := policy.Parse("built-in", []byte("policies:\n  - name: demo\n    algorithm: fixed_window\n    limit: 3\n    window: 10s\n"))
	if err != nil {
		panic(err)
	}
	svc, err := service.New(store, keys, demo)
	if err != nil {
		panic(err)
	}
	h, err := httpapi.New(httpapi.Options{Demo: demo, Service: svc})
	if err != nil {
		panic(err)
	}

	for range 4 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/demo", nil))
		fmt.Printf("%d Retry-After=%q %q\n", rec.Code, rec.Header().Get("Retry-After"), rec.Body.String())
	}
	// Output:
	// 200 Retry-After="" "ok\n"
	// 200 Retry-After="" "ok\n"
	// 200 Retry-After="" "ok\n"
	// 429 Retry-After="10" "rate limit exceeded\n"
}
