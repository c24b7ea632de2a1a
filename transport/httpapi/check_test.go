package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/httplimit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/httpapi"
)

const checkConfig = `
policies:
  - name: tighter
    algorithm: fixed_window
    limit: 1
    window: 10s
    mode: shadow
  - name: per-second
    algorithm: fixed_window
    limit: 3
    window: 10s
  - name: per-day
    algorithm: gcra
    limit: 5
    window: 24h
`

// newCheckHandler returns a Handler with a Service over store under checkConfig.
func newCheckHandler(t *testing.T, store admit.Store, ready func(context.Context) error) *httpapi.Handler {
	t.Helper()
	return newCheckHandlerOpts(t, store, httpapi.Options{Ready: ready})
}

// newCheckHandlerOpts returns a Handler of opts with a Service over store under checkConfig, and
// the demo.
func newCheckHandlerOpts(t *testing.T, store admit.Store, opts httpapi.Options) *httpapi.Handler {
	t.Helper()
	cfg, err := policy.Parse("test.yaml", []byte(checkConfig))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := admit.NewKeyBuilder(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(store, keys, cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts.Demo, opts.Service = demoConfig(t), svc
	h, err := httpapi.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// post sends body to POST /v1/check and returns the recorder.
func post(h http.Handler, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(body)))
	return rec
}

func decode[T any](t *testing.T, rec *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(rec.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("body %q: %v", rec.Body.String(), err)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q; want application/json", ct)
	}
	if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q; want no-store", cc)
	}
	return v
}

func TestCheckOnePolicy(t *testing.T) {
	h := newCheckHandler(t, newMemstore(t), nil)
	for i := range 3 {
		rec := post(h, `{"policy":"per-second","key":"alice"}`)
		res := decode[httpapi.CheckResponse](t, rec)
		if rec.Code != http.StatusOK || !res.Allowed || res.Policy != "per-second" || res.Limit != 3 || res.Remaining != int64(2-i) || res.ResetAfterMS > 10000 || res.ResetAfterMS < 9000 || len(res.Decisions) != 1 {
			t.Fatalf("check %d: %d %+v", i, rec.Code, res)
		}
	}
	rec := post(h, `{"policy":"per-second","key":"alice","cost":1}`)
	res := decode[httpapi.CheckResponse](t, rec)
	if rec.Code != http.StatusTooManyRequests || res.Allowed || res.RetryAfterMS <= 0 || res.RetryAfterMS > 10000 {
		t.Fatalf("fourth: %d %+v; want 429", rec.Code, res)
	}
	if ra := rec.Header().Get("Retry-After"); ra != "10" {
		t.Errorf("Retry-After %q; want 10", ra)
	}
	if p, f := rec.Header().Get("RateLimit-Policy"), rec.Header().Get("RateLimit"); p != `"per-second";q=3;w=10` || f != `"per-second";r=0;t=10` {
		t.Errorf("RateLimit-Policy %q, RateLimit %q; want the policy's quota, 0 remaining, t = Retry-After", p, f)
	}
	// A peek of another subject: the full allowance, nothing consumed.
	rec = post(h, `{"policy":"per-second","key":"bob","cost":0}`)
	if res := decode[httpapi.CheckResponse](t, rec); rec.Code != http.StatusOK || res.Remaining != 3 {
		t.Errorf("peek: %d %+v; want 200 with 3 remaining", rec.Code, res)
	}
}

func TestCheckSeveralPolicies(t *testing.T) {
	h := newCheckHandler(t, newMemstore(t), nil)
	body := `{"policies":["per-second","per-day"],"key":"alice","cost":2,"request_id":"r-1"}`
	rec := post(h, body)
	res := decode[httpapi.CheckResponse](t, rec)
	if rec.Code != http.StatusOK || len(res.Decisions) != 2 || res.Decisions[0].Policy != "per-second" || res.Decisions[1].Policy != "per-day" ||
		res.Decisions[0].Remaining != 1 || res.Decisions[1].Remaining != 3 || res.Policy != "per-second" || res.Replayed {
		t.Fatalf("%d %+v", rec.Code, res)
	}
	if f := rec.Header().Get("RateLimit"); !strings.HasPrefix(f, `"per-second";r=1;t=`) || !strings.Contains(f, `, "per-day";r=3;t=`) {
		t.Errorf("RateLimit %q; want a member per policy", f)
	}
	rec = post(h, body) // a retry: replayed, nothing consumed
	if res := decode[httpapi.CheckResponse](t, rec); rec.Code != http.StatusOK || !res.Replayed || res.Decisions[0].Remaining != 1 {
		t.Fatalf("retry: %d %+v; want the first answer, replayed", rec.Code, res)
	}
	rec = post(h, `{"policies":["per-second","per-day"],"key":"alice","cost":2}`)
	res = decode[httpapi.CheckResponse](t, rec)
	if rec.Code != http.StatusTooManyRequests || res.Policy != "per-second" || res.Decisions[0].Allowed || !res.Decisions[1].Allowed {
		t.Fatalf("over per-second: %d %+v", rec.Code, res)
	}
	rec = post(h, `{"policy":"per-day","key":"alice","cost":0}`)
	if res := decode[httpapi.CheckResponse](t, rec); res.Remaining != 3 {
		t.Errorf("per-day remaining %d; want 3: the rejected check consumed nothing", res.Remaining)
	}
}

func TestCheckInvalid(t *testing.T) {
	h := newCheckHandler(t, untouchable{t: t}, nil)
	for _, c := range []struct{ name, body, want string }{
		{"not JSON", `policy=per-second`, "not a check request"},
		{"unknown field", `{"policy":"per-second","key":"a","weight":2}`, "unknown field"},
		{"two values", `{"policy":"per-second","key":"a"} {}`, "more than one JSON value"},
		{"no policy", `{"key":"a"}`, `want "policy" or "policies"`},
		{"both", `{"policy":"per-second","policies":["per-day"],"key":"a"}`, "not both"},
		{"no key", `{"policy":"per-second"}`, `want a "key"`},
		{"cost a string", `{"policy":"per-second","key":"a","cost":"1"}`, "not a check request"},
		{"body too large", `{"policy":"per-second","key":"` + strings.Repeat("a", httpapi.MaxCheckBody) + `"}`, "body larger than"},
	} {
		rec := post(h, c.body)
		res := decode[httpapi.ErrorResponse](t, rec)
		if rec.Code != http.StatusBadRequest || !strings.Contains(res.Error, c.want) {
			t.Errorf("%s: %d %q; want 400 saying %q", c.name, rec.Code, res.Error, c.want)
		}
	}
}

func TestCheckInvalidForTheService(t *testing.T) {
	h := newCheckHandler(t, newMemstore(t), nil)
	for _, c := range []struct{ name, body, want string }{
		{"unknown policy", `{"policy":"per-hour","key":"a"}`, `unknown policy "per-hour"`},
		{"cost above the limit", `{"policy":"per-second","key":"a","cost":4}`, "cost 4 outside 0-3"},
		{"a policy twice", `{"policies":["per-day","per-day"],"key":"a"}`, "named twice"},
		{"ID too long", `{"policy":"per-second","key":"a","request_id":"` + strings.Repeat("i", bound.MaxIDLen+1) + `"}`, "request ID"},
	} {
		rec := post(h, c.body)
		res := decode[httpapi.ErrorResponse](t, rec)
		if rec.Code != http.StatusBadRequest || !strings.Contains(res.Error, c.want) {
			t.Errorf("%s: %d %q; want 400 saying %q", c.name, rec.Code, res.Error, c.want)
		}
	}
}

func TestCheckUnavailable(t *testing.T) {
	h := newCheckHandler(t, failingStore{err: admit.ErrUnavailable}, nil)
	rec := post(h, `{"policy":"per-second","key":"alice"}`)
	res := decode[httpapi.ErrorResponse](t, rec)
	if rec.Code != http.StatusServiceUnavailable || res.Error != "limiter unavailable" || rec.Header().Get("Retry-After") != "1" {
		t.Errorf("%d %+v Retry-After=%q; want 503, limiter unavailable, Retry-After 1", rec.Code, res, rec.Header().Get("Retry-After"))
	}
}

func TestCheckMethod(t *testing.T) {
	h := newCheckHandler(t, untouchable{t: t}, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/check", nil))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "POST" {
		t.Errorf("GET /v1/check: %d Allow=%q; want 405, Allow: POST", rec.Code, rec.Header().Get("Allow"))
	}
}

func TestPolicies(t *testing.T) {
	h := newCheckHandler(t, untouchable{t: t}, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/policies", nil))
	got := decode[struct {
		Policies []httpapi.PolicyInfo `json:"policies"`
		Hash     string               `json:"config_hash"`
	}](t, rec)
	want := []httpapi.PolicyInfo{
		{Name: "tighter", Algorithm: "fixed_window", Limit: 1, WindowMS: 10000, Mode: "shadow", Failure: "closed"},
		{Name: "per-second", Algorithm: "fixed_window", Limit: 3, WindowMS: 10000, Mode: "enforce", Failure: "closed"},
		{Name: "per-day", Algorithm: "gcra", Limit: 5, WindowMS: 86400000, Burst: 5, Mode: "enforce", Failure: "closed"},
	}
	if rec.Code != http.StatusOK || !slices.Equal(got.Policies, want) || len(got.Hash) != 64 {
		t.Errorf("%d %+v; want %+v", rec.Code, got, want)
	}
}

func TestReadyz(t *testing.T) {
	var err error
	h := newCheckHandler(t, untouchable{t: t}, func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("Ready called without a deadline")
		}
		return err
	})
	run(t, h, []step{{method: http.MethodGet, path: "/readyz", status: http.StatusOK, body: "ok\n"}})
	err = errors.New("redis: connection refused")
	run(t, h, []step{{method: http.MethodGet, path: "/readyz", status: http.StatusServiceUnavailable, body: "not ready\n"}})
}

func TestCheckShadowPolicy(t *testing.T) {
	h := newCheckHandler(t, newMemstore(t), nil)
	body := `{"policies":["per-second","tighter"],"key":"alice"}`
	for i := range 3 {
		rec := post(h, body)
		res := decode[httpapi.CheckResponse](t, rec)
		if rec.Code != http.StatusOK || !res.Allowed || res.Policy != "per-second" || len(res.Decisions) != 2 {
			t.Fatalf("check %d: %d %+v; want 200 decided by the enforced policy", i, rec.Code, res)
		}
		if d := res.Decisions[1]; !d.Shadow || d.Allowed != (i == 0) {
			t.Fatalf("check %d: shadow decision %+v; want shadow, allowed only the first time", i, d)
		}
		if p := rec.Header().Get("RateLimit-Policy"); p != `"per-second";q=3;w=10` {
			t.Errorf("RateLimit-Policy %q; want the enforced policy only", p)
		}
	}
	if rec := post(h, body); rec.Code != http.StatusTooManyRequests {
		t.Errorf("fourth: %d; want 429 by the enforced policy", rec.Code)
	}
}

// TestForwardAuth checks the forward-auth form of /v1/check: the check in the query or in header
// fields, with any method, on /v1/check or below it, answered by status code.
func TestForwardAuth(t *testing.T) {
	clientIP, err := httplimit.NewClientIP(httplimit.ClientIPConfig{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Header: httplimit.XForwardedFor})
	if err != nil {
		t.Fatal(err)
	}
	h := newCheckHandlerOpts(t, newMemstore(t), httpapi.Options{ClientIP: clientIP})
	send := func(method, target string, header map[string]string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, target, nil)
		r.RemoteAddr = "10.1.2.3:5555" // the proxy
		for k, v := range header {
			r.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	// nginx auth_request: the original method, the check in the URL.
	for i, want := range []int{200, 200, 200, 429} {
		rec := send(http.MethodGet, "/v1/check?policy=per-second&key=alice", nil)
		if rec.Code != want {
			t.Fatalf("query form, request %d: %d %s; want %d", i, rec.Code, rec.Body, want)
		}
		if want == 429 && (rec.Header().Get("Retry-After") == "" || rec.Header().Get("RateLimit") == "") {
			t.Errorf("429 without Retry-After or RateLimit: %v", rec.Header())
		}
	}
	// Envoy ext_authz: the original path appended, the check in header fields, several policies.
	for i, want := range []int{200, 429} { // per-second: 3, at a cost of 2
		rec := send(http.MethodPut, "/v1/check/upload/photo.jpg?size=2", map[string]string{
			httpapi.PolicyField: "per-second, per-day", httpapi.KeyField: "bob", httpapi.CostField: "2"})
		if rec.Code != want {
			t.Fatalf("header form, request %d: %d %s; want %d", i, rec.Code, rec.Body, want)
		}
	}
	// Traefik ForwardAuth: the client's address through the trusted proxy's X-Forwarded-For.
	for i, want := range []int{200, 200, 200, 429} {
		rec := send(http.MethodGet, "/v1/check?policy=per-second&subject=client_ip", map[string]string{"X-Forwarded-For": "203.0.113.9"})
		if rec.Code != want {
			t.Fatalf("client_ip, request %d: %d %s; want %d", i, rec.Code, rec.Body, want)
		}
	}
	rec := send(http.MethodPost, "/v1/check/any/path", map[string]string{httpapi.PolicyField: "per-second", httpapi.SubjectField: "client_ip", "X-Forwarded-For": "203.0.113.9"})
	if rec.Code != 429 {
		t.Errorf("client_ip from %s: %d; want 429, the same client as above", httpapi.SubjectField, rec.Code)
	}
	if rec := send(http.MethodGet, "/v1/check?policy=per-second&key=alice&limited_status=403", nil); rec.Code != http.StatusForbidden || rec.Header().Get("Retry-After") == "" {
		t.Errorf("limited_status=403: %d Retry-After %q; want 403 with Retry-After, for nginx", rec.Code, rec.Header().Get("Retry-After"))
	}
	if rec := send(http.MethodGet, "/v1/check?policy=per-second&subject=client_ip", map[string]string{"X-Forwarded-For": "203.0.113.10"}); rec.Code != 200 {
		t.Errorf("another client: %d; want 200, a bucket of its own", rec.Code)
	}
	for _, c := range []struct {
		target string
		header map[string]string
		want   string
	}{
		{"/v1/check?policy=per-second", nil, "want a key"},
		{"/v1/check?policy=per-second&key=a&cost=x", nil, `cost "x"`},
		{"/v1/check?policy=per-second&subject=user", nil, "want key or client_ip"},
		{"/v1/check?policy=nope&key=a", nil, "unknown policy"},
		{"/v1/check?policy=per-second&key=a&limited_status=200", nil, "limited_status"},
		{"/v1/check?policy=per-second&subject=client_ip", map[string]string{"X-Forwarded-For": "unknown"}, "X-Forwarded-For"},
	} {
		rec := send(http.MethodGet, c.target, c.header)
		if res := decode[httpapi.ErrorResponse](t, rec); rec.Code != http.StatusBadRequest || !strings.Contains(res.Error, c.want) {
			t.Errorf("%s: %d %q; want 400 saying %q", c.target, rec.Code, res.Error, c.want)
		}
	}
}

// panickingStore is a Store whose decisions panic, as a bug in a Store would.
type panickingStore struct{ admit.Store }

func (panickingStore) Take(context.Context, admit.Request) (admit.Decision, error) {
	panic("store bug")
}

func (panickingStore) TakeAll(context.Context, []admit.Request, []admit.Decision) (bool, error) {
	panic("store bug")
}

// TestCheckPanic checks that a panic in the limiter answers /v1/check, in both of
// its forms, and /demo 503, never letting the request through nor the panic out, and that the
// handler goes on serving.
func TestCheckPanic(t *testing.T) {
	h := newCheckHandler(t, panickingStore{}, nil)
	for range 2 {
		rec := post(h, `{"policy":"per-second","key":"alice"}`)
		if res := decode[httpapi.ErrorResponse](t, rec); rec.Code != http.StatusServiceUnavailable || res.Error != "limiter unavailable" || rec.Header().Get("Retry-After") != "1" {
			t.Errorf("POST /v1/check: %d %+v Retry-After=%q; want 503, limiter unavailable, Retry-After 1", rec.Code, res, rec.Header().Get("Retry-After"))
		}
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/check?policy=per-second&key=alice", nil))
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("forward-auth /v1/check: %d; want 503", rec.Code)
		}
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/demo", nil))
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("GET /demo: %d; want 503", rec.Code)
		}
	}
}
