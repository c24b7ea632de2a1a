package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/transport/httpapi"
)

func Example() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	h, err := httpapi.New(httpapi.Options{Store: store})
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
