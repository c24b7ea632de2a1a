package rls_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/policy/envoyconf"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/rls"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// testConfig is the configuration of the tests: envoyproxy/ratelimit's README examples, and the
// other features.
func testConfig(t testing.TB) *envoyconf.Config {
	t.Helper()
	cfg, err := envoyconf.Load("../../policy/envoyconf/testdata/readme")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// serve serves ShouldRateLimit on store at 127.0.0.1:0 and returns a client connected over TCP.
func serve(t testing.TB, store admit.Store) (rlsv3.RateLimitServiceClient, *grpc.ClientConn) {
	t.Helper()
	return serveConfig(t, store, testConfig(t))
}

// serveConfig is serve with the configuration cfg.
func serveConfig(t testing.TB, store admit.Store, cfg *envoyconf.Config) (rlsv3.RateLimitServiceClient, *grpc.ClientConn) {
	t.Helper()
	return serveServer(t, newServer(t, store, cfg))
}

// serveServer serves s at 127.0.0.1:0 and returns a client connected over TCP.
func serveServer(t testing.TB, s *rls.Server) (rlsv3.RateLimitServiceClient, *grpc.ClientConn) {
	t.Helper()
	g, _ := rls.NewGRPCServer(s)
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
	return rlsv3.NewRateLimitServiceClient(conn), conn
}

// newServer returns a Server of cfg deciding on store.
func newServer(t testing.TB, store admit.Store, cfg *envoyconf.Config) *rls.Server {
	t.Helper()
	return newServerOpts(t, store, cfg, rls.Options{})
}

// newServerOpts is newServer with opts (their Service and Config set here).
func newServerOpts(t testing.TB, store admit.Store, cfg *envoyconf.Config, opts rls.Options) *rls.Server {
	t.Helper()
	keys, err := admit.NewKeyBuilder([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(store, keys, &policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	opts.Service, opts.Config = svc, cfg
	s, err := rls.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// memStore returns a memstore whose clock stands 10 s into a day, so that no aligned window ends
// during a test.
func memStore(t testing.TB) *memstore.Store {
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	s := memstore.New(memstore.Options{Now: func() time.Time { return now }})
	t.Cleanup(func() { s.Close() })
	return s
}

// desc returns a descriptor of key, value pairs.
func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func ask(t *testing.T, c rlsv3.RateLimitServiceClient, domain string, hits uint32, ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := c.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds, HitsAddend: hits})
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

// codes returns the overall code, then each descriptor's, as their names.
func codesOf(r *rlsv3.RateLimitResponse) []string {
	cs := []string{r.OverallCode.String()}
	for _, s := range r.Statuses {
		cs = append(cs, s.Code.String())
	}
	return cs
}

func wantCodes(t *testing.T, step string, r *rlsv3.RateLimitResponse, want ...string) {
	t.Helper()
	got := codesOf(r)
	if len(got) != len(want) {
		t.Fatalf("%s: codes %v, want %v", step, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: codes %v, want %v", step, got, want)
		}
	}
}

// stores runs f against memstore and, when redis-server is available, Redis.
func stores(t *testing.T, f func(t *testing.T, store admit.Store)) {
	t.Run("memory", func(t *testing.T) { f(t, memStore(t)) })
	t.Run("redis", func(t *testing.T) {
		if !redistest.Available() {
			t.Skip("redis-server not installed")
		}
		f(t, redisStore(t, redistest.Start(t)))
	})
}

// redisStore returns a redisstore on srv, with patient timeouts (2 s): the tests check answers, not
// deadlines.
func redisStore(t *testing.T, srv *redistest.Server) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(redisstore.Config{URL: srv.URL(), CommandTimeout: 2 * time.Second, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestAllowedThenOverLimit(t *testing.T) {
	stores(t, func(t *testing.T, store admit.Store) {
		c, _ := serve(t, store)
		d := desc("message_type", "marketing", "to_number", "2061111111")
		for i := range 5 {
			r := ask(t, c, "messaging", 0, d)
			wantCodes(t, "allowed", r, "OK", "OK")
			st := r.Statuses[0]
			if st.CurrentLimit.GetRequestsPerUnit() != 5 || st.CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_DAY || st.LimitRemaining != uint32(4-i) {
				t.Fatalf("request %d: status %v", i, st)
			}
			if du := st.DurationUntilReset.AsDuration(); du <= 0 || du > 24*time.Hour {
				t.Fatalf("request %d: duration_until_reset %v", i, du)
			}
		}
		r := ask(t, c, "messaging", 0, d)
		wantCodes(t, "over", r, "OVER_LIMIT", "OVER_LIMIT")
		// Another number has its own counter; a descriptor with no rule is OK with no limit.
		r = ask(t, c, "messaging", 0, desc("message_type", "marketing", "to_number", "2062222222"), desc("message_type", "other"))
		wantCodes(t, "other number", r, "OK", "OK", "OK")
		if r.Statuses[1].CurrentLimit != nil {
			t.Errorf("no rule: current_limit %v", r.Statuses[1].CurrentLimit)
		}
		// One enforced descriptor over: the response is over, and the other descriptor's status OK.
		r = ask(t, c, "messaging", 0, d, desc("to_number", "2063333333"))
		wantCodes(t, "mixed", r, "OVER_LIMIT", "OVER_LIMIT", "OK")
	})
}

func TestHitsAddend(t *testing.T) {
	stores(t, func(t *testing.T, store admit.Store) {
		c, _ := serve(t, store)
		r := ask(t, c, "features", 2, desc("path", "/api/x")) // 3 per hour
		wantCodes(t, "2 of 3", r, "OK", "OK")
		if r.Statuses[0].LimitRemaining != 1 {
			t.Errorf("remaining %d, want 1", r.Statuses[0].LimitRemaining)
		}
		// The descriptor's hits_addend overrides the request's; 2 do not fit in 1: rejected, not consumed.
		d := desc("path", "/api/x")
		d.HitsAddend = wrapperspb.UInt64(2)
		wantCodes(t, "2 more", ask(t, c, "features", 1, d), "OVER_LIMIT", "OVER_LIMIT")
		// A hits_addend above the limit is over, never an error.
		d.HitsAddend = wrapperspb.UInt64(4)
		wantCodes(t, "4 of 3", ask(t, c, "features", 0, d), "OVER_LIMIT", "OVER_LIMIT")
		r = ask(t, c, "features", 0, desc("path", "/api/x")) // 0 means 1, not a peek
		wantCodes(t, "last", r, "OK", "OK")
		if r.Statuses[0].LimitRemaining != 0 {
			t.Errorf("remaining %d, want 0", r.Statuses[0].LimitRemaining)
		}
		wantCodes(t, "full", ask(t, c, "features", 0, desc("path", "/api/x")), "OVER_LIMIT", "OVER_LIMIT")
	})
}

func TestShadowUnlimitedReplacesBlocked(t *testing.T) {
	stores(t, func(t *testing.T, store admit.Store) {
		c, _ := serve(t, store)
		// Shadow: 1 per hour; the second is over, and still OK.
		wantCodes(t, "shadow 1", ask(t, c, "features", 0, desc("user", "alice")), "OK", "OK")
		r := ask(t, c, "features", 0, desc("user", "alice"))
		wantCodes(t, "shadow 2", r, "OK", "OK")
		if r.Statuses[0].LimitRemaining != 0 || r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 1 {
			t.Errorf("shadow status %v", r.Statuses[0])
		}
		// Unlimited beats the wildcard.
		for range 5 {
			r := ask(t, c, "features", 0, desc("path", "/api/admin"))
			wantCodes(t, "unlimited", r, "OK", "OK")
			if r.Statuses[0].CurrentLimit != nil || r.Statuses[0].LimitRemaining != 1<<32-1 {
				t.Fatalf("unlimited status %v", r.Statuses[0])
			}
		}
		// gold (5 per hour) replaces free (2 per hour) when both match.
		for i := range 5 {
			r := ask(t, c, "features", 0, desc("plan", "free"), desc("plan", "gold"))
			wantCodes(t, "gold", r, "OK", "OK", "OK")
			if r.Statuses[0].CurrentLimit != nil || r.Statuses[1].CurrentLimit.GetName() != "gold" {
				t.Fatalf("request %d: statuses %v", i, r.Statuses)
			}
		}
		wantCodes(t, "gold over", ask(t, c, "features", 0, desc("plan", "free"), desc("plan", "gold")), "OVER_LIMIT", "OK", "OVER_LIMIT")
		// free alone was never counted.
		wantCodes(t, "free", ask(t, c, "features", 0, desc("plan", "free")), "OK", "OK")
		// requests_per_unit 0 blocks, in the README's example 3.
		wantCodes(t, "blocked ip", ask(t, c, "edge_proxy_per_ip", 0, desc("remote_address", "50.0.0.5")), "OVER_LIMIT", "OVER_LIMIT")
		wantCodes(t, "other ip", ask(t, c, "edge_proxy_per_ip", 0, desc("remote_address", "10.0.0.1")), "OK", "OK")
	})
}

// countingStore counts the calls of TakeAll on a real Store.
type countingStore struct {
	admit.Store
	calls atomic.Int64
}

func (s *countingStore) TakeAll(ctx context.Context, rs []admit.Request, ds []admit.Decision) (bool, error) {
	s.calls.Add(1)
	return s.Store.TakeAll(ctx, rs, ds)
}

// TestInvalidArgument: a request of no domain or no descriptors, the only ones envoyproxy/ratelimit
// refuses, is INVALID_ARGUMENT, before any call of the Store.
func TestInvalidArgument(t *testing.T) {
	store := &countingStore{Store: memStore(t)}
	c, _ := serve(t, store)
	tests := map[string]*rlsv3.RateLimitRequest{
		"empty domain":   {Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("a", "b")}},
		"no descriptors": {Domain: "features"},
	}
	for name, req := range tests {
		_, err := c.ShouldRateLimit(context.Background(), req)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if n := store.calls.Load(); n != 0 {
		t.Errorf("%d calls of the Store for invalid requests, want 0", n)
	}
}

func TestRedisDownIsUnavailable(t *testing.T) {
	if !redistest.Available() {
		t.Skip("redis-server not installed")
	}
	srv := redistest.Start(t)
	c, _ := serve(t, redisStore(t, srv))
	wantCodes(t, "up", ask(t, c, "mongo_cps", 0, desc("database", "users")), "OK", "OK")
	srv.Kill(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "mongo_cps", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("database", "users")}})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Redis down: %v %v, want the status Unavailable", resp, err)
	}
	// A request with no rule needs no backend: it is still answered.
	wantCodes(t, "no rule", ask(t, c, "mongo_cps", 0, desc("database", "other")), "OK", "OK")
}

func TestHealth(t *testing.T) {
	_, conn := serve(t, memStore(t))
	h := healthpb.NewHealthClient(conn)
	for _, svc := range []string{"", "envoy.service.ratelimit.v3.RateLimitService"} {
		r, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q: %v %v", svc, r, err)
		}
	}
}

func TestOverrideAndExtensions(t *testing.T) {
	c, _ := serve(t, memStore(t))
	// A descriptor's limit override replaces the configured numbers: 1 per hour instead of 500 per second.
	d := desc("database", "users")
	d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
	r := ask(t, c, "mongo_cps", 0, d)
	wantCodes(t, "override 1", r, "OK", "OK")
	if l := r.Statuses[0].CurrentLimit; l.GetRequestsPerUnit() != 1 || l.GetUnit() != rlsv3.RateLimitResponse_RateLimit_HOUR {
		t.Errorf("override: current_limit %v", l)
	}
	wantCodes(t, "override 2", ask(t, c, "mongo_cps", 0, d), "OVER_LIMIT", "OVER_LIMIT")
	// admit's gcra with a window of 10s and a burst of 4: 4 at once, then over; the unit is UNKNOWN.
	for i := range 4 {
		r := ask(t, c, "features", 0, desc("api_key", "k1"))
		wantCodes(t, "burst", r, "OK", "OK")
		if l := r.Statuses[0].CurrentLimit; l.GetRequestsPerUnit() != 10 || l.GetUnit() != rlsv3.RateLimitResponse_RateLimit_UNKNOWN {
			t.Fatalf("request %d: current_limit %v", i, l)
		}
	}
	wantCodes(t, "after burst", ask(t, c, "features", 0, desc("api_key", "k1")), "OVER_LIMIT", "OVER_LIMIT")
}

// TestAtomicAcrossDescriptors: in a domain with atomic: true, a request's descriptors with one
// first entry are decided together, so the one over its limit consumes nothing in the other; in a
// domain without, the other is counted.
func TestAtomicAcrossDescriptors(t *testing.T) {
	stores(t, func(t *testing.T, store admit.Store) {
		c, _ := serve(t, store)
		for _, tc := range []struct {
			domain string
			want   uint32 // the client's limit_remaining after the third request
		}{{"atomic", 8}, {"separate", 7}} {
			client, path := desc("client", "a"), desc("client", "a", "path", "/x")
			for i := range 2 {
				r := ask(t, c, tc.domain, 0, client, path)
				wantCodes(t, fmt.Sprintf("%s: request %d", tc.domain, i+1), r, "OK", "OK", "OK")
			}
			r := ask(t, c, tc.domain, 0, client, path)
			wantCodes(t, tc.domain+": request 3", r, "OVER_LIMIT", "OK", "OVER_LIMIT")
			if got := r.Statuses[0].LimitRemaining; got != tc.want {
				t.Errorf("%s: request 3: the client's limit_remaining %d, want %d", tc.domain, got, tc.want)
			}
			// The client alone: atomic has 8 left before this hit, separate 7.
			r = ask(t, c, tc.domain, 0, client)
			if got := r.Statuses[0].LimitRemaining; got != tc.want-1 {
				t.Errorf("%s: then the client alone: limit_remaining %d, want %d", tc.domain, got, tc.want-1)
			}
		}
	})
}

// repeatConfig has one limit of 3 per hour per user, in a domain with atomic: true and in one
// without.
const repeatConfig = `
domain: %s
%s
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 3
`

// TestRepeatedDescriptors: in a domain with atomic: true, descriptors repeated in one request are
// decided together, their hits summed: 4 × [user=x] under a limit of 3 is over, and consumes
// nothing; 2 × fits, and consumes 2. In a domain without, each repetition is counted in turn, as
// envoyproxy/ratelimit counts them: OK, OK, OK, OVER_LIMIT, and 3 consumed.
func TestRepeatedDescriptors(t *testing.T) {
	stores(t, func(t *testing.T, store admit.Store) {
		cfg, err := envoyconf.Parse(
			envoyconf.File{Name: "atomic.yaml", Data: []byte(fmt.Sprintf(repeatConfig, "atomic", "atomic: true"))},
			envoyconf.File{Name: "separate.yaml", Data: []byte(fmt.Sprintf(repeatConfig, "separate", ""))},
		)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := serveConfig(t, store, cfg)
		user := desc("user", "x")
		remaining := func(r *rlsv3.RateLimitResponse) []uint32 {
			var rs []uint32
			for _, st := range r.Statuses {
				rs = append(rs, st.LimitRemaining)
			}
			return rs
		}

		r := ask(t, c, "atomic", 0, user, user, user, user)
		wantCodes(t, "atomic: 4 of 3", r, "OVER_LIMIT", "OVER_LIMIT", "OVER_LIMIT", "OVER_LIMIT", "OVER_LIMIT")
		if got := remaining(r); got[0] != 3 || got[3] != 3 {
			t.Errorf("atomic: 4 of 3: limit_remaining %v; want 3 each, nothing counted", got)
		}
		r = ask(t, c, "atomic", 0, user, user)
		wantCodes(t, "atomic: then 2 of 3", r, "OK", "OK", "OK")
		if got := remaining(r); got[0] != 1 || got[1] != 1 {
			t.Errorf("atomic: then 2 of 3: limit_remaining %v; want 1 each", got)
		}
		wantCodes(t, "atomic: then 2 of the 1 left", ask(t, c, "atomic", 0, user, user), "OVER_LIMIT", "OVER_LIMIT", "OVER_LIMIT")
		r = ask(t, c, "atomic", 0, user)
		wantCodes(t, "atomic: then 1 of the 1 left", r, "OK", "OK")
		if got := r.Statuses[0].LimitRemaining; got != 0 {
			t.Errorf("atomic: the last one: limit_remaining %d; want 0", got)
		}
		// hits_addend is summed too: 2 × 2 hits of a fresh user are 4, over.
		other := desc("user", "y")
		wantCodes(t, "atomic: 2 × 2 hits", ask(t, c, "atomic", 2, other, other), "OVER_LIMIT", "OVER_LIMIT", "OVER_LIMIT")
		wantCodes(t, "atomic: then 3 hits", ask(t, c, "atomic", 3, other), "OK", "OK")

		r = ask(t, c, "separate", 0, user, user, user, user)
		wantCodes(t, "separate: 4 of 3", r, "OVER_LIMIT", "OK", "OK", "OK", "OVER_LIMIT")
		if got := remaining(r); got[0] != 2 || got[2] != 0 || got[3] != 0 {
			t.Errorf("separate: 4 of 3: limit_remaining %v; want 2, 1, 0, 0", got)
		}
		wantCodes(t, "separate: then 1", ask(t, c, "separate", 0, user), "OVER_LIMIT", "OVER_LIMIT")
	})
}
