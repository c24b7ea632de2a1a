package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/httplimit"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/httpapi"
)

// newHandlerOf returns a Handler with a Service over store under the configuration src.
func newHandlerOf(t *testing.T, store admit.Store, src string, opts httpapi.Options) *httpapi.Handler {
	t.Helper()
	cfg, err := policy.Parse("test.yaml", []byte(src))
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

// badRequest returns the error of rec's ErrorResponse and whether rec is a 400; for any other
// answer, its status and body.
func badRequest(t *testing.T, rec *httptest.ResponseRecorder) (string, bool) {
	t.Helper()
	if rec.Code != http.StatusBadRequest {
		return fmt.Sprintf("%d %s", rec.Code, strings.TrimSpace(rec.Body.String())), false
	}
	return decode[httpapi.ErrorResponse](t, rec).Error, true
}

// TestCheckConcurrencyCost: under a concurrency policy a check costs 0 (a peek) or 1 (one lease),
// in the JSON form and the forward-auth form alike; a cost above the limit — or any other — is a
// 400 that names the cost and the policy, and takes no lease.
func TestCheckConcurrencyCost(t *testing.T) {
	h := newHandlerOf(t, newMemstore(t), `
policies:
  - name: cc
    algorithm: concurrency
    limit: 50
    lease_ttl: 1m
  - name: tokens
    algorithm: fixed_window
    limit: 1000
    window: 1m
`, httpapi.Options{})
	for _, body := range []string{
		`{"policy":"cc","key":"a","cost":51}`,
		`{"policy":"cc","key":"a","cost":2}`,
		`{"policy":"cc","key":"a","cost":-1}`,
		`{"policies":["tokens","cc"],"key":"a","cost":100}`,
	} {
		if msg, ok := badRequest(t, post(h, body)); !ok || !strings.Contains(msg, "outside 0-1") || !strings.Contains(msg, `"cc"`) {
			t.Errorf("%s: %s; want 400 naming the cost, its bound 0-1 and the policy", body, msg)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/check?policy=cc&key=a&cost=51", nil))
	if msg, ok := badRequest(t, rec); !ok || !strings.Contains(msg, "cost 51 outside 0-1") {
		t.Errorf("forward-auth at cost 51: %s; want 400 naming the cost", msg)
	}
	rec = post(h, `{"policies":["tokens","cc"],"key":"a","cost":1}`)
	if res := decode[httpapi.CheckResponse](t, rec); rec.Code != http.StatusOK || res.Decisions[0].Remaining != 999 || res.Decisions[1].Remaining != 49 {
		t.Fatalf("at cost 1: %d %+v; want 200, 999 tokens and 49 leases left (the invalid checks took nothing)", rec.Code, res)
	}
	rec = post(h, `{"policy":"cc","key":"a","cost":0}`)
	if res := decode[httpapi.CheckResponse](t, rec); rec.Code != http.StatusOK || res.Remaining != 49 {
		t.Errorf("a peek: %d %+v; want 200, 49 left", rec.Code, res)
	}
}

// TestCheckErrorBodyNamesNoPackage: a 400's body names the mistake, the field and its bound in
// plain ASCII, never the packages the error came through, on memstore and on Redis — for a mistake
// found before the backend and for one the backend finds (a request ID reused).
func TestCheckErrorBodyNamesNoPackage(t *testing.T) {
	run := func(t *testing.T, store admit.Store) {
		h := newCheckHandler(t, store, nil)
		rec := post(h, `{"policy":"per-second","key":"a","cost":99}`)
		res := decode[httpapi.ErrorResponse](t, rec)
		if want := `invalid request: cost 99 outside 0-3 (policy "per-second")`; rec.Code != http.StatusBadRequest || res.Error != want {
			t.Errorf("cost 99: %d %q; want 400 %q", rec.Code, res.Error, want)
		}
		if rec := post(h, `{"policy":"per-second","key":"a","request_id":"r-1"}`); rec.Code != http.StatusOK {
			t.Fatalf("first request with an ID: %d %s", rec.Code, rec.Body)
		}
		rec = post(h, `{"policy":"per-second","key":"a","request_id":"r-1","cost":2}`)
		res = decode[httpapi.ErrorResponse](t, rec)
		if rec.Code != http.StatusBadRequest || !strings.HasPrefix(res.Error, "invalid request: ") || !strings.Contains(res.Error, "request ID reused") {
			t.Errorf("an ID reused: %d %q; want 400 saying the request ID is reused", rec.Code, res.Error)
		}
		for _, body := range []string{`{"policy":"per-second","key":"a","cost":99}`, `{"policy":"per-second","key":"a","request_id":"r-1","cost":2}`, `{"policy":"nope","key":"a"}`} {
			rec := post(h, body)
			msg := decode[httpapi.ErrorResponse](t, rec).Error
			for _, pkg := range []string{"memstore", "redisstore", "admit:", "service:", "httpapi"} {
				if strings.Contains(msg, pkg) {
					t.Errorf("%s: body %q names %q", body, msg, pkg)
				}
			}
			for _, c := range []byte(msg) {
				if c >= 0x80 {
					t.Errorf("%s: body %q is not plain ASCII", body, msg)
					break
				}
			}
		}
	}
	t.Run("memstore", func(t *testing.T) { run(t, newMemstore(t)) })
	t.Run("redis", func(t *testing.T) {
		s, err := redisstore.New(redisstore.Config{URL: redistest.Start(t).URL()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		run(t, s)
	})
}

// TestForwardAuthOneSource: the forward-auth form reads its check from one source — the query
// when it names a policy, else the X-Admit-* header fields. A parameter given twice, or in both,
// is answered 400 with a body that says so, and consumes nothing: a client whose own header
// fields (nginx, Traefik) or query (Envoy) reach admit cannot pick its subject or cost.
func TestForwardAuthOneSource(t *testing.T) {
	clientIP, err := httplimit.NewClientIP(httplimit.ClientIPConfig{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Header: httplimit.XForwardedFor})
	if err != nil {
		t.Fatal(err)
	}
	h := newCheckHandlerOpts(t, newMemstore(t), httpapi.Options{ClientIP: clientIP})
	send := func(target string, header http.Header) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		r.RemoteAddr = "10.1.2.3:5555" // the proxy
		for k, vs := range header {
			for _, v := range vs {
				r.Header.Add(k, v)
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	for _, c := range []struct {
		name   string
		target string
		header http.Header
		want   string
	}{
		{"two key parameters", "/v1/check?policy=per-second&key=alice&key=bob", nil, "key given 2 times"},
		{"two cost parameters", "/v1/check?policy=per-second&key=alice&cost=0&cost=1", nil, "cost given 2 times"},
		{"two subject parameters", "/v1/check?policy=per-second&subject=key&subject=client_ip&key=alice", nil, "subject given 2 times"},
		{"two limited_status parameters", "/v1/check?policy=per-second&key=alice&limited_status=403&limited_status=401", nil, "limited_status given more than once"},
		{"two key fields", "/v1/check", http.Header{httpapi.PolicyField: {"per-second"}, httpapi.KeyField: {"alice", "bob"}}, "X-Admit-Key given in 2 header fields"},
		{"two policy fields", "/v1/check", http.Header{httpapi.PolicyField: {"per-second", "per-day"}, httpapi.KeyField: {"alice"}}, "X-Admit-Policy given in 2 header fields"},
		{"key in both", "/v1/check?policy=per-second&key=alice", http.Header{httpapi.KeyField: {"bob"}}, "X-Admit-Key: the check is in the query"},
		{"a cost field beside the query", "/v1/check?policy=per-second&subject=client_ip", http.Header{httpapi.CostField: {"0"}, "X-Forwarded-For": {"203.0.113.9"}}, "X-Admit-Cost: the check is in the query"},
		{"a policy in both", "/v1/check?policy=per-second&key=alice", http.Header{httpapi.PolicyField: {"per-day"}}, "X-Admit-Policy: the check is in the query"},
		{"a key parameter beside the fields", "/v1/check/app/path?key=bob", http.Header{httpapi.PolicyField: {"per-second"}, httpapi.KeyField: {"alice"}}, "key=: the check is in the X-Admit-Policy header field"},
		{"a cost parameter beside the fields", "/v1/check/app/path?cost=0", http.Header{httpapi.PolicyField: {"per-second"}, httpapi.SubjectField: {"client_ip"}, "X-Forwarded-For": {"203.0.113.9"}}, "cost=: the check is in the X-Admit-Policy header field"},
	} {
		if msg, ok := badRequest(t, send(c.target, c.header)); !ok || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %s; want 400 saying %q", c.name, msg, c.want)
		}
	}
	// A malformed forwarding header is the client's mistake, named without the package that found it.
	if msg, ok := badRequest(t, send("/v1/check?policy=per-second&subject=client_ip", http.Header{"X-Forwarded-For": {"unknown"}})); !ok || !strings.Contains(msg, "X-Forwarded-For") || strings.Contains(msg, "httplimit") {
		t.Errorf("a malformed X-Forwarded-For: %s; want 400 naming the header, not the package", msg)
	}
	// Nothing was consumed: alice, bob and the client address still have all 3.
	for _, c := range []struct {
		target string
		header http.Header
	}{
		{"/v1/check?policy=per-second&key=alice&cost=0", nil},
		{"/v1/check?policy=per-second&key=bob&cost=0", nil},
		{"/v1/check?policy=per-second&subject=client_ip&cost=0", http.Header{"X-Forwarded-For": {"203.0.113.9"}}},
	} {
		rec := send(c.target, c.header)
		if res := decode[httpapi.CheckResponse](t, rec); rec.Code != http.StatusOK || res.Remaining != 3 {
			t.Errorf("%s: %d, %d left; want 200 with all 3 left", c.target, rec.Code, res.Remaining)
		}
	}
	// One source, each parameter once: decided. Policy may repeat in the query, and a query that
	// names nothing of admit's (the app's own, under Envoy) comes with the header fields.
	if rec := send("/v1/check?policy=per-second&policy=per-day&key=alice", nil); rec.Code != http.StatusOK {
		t.Errorf("policy twice in the query: %d %s; want 200", rec.Code, rec.Body)
	}
	if rec := send("/v1/check/app/path?page=2", http.Header{httpapi.PolicyField: {"per-second, per-day"}, httpapi.KeyField: {"alice"}}); rec.Code != http.StatusOK {
		t.Errorf("the header fields with the app's query: %d %s; want 200", rec.Code, rec.Body)
	}
}
