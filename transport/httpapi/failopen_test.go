package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/guard"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/httpapi"
)

const failOpenConfig = `
policies:
  - name: open
    algorithm: fixed_window
    limit: 100
    window: 10s
    failure: open
    local_limit: 2
  - name: closed
    algorithm: fixed_window
    limit: 100
    window: 10s
`

// TestCheckFailOpen: with Redis unreachable, behind the stack admit serve builds (a guard.FailOpen
// consulting the Service), a policy with failure: open answers 200 degraded up to its local limit,
// then 429 degraded; a check that also names a policy with failure: closed answers 503.
func TestCheckFailOpen(t *testing.T) {
	redis, err := redisstore.New(redisstore.Config{URL: "redis://" + redistest.ClosedPort(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { redis.Close() })
	var svc *service.Service // made below, before any check
	store := guard.NewFailOpen(redis, guard.FailOpenOptions{Local: func(lim admit.Limit) (int64, bool) { return svc.LocalLimit(lim) }})
	t.Cleanup(store.Close)
	cfg, err := policy.Parse("test.yaml", []byte(failOpenConfig))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := admit.NewKeyBuilder(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	if svc, err = service.New(store, keys, cfg); err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{Service: svc, Demo: demoConfig(t)})
	if err != nil {
		t.Fatal(err)
	}

	rec := post(h, `{"policies":["open","closed"],"key":"alice"}`)
	if res := decode[httpapi.ErrorResponse](t, rec); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("open and closed together: %d %+v; want 503", rec.Code, res)
	}
	for i := range 3 {
		rec := post(h, `{"policy":"open","key":"alice"}`)
		res := decode[httpapi.CheckResponse](t, rec)
		want := http.StatusOK
		if i == 2 {
			want = http.StatusTooManyRequests
		}
		if rec.Code != want || !res.Degraded || len(res.Decisions) != 1 || !res.Decisions[0].Degraded || res.Limit != 2 || res.Remaining != max(0, int64(1-i)) {
			t.Errorf("check %d: %d %+v; want %d, degraded, limit 2 (the local limit), %d remaining", i, rec.Code, res, want, max(0, 1-i))
		}
		if i == 2 && rec.Header().Get("Retry-After") == "" {
			t.Errorf("a degraded 429 without Retry-After")
		}
	}
	// The demo has no local limit: it fails closed.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/demo", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("GET /demo with Redis unreachable: %d; want 503", rec.Code)
	}
}
