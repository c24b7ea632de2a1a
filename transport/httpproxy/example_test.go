package httpproxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/httpproxy"
)

// A Proxy in front of an app: GETs under /api/ are limited to 2 an hour per client address;
// everything else passes unlimited.
func Example() {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from the app\n")
	}))
	defer app.Close()

	cfg, err := policy.Parse("proxy.yaml", []byte(`
policies:
  - name: api
    algorithm: fixed_window
    limit: 2
    window: 1h
routes:
  - method: GET
    path_prefix: /api/
    policies: [api]
`))
	if err != nil {
		panic(err)
	}
	store := memstore.New(memstore.Options{})
	defer store.Close()
	keys, err := admit.NewKeyBuilder([]byte("example secret of at least 16 bytes"))
	if err != nil {
		panic(err)
	}
	svc, err := service.New(store, keys, cfg)
	if err != nil {
		panic(err)
	}
	upstream, _ := url.Parse(app.URL)
	proxy, err := httpproxy.New(httpproxy.Options{Upstream: upstream, Service: svc})
	if err != nil {
		panic(err)
	}
	front := httptest.NewServer(proxy)
	defer front.Close()

	for _, path := range []string{"/api/a", "/api/b", "/api/c", "/about"} {
		resp, err := http.Get(front.URL + path)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%s %d %q RateLimit: %q\n", path, resp.StatusCode, body, resp.Header.Get("RateLimit"))
	}
	// Output:
	// /api/a 200 "hello from the app\n" RateLimit: "\"api\";r=1;t=3600"
	// /api/b 200 "hello from the app\n" RateLimit: "\"api\";r=0;t=3600"
	// /api/c 429 "rate limit exceeded\n" RateLimit: "\"api\";r=0;t=3600"
	// /about 200 "hello from the app\n" RateLimit: ""
}
