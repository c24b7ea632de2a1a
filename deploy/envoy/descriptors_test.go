package envoy_test

import (
	"context"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/policy/envoyconf"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/rls"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// A request as the rate limit filter sees it: the client's address (after Envoy's
// x-forwarded-for handling) and its headers, with lower-case names and the pseudo-headers
// :method, :path and :authority.
type request struct {
	remote  string
	headers map[string]string
}

// descriptors returns the descriptors Envoy's rate limit filter sends for req under the
// rate_limits rls, in order: one per rate limit whose actions all produce an entry. It
// implements the actions the shipped configurations use, and fails the test on any other.
func descriptors(t *testing.T, rls []*routev3.RateLimit, req request) []*ratelimitv3.RateLimitDescriptor {
	t.Helper()
	var out []*ratelimitv3.RateLimitDescriptor
	for _, rl := range rls {
		if rl.GetStage().GetValue() != 0 || rl.GetDisableKey() != "" || rl.GetLimit() != nil || rl.GetHitsAddend() != nil || rl.GetApplyOnStreamDone() {
			t.Fatalf("rate limit %v: stage, disable_key, limit, hits_addend and apply_on_stream_done are not implemented here", rl)
		}
		d := &ratelimitv3.RateLimitDescriptor{}
		complete := true
		for _, a := range rl.GetActions() {
			e, ok := entry(t, a, req)
			if !ok {
				complete = false
				break
			}
			if e != nil {
				d.Entries = append(d.Entries, e)
			}
		}
		if complete && len(d.Entries) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// entry returns the entry action a produces for req; ok false when the action cancels the
// descriptor, a nil entry when it adds none (request_headers with skip_if_absent).
func entry(t *testing.T, a *routev3.RateLimit_Action, req request) (e *ratelimitv3.RateLimitDescriptor_Entry, ok bool) {
	t.Helper()
	switch s := a.GetActionSpecifier().(type) {
	case *routev3.RateLimit_Action_RemoteAddress_:
		return &ratelimitv3.RateLimitDescriptor_Entry{Key: "remote_address", Value: req.remote}, true
	case *routev3.RateLimit_Action_GenericKey_:
		return &ratelimitv3.RateLimitDescriptor_Entry{Key: or(s.GenericKey.GetDescriptorKey(), "generic_key"), Value: s.GenericKey.GetDescriptorValue()}, true
	case *routev3.RateLimit_Action_RequestHeaders_:
		v, present := req.headers[strings.ToLower(s.RequestHeaders.GetHeaderName())]
		if !present {
			return nil, s.RequestHeaders.GetSkipIfAbsent()
		}
		return &ratelimitv3.RateLimitDescriptor_Entry{Key: s.RequestHeaders.GetDescriptorKey(), Value: v}, true
	case *routev3.RateLimit_Action_HeaderValueMatch_:
		m := s.HeaderValueMatch
		matched := true
		for _, h := range m.GetHeaders() {
			matched = matched && headerMatches(t, h, req)
		}
		expect := m.GetExpectMatch() == nil || m.GetExpectMatch().GetValue()
		if matched != expect {
			return nil, false
		}
		return &ratelimitv3.RateLimitDescriptor_Entry{Key: or(m.GetDescriptorKey(), "header_match"), Value: m.GetDescriptorValue()}, true
	default:
		t.Fatalf("rate limit action %T is not implemented here", s)
		return nil, false
	}
}

// headerMatches reports whether req matches h, as Envoy's HeaderMatcher does for the kinds the
// shipped configurations use.
func headerMatches(t *testing.T, h *routev3.HeaderMatcher, req request) bool {
	t.Helper()
	v, present := req.headers[strings.ToLower(h.GetName())]
	if h.GetTreatMissingHeaderAsEmpty() {
		present = true
	}
	var match bool
	switch s := h.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_PresentMatch:
		match = present == s.PresentMatch
	case *routev3.HeaderMatcher_StringMatch:
		match = present && stringMatches(t, s.StringMatch, v)
	default:
		t.Fatalf("header matcher %T is not implemented here", s)
	}
	return match != h.GetInvertMatch()
}

// stringMatches reports whether v matches m; a safe_regex must match the whole value, as RE2's
// FullMatch in Envoy.
func stringMatches(t *testing.T, m *matcherv3.StringMatcher, v string) bool {
	t.Helper()
	if m.GetIgnoreCase() {
		v = strings.ToLower(v)
	}
	lower := func(s string) string {
		if m.GetIgnoreCase() {
			return strings.ToLower(s)
		}
		return s
	}
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		return v == lower(p.Exact)
	case *matcherv3.StringMatcher_Prefix:
		return strings.HasPrefix(v, lower(p.Prefix))
	case *matcherv3.StringMatcher_Suffix:
		return strings.HasSuffix(v, lower(p.Suffix))
	case *matcherv3.StringMatcher_Contains:
		return strings.Contains(v, lower(p.Contains))
	case *matcherv3.StringMatcher_SafeRegex:
		if m.GetIgnoreCase() {
			t.Fatal("ignore_case with safe_regex is not implemented here (Envoy ignores it)")
		}
		re, err := regexp.Compile(`^(?:` + p.SafeRegex.GetRegex() + `)$`)
		if err != nil {
			t.Fatalf("safe_regex %q: %v", p.SafeRegex.GetRegex(), err)
		}
		return re.MatchString(v)
	default:
		t.Fatalf("string matcher %T is not implemented here", p)
		return false
	}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// descriptorString returns d as Envoy logs it: [k=v, k=v].
func descriptorString(d *ratelimitv3.RateLimitDescriptor) string {
	var parts []string
	for _, e := range d.GetEntries() {
		parts = append(parts, e.GetKey()+"="+e.GetValue())
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// serveRLS serves admit's rate limit service with cfg, in process on 127.0.0.1:0, on a memstore
// whose clock stands still 10 s into a day (no aligned window ends during a test), and returns a
// client of it over gRPC.
func serveRLS(t *testing.T, cfg *envoyconf.Config) rlsv3.RateLimitServiceClient {
	t.Helper()
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	store := memstore.New(memstore.Options{Now: func() time.Time { return now }})
	t.Cleanup(func() { store.Close() })
	keys, err := admit.NewKeyBuilder([]byte("a test secret of at least 16 bytes"))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(store, keys, &policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := rls.New(rls.Options{Service: svc, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
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
	return rlsv3.NewRateLimitServiceClient(conn)
}

// ask sends one ShouldRateLimit of ds in domain, as the filter does (hits_addend unset: 1).
func ask(t *testing.T, c rlsv3.RateLimitServiceClient, domain string, ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds})
	if err != nil {
		t.Fatalf("ShouldRateLimit %v: %v", ds, err)
	}
	if len(r.GetStatuses()) != len(ds) {
		t.Fatalf("%d statuses for %d descriptors", len(r.GetStatuses()), len(ds))
	}
	return r
}

// checkLimited asks for d alone on a fresh service until it is over: the first answer must carry
// a current_limit (an unmatched descriptor is answered OK without one, and is never limited),
// then requests_per_unit answers are OK and the next is OVER_LIMIT.
func checkLimited(t *testing.T, cfg *envoyconf.Config, domain string, d *ratelimitv3.RateLimitDescriptor) {
	t.Helper()
	c := serveRLS(t, cfg)
	first := ask(t, c, domain, d)
	limit := first.GetStatuses()[0].GetCurrentLimit()
	if limit == nil {
		t.Fatalf("%s matches no rule of domain %q: it would never be limited", descriptorString(d), domain)
	}
	n := limit.GetRequestsPerUnit()
	if n == 0 || n > 10000 {
		t.Fatalf("%s: requests_per_unit %d: this test expects 1 to 10000", descriptorString(d), n)
	}
	for i := uint32(1); i <= n; i++ {
		r := first
		if i > 1 {
			r = ask(t, c, domain, d)
		}
		if r.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			t.Fatalf("%s: request %d of %d is %v, want OK", descriptorString(d), i, n, r.GetOverallCode())
		}
	}
	if r := ask(t, c, domain, d); r.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("%s: request %d, over the limit of %d %v, is %v, want OVER_LIMIT", descriptorString(d), n+1, n, limit.GetUnit(), r.GetOverallCode())
	}
	t.Logf("%s: rule %q, %d a %v: OK %d times, then OVER_LIMIT", descriptorString(d), limit.GetName(), n, limit.GetUnit(), n)
}

// samples are the requests every shipped configuration is tried with, and the descriptor keys
// each must produce (the keys of each descriptor, comma-separated, in order).
var samples = []struct {
	name string
	req  request
	want []string
}{
	{"GET signed in", request{"203.0.113.7", map[string]string{":method": "GET", ":path": "/items", "x-user-id": "alice"}},
		[]string{"remote_address", "route,user_id"}},
	{"GET anonymous", request{"203.0.113.8", map[string]string{":method": "GET", ":path": "/items"}},
		[]string{"remote_address"}},
	{"POST signed in", request{"203.0.113.9", map[string]string{":method": "POST", ":path": "/items", "x-user-id": "bob"}},
		[]string{"remote_address", "route,user_id", "method,remote_address"}},
	{"DELETE anonymous", request{"198.51.100.1", map[string]string{":method": "DELETE", ":path": "/items/1"}},
		[]string{"remote_address", "method,remote_address"}},
}

// checkEdge derives the descriptors of every sample request under e's rate_limits and checks
// that admit, configured with cfg, limits each of them in the filter's domain, and the request's
// descriptors together: OK until the smallest limit is spent, then OVER_LIMIT.
func checkEdge(t *testing.T, e edge, cfg *envoyconf.Config) {
	t.Helper()
	domain := e.filter.GetDomain()
	if !slices.Contains(cfg.Domains(), domain) {
		t.Fatalf("the filter's domain %q is not one of the rate limit configuration's, %q", domain, cfg.Domains())
	}
	seen := map[string]bool{}
	for _, s := range samples {
		t.Run(s.name, func(t *testing.T) {
			ds := descriptors(t, e.rateLimits, s.req)
			var got []string
			for _, d := range ds {
				var keys []string
				for _, en := range d.GetEntries() {
					keys = append(keys, en.GetKey())
				}
				got = append(got, strings.Join(keys, ","))
			}
			if strings.Join(got, " ") != strings.Join(s.want, " ") {
				t.Fatalf("descriptor keys %q, want %q", got, s.want)
			}
			for _, d := range ds {
				if k := descriptorString(d); !seen[k] {
					seen[k] = true
					checkLimited(t, cfg, domain, d)
				}
			}
			checkTogether(t, cfg, domain, ds)
		})
	}
}

// checkTogether sends ds in one request, as Envoy does, until the request is over.
func checkTogether(t *testing.T, cfg *envoyconf.Config, domain string, ds []*ratelimitv3.RateLimitDescriptor) {
	t.Helper()
	c := serveRLS(t, cfg)
	r := ask(t, c, domain, ds...)
	smallest := uint32(0)
	for i, st := range r.GetStatuses() {
		if st.GetCurrentLimit() == nil {
			t.Fatalf("%s matches no rule of domain %q: it would never be limited", descriptorString(ds[i]), domain)
		}
		if n := st.GetCurrentLimit().GetRequestsPerUnit(); smallest == 0 || n < smallest {
			smallest = n
		}
	}
	for i := uint32(2); i <= smallest; i++ {
		r = ask(t, c, domain, ds...)
	}
	if r.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("request %d of %d is %v, want OK", smallest, smallest, r.GetOverallCode())
	}
	if r = ask(t, c, domain, ds...); r.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("request %d, over the smallest limit %d, is %v, want OVER_LIMIT", smallest+1, smallest, r.GetOverallCode())
	}
}

// loadConfig loads the rate limit configuration directory as admit serve --envoy-config does.
func loadConfig(t *testing.T) *envoyconf.Config {
	t.Helper()
	cfg, err := envoyconf.Load("config")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestBootstrapDescriptorsAreLimited sends the descriptors envoy.yaml's actions build for the
// sample requests to admit configured with config/: each one is limited.
func TestBootstrapDescriptorsAreLimited(t *testing.T) {
	b, err := decodeBootstrap(readFile(t, "envoy.yaml"))
	if err != nil {
		t.Fatalf("envoy.yaml: %v", err)
	}
	checkEdge(t, bootstrapEdge(t, b), loadConfig(t))
}

// TestRenamedKeyIsNotLimited shows what checkLimited guards against: envoy.yaml with the
// request_headers action's descriptor_key renamed sends [route=api, user=alice], which no rule
// of config/ matches, so admit answers OK with no current_limit however often it is sent.
func TestRenamedKeyIsNotLimited(t *testing.T) {
	good := string(readFile(t, "envoy.yaml"))
	if strings.Count(good, "descriptor_key: user_id") != 1 {
		t.Fatal("envoy.yaml does not name user_id once: update the test")
	}
	b, err := decodeBootstrap([]byte(strings.Replace(good, "descriptor_key: user_id", "descriptor_key: user", 1)))
	if err != nil {
		t.Fatal(err)
	}
	e := bootstrapEdge(t, b)
	ds := descriptors(t, e.rateLimits, samples[0].req)
	if len(ds) != 2 || descriptorString(ds[1]) != "[route=api, user=alice]" {
		t.Fatalf("descriptors %v, want [remote_address=…] and [route=api, user=alice]", ds)
	}
	c := serveRLS(t, loadConfig(t))
	for i := range 1002 {
		r := ask(t, c, e.filter.GetDomain(), ds[1])
		if st := r.GetStatuses()[0]; r.GetOverallCode() != rlsv3.RateLimitResponse_OK || st.GetCurrentLimit() != nil {
			t.Fatalf("request %d: %v with current_limit %v, want OK without one (no rule)", i+1, r.GetOverallCode(), st.GetCurrentLimit())
		}
	}
}
