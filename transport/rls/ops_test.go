package rls_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/rls"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// opsServer returns a Server of the test configuration on store with ops.
func opsServer(t *testing.T, store admit.Store, ops rls.Ops) *rls.Server {
	t.Helper()
	keys, err := admit.NewKeyBuilder([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(store, keys, &policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := rls.New(rls.Options{Service: svc, Config: testConfig(t), Ops: ops})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serveGRPC serves s over gRPC on 127.0.0.1:0 and returns a connection to it and its Health.
func serveGRPC(t *testing.T, s *rls.Server) (*grpc.ClientConn, *rls.Health) {
	t.Helper()
	g, h := rls.NewGRPCServer(s)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, h
}

// marketing is a descriptor of example 2's limit of 5 marketing messages a day.
var marketing = desc("message_type", "marketing", "to_number", "2061234567")

// TestHealthServices checks Check and List for the three names, and NOT_FOUND for another.
func TestHealthServices(t *testing.T) {
	conn, h := serveGRPC(t, opsServer(t, memStore(t), rls.Ops{}))
	c := healthpb.NewHealthClient(conn)
	ctx := context.Background()
	want := func(step string, st healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		for _, svc := range []string{"", "ratelimit", "envoy.service.ratelimit.v3.RateLimitService"} {
			r, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
			if err != nil || r.Status != st {
				t.Errorf("%s: Check(%q) = %v, %v; want %v", step, svc, r, err, st)
			}
		}
		l, err := c.List(ctx, &healthpb.HealthListRequest{})
		if err != nil || len(l.Statuses) != 3 || l.Statuses["ratelimit"].GetStatus() != st {
			t.Errorf("%s: List = %v, %v; want 3 services %v", step, l, err, st)
		}
	}
	want("start", healthpb.HealthCheckResponse_SERVING)
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: "other"}); status.Code(err) != codes.NotFound {
		t.Errorf("Check(other): %v, want NotFound", err)
	}
	h.SetServing(false)
	want("backend down", healthpb.HealthCheckResponse_NOT_SERVING)
	h.SetServing(true)
	want("backend back", healthpb.HealthCheckResponse_SERVING)
	h.Shutdown()
	h.SetServing(true)
	want("shut down", healthpb.HealthCheckResponse_NOT_SERVING)
}

// recvStatus receives the next status of w, within a patient deadline.
func recvStatus(t *testing.T, w healthpb.Health_WatchClient) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	type got struct {
		r   *healthpb.HealthCheckResponse
		err error
	}
	ch := make(chan got, 1)
	go func() { r, err := w.Recv(); ch <- got{r, err} }()
	select {
	case g := <-ch:
		if g.err != nil {
			t.Fatalf("Watch: %v", g.err)
		}
		return g.r.Status
	case <-time.After(30 * time.Second):
		t.Fatal("Watch: no status within 30 s")
		return 0
	}
}

// TestHealthWatch follows one Watch stream through a backend failure and its end, and /healthcheck
// alongside.
func TestHealthWatch(t *testing.T) {
	conn, h := serveGRPC(t, opsServer(t, memStore(t), rls.Ops{}))
	web := httptest.NewServer(h)
	defer web.Close()
	healthcheck := func(step string, code int, body string) {
		t.Helper()
		resp, err := http.Get(web.URL + "/healthcheck")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != code || string(b) != body {
			t.Errorf("%s: /healthcheck %d %q, want %d %q", step, resp.StatusCode, b, code, body)
		}
	}
	c := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := c.Watch(ctx, &healthpb.HealthCheckRequest{Service: "ratelimit"})
	if err != nil {
		t.Fatal(err)
	}
	var failing atomic.Bool
	check := func(context.Context) error {
		if failing.Load() {
			return errors.New("backend down")
		}
		return nil
	}
	rctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { h.Run(rctx, check, 10*time.Millisecond) })
	defer func() { stop(); wg.Wait() }()

	if st := recvStatus(t, w); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first status %v, want SERVING", st)
	}
	healthcheck("serving", 200, "OK")
	failing.Store(true)
	if st := recvStatus(t, w); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("backend down: %v, want NOT_SERVING", st)
	}
	healthcheck("backend down", 500, "NOT_SERVING")
	failing.Store(false)
	if st := recvStatus(t, w); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("backend back: %v, want SERVING", st)
	}
	h.Shutdown()
	if st := recvStatus(t, w); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("shutdown: %v, want NOT_SERVING", st)
	}
	if _, err := w.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("after shutdown, Watch ends with %v; want Unavailable", err)
	}
	healthcheck("shut down", 500, "NOT_SERVING")

	u, err := c.Watch(ctx, &healthpb.HealthCheckRequest{Service: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if st := recvStatus(t, u); st != healthpb.HealthCheckResponse_SERVICE_UNKNOWN {
		t.Fatalf("Watch(other): %v, want SERVICE_UNKNOWN", st)
	}
}

// postJSON posts body to /json of web and returns the status and the body.
func postJSON(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func TestJSON(t *testing.T) {
	web := httptest.NewServer(rls.JSONHandler(opsServer(t, memStore(t), rls.Ops{})))
	defer web.Close()
	req := `{"domain": "messaging", "descriptors": [{"entries": [{"key": "message_type", "value": "marketing"}, {"key": "to_number", "value": "2061234567"}]}]}`
	for i := 1; i <= 6; i++ {
		code, body := postJSON(t, web.URL, req)
		var resp rlsv3.RateLimitResponse
		if err := protojson.Unmarshal(body, &resp); err != nil {
			t.Fatalf("request %d: %d %s: %v", i, code, body, err)
		}
		wantCode, wantOverall, left := 200, rlsv3.RateLimitResponse_OK, uint32(5-i)
		if i == 6 {
			wantCode, wantOverall, left = 429, rlsv3.RateLimitResponse_OVER_LIMIT, 0
		}
		if code != wantCode || resp.OverallCode != wantOverall || len(resp.Statuses) != 1 ||
			resp.Statuses[0].LimitRemaining != left || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 5 {
			t.Fatalf("request %d: %d %s; want %d %v with %d left of 5", i, code, body, wantCode, wantOverall, left)
		}
	}
	for _, c := range []struct{ body, want string }{
		{`{"domain": "messaging"`, "not a RateLimitRequest"},
		{`{"domain": "messaging", "descriptors": [{"entries": [{"key": "k"}]}], "bogus": 1}`, "not a RateLimitRequest"},
		{`{"domain": "", "descriptors": [{"entries": [{"key": "k"}]}]}`, "empty domain"},
		{`{"domain": "messaging"}`, "no descriptors"},
	} {
		code, body := postJSON(t, web.URL, c.body)
		if code != 400 || !bytes.Contains(body, []byte(c.want)) {
			t.Errorf("POST %s: %d %q; want 400 with %q", c.body, code, body, c.want)
		}
	}
	resp, err := http.Get(web.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET /json: %d, Allow %q; want 405, POST", resp.StatusCode, resp.Header.Get("Allow"))
	}
	if code, _ := postJSON(t, web.URL, `{"domain": "`+string(bytes.Repeat([]byte("a"), rls.MaxJSONBody))+`"}`); code != 413 {
		t.Errorf("a body over MaxJSONBody: %d, want 413", code)
	}
}

func TestJSONRedisDownIs503(t *testing.T) {
	if !redistest.Available() {
		t.Skip("redis-server not installed: apt-get install redis-server")
	}
	srv := redistest.Start(t)
	web := httptest.NewServer(rls.JSONHandler(opsServer(t, redisStore(t, srv), rls.Ops{})))
	defer web.Close()
	req := `{"domain": "mongo_cps", "descriptors": [{"entries": [{"key": "database", "value": "users"}]}]}`
	if code, body := postJSON(t, web.URL, req); code != 200 {
		t.Fatalf("Redis up: %d %s, want 200", code, body)
	}
	srv.Kill(t)
	if code, body := postJSON(t, web.URL, req); code != 503 || !bytes.Contains(body, []byte("cannot decide")) {
		t.Fatalf("Redis down: %d %s, want 503 cannot decide", code, body)
	}
}

func TestShadowModeEverywhere(t *testing.T) {
	conn, _ := serveGRPC(t, opsServer(t, memStore(t), rls.Ops{ShadowMode: true}))
	c := rlsv3.NewRateLimitServiceClient(conn)
	for i := 1; i <= 7; i++ {
		r := ask(t, c, "messaging", 0, marketing)
		wantCodes(t, "shadow "+strconv.Itoa(i), r, "OK", "OK")
		if left := r.Statuses[0].LimitRemaining; left != uint32(max(5-i, 0)) {
			t.Fatalf("request %d: %d left, want %d: a shadow rule is counted", i, left, max(5-i, 0))
		}
	}
	// requests_per_unit 0 (example 3's black-listed address) is over on every request, and OK in
	// shadow mode, with its limit reported.
	r := ask(t, c, "edge_proxy_per_ip", 0, desc("remote_address", "50.0.0.5"))
	wantCodes(t, "blocked", r, "OK", "OK")
	if r.Statuses[0].CurrentLimit == nil {
		t.Fatalf("blocked: %v, want its limit of 0", r)
	}
	// Without SHADOW_MODE, the same server's limit holds.
	conn, _ = serveGRPC(t, opsServer(t, memStore(t), rls.Ops{}))
	c = rlsv3.NewRateLimitServiceClient(conn)
	for range 5 {
		ask(t, c, "messaging", 0, marketing)
	}
	wantCodes(t, "enforced", ask(t, c, "messaging", 0, marketing), "OVER_LIMIT", "OVER_LIMIT")
	wantCodes(t, "blocked, enforced", ask(t, c, "edge_proxy_per_ip", 0, desc("remote_address", "50.0.0.5")), "OVER_LIMIT", "OVER_LIMIT")
}

func TestResponseHeaders(t *testing.T) {
	conn, _ := serveGRPC(t, opsServer(t, memStore(t), rls.Ops{ResponseHeaders: true}))
	c := rlsv3.NewRateLimitServiceClient(conn)
	headers := func(r *rlsv3.RateLimitResponse) map[string]string {
		m := map[string]string{}
		for _, h := range r.ResponseHeadersToAdd {
			m[h.Key] = h.Value
		}
		return m
	}
	// Two descriptors: 5 a day (marketing) and 500 a second (mongo's users is in another
	// domain), so one domain with two limits: example 4's.
	for i := 1; i <= 6; i++ {
		r := ask(t, c, "messaging", 0, marketing, desc("message_type", "other"))
		h := headers(r)
		left := max(5-i, 0)
		if len(h) != 3 || h["RateLimit-Limit"] != "5" || h["RateLimit-Remaining"] != strconv.Itoa(left) {
			t.Fatalf("request %d: headers %v; want RateLimit-Limit 5, RateLimit-Remaining %d", i, h, left)
		}
		reset, err := strconv.Atoi(h["RateLimit-Reset"])
		if err != nil || reset < 1 || reset > 86400 {
			t.Fatalf("request %d: RateLimit-Reset %q; want 1-86400 seconds of a day's window", i, h["RateLimit-Reset"])
		}
	}
	// No limited descriptor: no headers.
	if r := ask(t, c, "messaging", 0, desc("message_type", "other")); len(r.ResponseHeadersToAdd) != 0 {
		t.Fatalf("no limit: headers %v, want none", r.ResponseHeadersToAdd)
	}
	// Without the option, none either.
	conn, _ = serveGRPC(t, opsServer(t, memStore(t), rls.Ops{}))
	if r := ask(t, rlsv3.NewRateLimitServiceClient(conn), "messaging", 0, marketing); len(r.ResponseHeadersToAdd) != 0 {
		t.Fatalf("headers off: %v, want none", r.ResponseHeadersToAdd)
	}
}

func TestNearLimit(t *testing.T) {
	for _, c := range []struct {
		ratio float64
		hits  uint32
		want  []int64 // the near-limit hits counted after each request
	}{
		{0, 1, []int64{0, 0, 0, 0, 1, 1}},    // 0.8 of 5 is 4: the 5th hit is near; the 6th is over
		{0.5, 1, []int64{0, 0, 1, 2, 3, 3}},  // floor(2.5) = 2: the 3rd, 4th and 5th
		{1, 1, []int64{0, 0, 0, 0, 0, 0}},    // nothing is past the whole limit and within it
		{0.4, 2, []int64{0, 2, 2, 2, 2, 2}},  // T = 2; 2 then 4 used: min(4-2, 2); then over
		{0.2, 3, []int64{2, 2, 2, 2, 2, 2}},  // T = 1; 3 used: min(3-1, 3); then 6 > 5, over
		{0.1, 5, []int64{5, 5, 5, 5, 5, 5}},  // T = 0; all 5 at once
		{0.8, 0, []int64{0, 0, 0, 0, 1, 1}},  // hits_addend 0 means 1
		{0.79, 1, []int64{0, 0, 0, 1, 2, 2}}, // floor(3.95) = 3
	} {
		var near atomic.Int64
		var domains sync.Map
		conn, _ := serveGRPC(t, opsServer(t, memStore(t), rls.Ops{NearLimitRatio: c.ratio, NearLimit: func(domain string, n int64) {
			domains.Store(domain, true)
			near.Add(n)
		}}))
		cl := rlsv3.NewRateLimitServiceClient(conn)
		for i, want := range c.want {
			ask(t, cl, "messaging", c.hits, marketing)
			if got := near.Load(); got != want {
				t.Fatalf("ratio %v, hits %d: after request %d, %d near-limit hits; want %d", c.ratio, c.hits, i+1, got, want)
			}
		}
		domains.Range(func(k, _ any) bool {
			if k != "messaging" {
				t.Errorf("near limit counted for domain %v, want messaging", k)
			}
			return true
		})
	}
	for _, bad := range []float64{-0.1, 1.5} {
		if _, err := rls.New(rls.Options{Service: &service.Service{}, Config: testConfig(t), Ops: rls.Ops{NearLimitRatio: bad}}); err == nil {
			t.Errorf("NearLimitRatio %v: no error", bad)
		}
	}
}

// TestHealthOf checks a Health of other names: it answers those, NOT_FOUND and SERVICE_UNKNOWN
// for the rate limit service's, and lists only its own.
func TestHealthOf(t *testing.T) {
	h := rls.NewHealthOf("", "envoy.service.rate_limit_quota.v3.RateLimitQuotaService")
	ctx := context.Background()
	for _, svc := range []string{"", "envoy.service.rate_limit_quota.v3.RateLimitQuotaService"} {
		if r, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: svc}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Check(%q) = %v, %v; want SERVING", svc, r, err)
		}
	}
	for _, svc := range []string{"ratelimit", "envoy.service.ratelimit.v3.RateLimitService"} {
		if _, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: svc}); status.Code(err) != codes.NotFound {
			t.Errorf("Check(%q): %v, want NotFound", svc, err)
		}
	}
	h.SetServing(false)
	l, err := h.List(ctx, &healthpb.HealthListRequest{})
	if err != nil || len(l.Statuses) != 2 || l.Statuses["envoy.service.rate_limit_quota.v3.RateLimitQuotaService"].GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("List = %v, %v; want 2 services NOT_SERVING", l, err)
	}
}
