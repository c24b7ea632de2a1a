package rls_test

import (
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/policy/envoyconf"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/rls"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// serveWith serves the configuration of dir on store with opts (its Service and Config set here).
func serveWith(t *testing.T, store admit.Store, dir string, opts rls.Options) rlsv3.RateLimitServiceClient {
	t.Helper()
	cfg, err := envoyconf.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
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

const (
	fieldsDir   = "../../policy/envoyconf/testdata/fields"
	upstreamDir = "../../policy/envoyconf/testdata/upstream"
)

// hits returns d with its own hits_addend n.
func hits(d *ratelimitv3.RateLimitDescriptor, n uint64) *ratelimitv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

// TestHitsAddendZeroChecks: a descriptor's hits_addend 0 checks without counting, as
// envoyproxy/ratelimit reads it; the request's 0 still means 1.
func TestHitsAddendZeroChecks(t *testing.T) {
	stores(t, func(t *testing.T, store admit.Store) {
		c, _ := serve(t, store)
		for range 3 { // 3 per hour: the checks take nothing
			r := ask(t, c, "features", 0, hits(desc("path", "/api/x"), 0))
			wantCodes(t, "check", r, "OK", "OK")
			if r.Statuses[0].LimitRemaining != 3 {
				t.Fatalf("remaining %d after checks, want 3", r.Statuses[0].LimitRemaining)
			}
		}
		wantCodes(t, "take 3", ask(t, c, "features", 3, desc("path", "/api/x")), "OK", "OK")
		r := ask(t, c, "features", 0, hits(desc("path", "/api/x"), 0))
		wantCodes(t, "check at the limit", r, "OK", "OK") // 3 of 3, none more asked
		if r.Statuses[0].LimitRemaining != 0 {
			t.Errorf("remaining %d, want 0", r.Statuses[0].LimitRemaining)
		}
		wantCodes(t, "one more", ask(t, c, "features", 0, desc("path", "/api/x")), "OVER_LIMIT", "OVER_LIMIT")
	})
}

// TestHitsAddendZeroResetNeverCounted: a check (hits_addend 0) of a key never counted reports the
// time until its aligned window ends, as envoyproxy/ratelimit does for every limited descriptor: on
// a configured rule and on a request's limit override, its unit minus now modulo the unit.
func TestHitsAddendZeroResetNeverCounted(t *testing.T) {
	stores(t, func(t *testing.T, store admit.Store) {
		c, _ := serve(t, store)
		for _, tc := range []struct {
			name   string
			domain string
			d      *ratelimitv3.RateLimitDescriptor
			unit   time.Duration
		}{
			{"rule", "features", hits(desc("path", "/api/never"), 0), time.Hour},
			{"override", "features", hits(overridden(desc("path", "/api/override"), 3), 0), time.Hour},
		} {
			before := time.Now()
			r := ask(t, c, tc.domain, 0, tc.d)
			after := time.Now()
			wantCodes(t, tc.name, r, "OK", "OK")
			st := r.Statuses[0]
			if st.LimitRemaining != 3 {
				t.Errorf("%s: remaining %d, want 3", tc.name, st.LimitRemaining)
			}
			if st.DurationUntilReset == nil {
				t.Errorf("%s: no duration_until_reset, want the time until the window ends", tc.name)
				continue
			}
			// The window's end seen at some instant between before and after.
			du := st.DurationUntilReset.AsDuration()
			most := tc.unit - time.Duration(before.UnixNano())%tc.unit
			least := tc.unit - time.Duration(after.UnixNano())%tc.unit
			if least > most { // a window ended during the call
				least = 0
			}
			if du <= 0 || du < least || du > most {
				t.Errorf("%s: duration_until_reset %v, want in [%v, %v]", tc.name, du, least, most)
			}
		}
	})
}

// TestLimitOverrideWithoutRule: a request's limit applies to a descriptor with no rule and to an
// unlimited one, as envoyproxy/ratelimit applies it before its rules; not in an unknown domain.
func TestLimitOverrideWithoutRule(t *testing.T) {
	stores(t, func(t *testing.T, store admit.Store) {
		c, _ := serve(t, store)
		limited := func(d *ratelimitv3.RateLimitDescriptor) *ratelimitv3.RateLimitDescriptor {
			d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
			return d
		}
		for name, d := range map[string]func() *ratelimitv3.RateLimitDescriptor{
			"no rule":   func() *ratelimitv3.RateLimitDescriptor { return limited(desc("nothing", "here")) },
			"unlimited": func() *ratelimitv3.RateLimitDescriptor { return limited(desc("path", "/api/admin")) },
		} {
			r := ask(t, c, "features", 0, d())
			wantCodes(t, name+" 1", r, "OK", "OK")
			if l := r.Statuses[0].CurrentLimit; l.GetRequestsPerUnit() != 1 || l.GetUnit() != rlsv3.RateLimitResponse_RateLimit_HOUR {
				t.Errorf("%s: current_limit %v", name, l)
			}
			wantCodes(t, name+" 2", ask(t, c, "features", 0, d()), "OVER_LIMIT", "OVER_LIMIT")
		}
		for range 3 {
			wantCodes(t, "unknown domain", ask(t, c, "nope", 0, limited(desc("a", "b"))), "OK", "OK")
		}
		// The unlimited rule still stands for the descriptor without the override.
		wantCodes(t, "unlimited alone", ask(t, c, "features", 0, desc("path", "/api/admin")), "OK", "OK")
	})
}

// TestNoSmallBounds: every request envoyproxy/ratelimit decides is decided, as it decides it, not
// INVALID_ARGUMENT: it bounds a request by the message size only. A value of 64 KiB; 1,025
// entries (4,097 descriptors: TestManyDescriptorsDecided); a descriptor of no entries (no rule, but a limit override's, counted
// per domain); an entry with an empty key; is_negative_hits (ignored); a hits_addend of 2^33 or
// 2^64-1 (over, nothing counted); a descriptor longer than a subject (1 MiB), counted on a digest of
// its own, in a domain decided separately and in an atomic one; a response over 4 MiB; and a
// request over the 4 MiB message, which gRPC refuses before admit sees it, as
// envoyproxy/ratelimit's server does.
func TestNoSmallBounds(t *testing.T) {
	c, _ := serve(t, memStore(t))
	remaining := func(step string, r *rlsv3.RateLimitResponse, want ...uint32) {
		t.Helper()
		if len(r.Statuses) != len(want) {
			t.Fatalf("%s: %d statuses, want %d", step, len(r.Statuses), len(want))
		}
		for i, st := range r.Statuses {
			if st.CurrentLimit == nil || st.LimitRemaining != want[i] {
				t.Fatalf("%s: status %d is %v; want a current_limit and limit_remaining %d", step, i, st, want[i])
			}
		}
	}
	long := strings.Repeat("v", 64<<10)
	wantCodes(t, "long 1", ask(t, c, "mongo_cps", 0, desc("database", "users", "x", long)), "OK", "OK")
	remaining("long value", ask(t, c, "edge_proxy_per_ip", 0, desc("remote_address", long)), 9) // 10 per second

	deep := desc()
	for range 1025 {
		deep.Entries = append(deep.Entries, desc("k", "v").Entries...)
	}
	wantCodes(t, "1025 entries", ask(t, c, "messaging", 0, deep), "OK", "OK")

	// No entries: no rule, as in envoyproxy/ratelimit; with a limit override, one counter of the domain.
	if r := ask(t, c, "edge_proxy_per_ip", 0, desc()); r.Statuses[0].CurrentLimit != nil || r.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Errorf("no entries: %v", r)
	}
	limited := func() *ratelimitv3.RateLimitDescriptor {
		d := desc()
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
		return d
	}
	wantCodes(t, "no entries, a limit override", ask(t, c, "edge_proxy_per_ip", 0, limited()), "OK", "OK")
	wantCodes(t, "no entries, a limit override again", ask(t, c, "edge_proxy_per_ip", 0, limited()), "OVER_LIMIT", "OVER_LIMIT")
	if r := ask(t, c, "edge_proxy_per_ip", 0, desc("", "10.0.0.1")); r.Statuses[0].CurrentLimit != nil || r.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Errorf("an empty key: %v", r)
	}
	negative := func() *ratelimitv3.RateLimitDescriptor {
		d := desc("remote_address", "negative")
		d.IsNegativeHits = true
		return d
	}
	remaining("is_negative_hits", ask(t, c, "edge_proxy_per_ip", 0, negative()), 9)
	remaining("is_negative_hits again", ask(t, c, "edge_proxy_per_ip", 2, negative()), 7)

	for _, n := range []uint64{1 << 33, math.MaxUint64} {
		r := ask(t, c, "edge_proxy_per_ip", 0, hits(desc("remote_address", "huge"), n))
		wantCodes(t, fmt.Sprint("hits_addend ", n), r, "OVER_LIMIT", "OVER_LIMIT")
		remaining(fmt.Sprint("hits_addend ", n), r, 10)
	}
	remaining("after the huge hits", ask(t, c, "edge_proxy_per_ip", 0, desc("remote_address", "huge")), 9)

	huge := strings.Repeat("h", 2<<20)
	remaining("a value of 2 MiB", ask(t, c, "edge_proxy_per_ip", 0, desc("remote_address", huge)), 9)
	remaining("a value of 2 MiB again", ask(t, c, "edge_proxy_per_ip", 0, desc("remote_address", huge)), 8)
	remaining("another value of 2 MiB", ask(t, c, "edge_proxy_per_ip", 0, desc("remote_address", huge[1:])), 9)
	remaining("a value of 2 MiB, atomic", ask(t, c, "atomic", 0, desc("client", huge)), 9) // 10 per hour
	remaining("a value of 2 MiB and a path, atomic", ask(t, c, "atomic", 0, desc("client", huge, "path", "/")), 1)
	remaining("a value of 2 MiB, atomic, again", ask(t, c, "atomic", 0, desc("client", huge)), 8)
	wantCodes(t, "no rule for a value of 2 MiB", ask(t, c, "mongo_cps", 0, desc("database", huge)), "OK", "OK")

	// A response larger than the message size the request is bound by, as envoyproxy/ratelimit
	// sends it: 20,000 descriptors of 0.4 MiB, each status naming a rule of 250 characters.
	name := strings.Repeat("n", 250)
	cfg, err := envoyconf.Parse(envoyconf.File{Name: "named.yaml", Data: []byte("domain: named\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 100000, name: " + name + "}\n")})
	if err != nil {
		t.Fatal(err)
	}
	named, _ := serveConfig(t, memStore(t), cfg)
	var ds []*ratelimitv3.RateLimitDescriptor
	for i := range 20_000 {
		ds = append(ds, desc("k", fmt.Sprint(i)))
	}
	r, err := named.ShouldRateLimit(t.Context(), &rlsv3.RateLimitRequest{Domain: "named", Descriptors: ds}, grpc.MaxCallRecvMsgSize(2*rls.MaxMessageSize))
	if err != nil || len(r.Statuses) != len(ds) || proto.Size(r) <= rls.MaxMessageSize || r.Statuses[0].CurrentLimit.GetName() != name {
		t.Errorf("20,000 descriptors: %d statuses in %d bytes, %v; want them all, in more than %d bytes", len(r.GetStatuses()), proto.Size(r), err, rls.MaxMessageSize)
	}

	_, err = c.ShouldRateLimit(t.Context(), &rlsv3.RateLimitRequest{Domain: "edge_proxy_per_ip",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("remote_address", strings.Repeat("v", rls.MaxMessageSize))}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a request over %d bytes: %v; want ResourceExhausted", rls.MaxMessageSize, err)
	}
}

// TestDurationUntilResetWhenOver: a descriptor over its limit reports the time until its window
// resets, whichever way it is over: counted full, a hits_addend above the limit on a key never
// counted, requests_per_unit 0.
func TestDurationUntilResetWhenOver(t *testing.T) {
	stores(t, func(t *testing.T, store admit.Store) {
		c, _ := serve(t, store)
		check := func(step string, r *rlsv3.RateLimitResponse, most time.Duration) {
			t.Helper()
			wantCodes(t, step, r, "OVER_LIMIT", "OVER_LIMIT")
			if du := r.Statuses[0].DurationUntilReset.AsDuration(); du <= 0 || du > most {
				t.Errorf("%s: duration_until_reset %v, want in (0, %v]", step, du, most)
			}
		}
		check("above the limit, never counted", ask(t, c, "features", 0, hits(desc("path", "/api/never"), 4)), time.Hour)
		ask(t, c, "features", 3, desc("path", "/api/full"))
		check("full", ask(t, c, "features", 0, desc("path", "/api/full")), time.Hour)
		check("requests_per_unit 0", ask(t, c, "edge_proxy_per_ip", 0, desc("remote_address", "50.0.0.5")), time.Second)
	})
}

// TestQuotaMode: a descriptor in quota_mode over its limit is answered OK; with DynamicMetadata
// the response says so in quotaModeViolations, as envoyproxy/ratelimit's does.
func TestQuotaMode(t *testing.T) {
	stores(t, func(t *testing.T, store admit.Store) {
		c := serveWith(t, store, upstreamDir, rls.Options{DynamicMetadata: true})
		one, two := desc("service", "service_1"), desc("service", "service_2") // 1 and 2 per minute
		meta := func(r *rlsv3.RateLimitResponse) string {
			b, err := protojson.Marshal(r.DynamicMetadata)
			if err != nil {
				t.Fatal(err)
			}
			return strings.ReplaceAll(string(b), " ", "")
		}
		r := ask(t, c, "quota", 0, one, two)
		wantCodes(t, "first", r, "OK", "OK", "OK")
		want := `{"descriptors":[{"entries":["service=service_1"]},{"entries":["service=service_2"]}],"domain":"quota","quotaModeEnabled":true}`
		if got := meta(r); got != want {
			t.Errorf("first: metadata %s, want %s", got, want)
		}
		r = ask(t, c, "quota", 2, two, hits(desc("service", "service_1"), 1))
		wantCodes(t, "over", r, "OK", "OK", "OK")
		if r.Statuses[0].LimitRemaining != 0 || r.Statuses[1].LimitRemaining != 0 { // over: nothing left, as envoyproxy/ratelimit answers
			t.Errorf("over: statuses %v", r.Statuses)
		}
		want = `{"descriptors":[{"entries":["service=service_2"]},{"entries":["service=service_1"],"hitsAddend":1}],"domain":"quota","hitsAddend":2,"quotaModeEnabled":true,"quotaModeViolations":[0,1]}`
		if got := meta(r); got != want {
			t.Errorf("over: metadata %s, want %s", got, want)
		}
		r = ask(t, c, "rl", 0, desc("foo", "x"))
		if got, want := meta(r), `{"descriptors":[{"entries":["foo=x"]}],"domain":"rl","quotaModeEnabled":false}`; got != want {
			t.Errorf("no quota mode: metadata %s, want %s", got, want)
		}
		// A descriptor's limit override is sent as its protobuf text, as envoyproxy/ratelimit sends it.
		over := desc("foo", "y")
		over.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 7, Unit: typev3.RateLimitUnit_HOUR}
		r = ask(t, c, "rl", 0, over)
		lim := r.DynamicMetadata.GetFields()["descriptors"].GetListValue().GetValues()[0].GetStructValue().GetFields()["limit"].GetStringValue()
		if lim != over.Limit.String() || !strings.Contains(lim, "7") || !strings.Contains(lim, "HOUR") {
			t.Errorf("a limit override: metadata limit %q, want %q", lim, over.Limit.String())
		}
		// Without DynamicMetadata: still OK, and no metadata.
		plain := serveWith(t, store, upstreamDir, rls.Options{})
		r = ask(t, plain, "quota", 5, desc("service", "service_1"))
		wantCodes(t, "plain", r, "OK", "OK")
		if r.DynamicMetadata != nil {
			t.Errorf("plain: metadata %v", r.DynamicMetadata)
		}
	})
}

// quotaAllConfig has a rule of its own, one in shadow_mode and one in quota_mode, each 1 per hour.
const quotaAllConfig = `domain: qm
descriptors:
  - key: plain
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: quota
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
`

// TestQuotaModeEverywhere: Ops.QuotaMode (QUOTA_MODE) puts every rule in quota mode, a request's
// limit override too: over answered OK, listed in quotaModeViolations; a shadow_mode rule is
// never over, so never listed; quotaModeEnabled still says whether a rule sets quota_mode.
func TestQuotaModeEverywhere(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "qm.yaml"), []byte(quotaAllConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	meta := func(r *rlsv3.RateLimitResponse) string {
		b, err := protojson.Marshal(r.DynamicMetadata)
		if err != nil {
			t.Fatal(err)
		}
		return strings.ReplaceAll(string(b), " ", "")
	}
	over := func(d *ratelimitv3.RateLimitDescriptor) *ratelimitv3.RateLimitDescriptor {
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
		return d
	}
	stores(t, func(t *testing.T, store admit.Store) {
		c := serveWith(t, store, dir, rls.Options{DynamicMetadata: true, Ops: rls.Ops{QuotaMode: true}})
		all := func() []*ratelimitv3.RateLimitDescriptor {
			return []*ratelimitv3.RateLimitDescriptor{desc("plain", "p"), desc("shadow", "s"), desc("quota", "q"), over(desc("nothing", "n"))}
		}
		r := ask(t, c, "qm", 0, all()...)
		wantCodes(t, "first", r, "OK", "OK", "OK", "OK", "OK")
		if got := meta(r); strings.Contains(got, "quotaModeViolations") || !strings.Contains(got, `"quotaModeEnabled":true`) {
			t.Errorf("first: metadata %s, want no violations, quota mode enabled", got)
		}
		r = ask(t, c, "qm", 0, all()...)
		wantCodes(t, "second", r, "OK", "OK", "OK", "OK", "OK")
		for i, st := range r.Statuses {
			if st.CurrentLimit == nil || st.LimitRemaining != 0 {
				t.Errorf("second, descriptor %d: %v; want its limit, nothing left", i, st)
			}
		}
		if got := meta(r); !strings.Contains(got, `"quotaModeViolations":[0,2,3]`) {
			t.Errorf("second: metadata %s, want violations [0,2,3]: all but the shadow rule", got)
		}
		r = ask(t, c, "qm", 0, desc("plain", "p"))
		if got, want := meta(r), `{"descriptors":[{"entries":["plain=p"]}],"domain":"qm","quotaModeEnabled":false,"quotaModeViolations":[0]}`; got != want {
			t.Errorf("a rule without quota_mode: metadata %s, want %s", got, want)
		}
		// Without QuotaMode, the same rules enforce.
		plain := serveWith(t, store, dir, rls.Options{})
		wantCodes(t, "enforced", ask(t, plain, "qm", 0, desc("plain", "p")), "OVER_LIMIT", "OVER_LIMIT")
	})
}

// TestIncrementOverLimit: with IncrementOverLimit a rejected hit fills what was left of the
// limit, as envoyproxy/ratelimit counts it, so the next small request is over too, and so is a
// descriptor repeated after one found over in the same request (envoyproxy/ratelimit counts them
// in order); by default a rejected hit is not counted.
func TestIncrementOverLimit(t *testing.T) {
	stores(t, func(t *testing.T, store admit.Store) {
		for _, tc := range []struct {
			opts rls.Options
			last string // the code of 1 hit after 2 of 3 taken and 2 rejected
		}{
			{rls.Options{}, "OK"},
			{rls.Options{IncrementOverLimit: true}, "OVER_LIMIT"},
		} {
			c := serveWith(t, store, "../../policy/envoyconf/testdata/readme", tc.opts)
			repeated := desc("path", "/api/repeated/"+tc.last) // 3 per hour
			r := ask(t, c, "features", 0, hits(repeated, 4), desc("path", "/api/repeated/"+tc.last))
			wantCodes(t, "4 hits, then 1 of the same descriptor", r, "OVER_LIMIT", "OVER_LIMIT", tc.last)
		}
		for _, tc := range []struct {
			opts rls.Options
			last string
		}{
			{rls.Options{}, "OK"},
			{rls.Options{IncrementOverLimit: true}, "OVER_LIMIT"},
		} {
			c := serveWith(t, store, "../../policy/envoyconf/testdata/readme", tc.opts)
			path := desc("path", "/api/"+tc.last) // 3 per hour, a key per case
			wantCodes(t, "2 of 3", ask(t, c, "features", 2, path), "OK", "OK")
			r := ask(t, c, "features", 2, path)
			wantCodes(t, "2 more", r, "OVER_LIMIT", "OVER_LIMIT")
			if tc.opts.IncrementOverLimit && r.Statuses[0].LimitRemaining != 0 {
				t.Errorf("counted over: remaining %d, want 0", r.Statuses[0].LimitRemaining)
			}
			wantCodes(t, "1 more", ask(t, c, "features", 1, path), tc.last, tc.last)
		}
	})
}

// TestWildcardsLimit: a value with '*' in the middle, or several, limits the traffic it matches
// (it loaded, and matched nothing, before); share_threshold makes its values share one counter.
func TestWildcardsLimit(t *testing.T) {
	stores(t, func(t *testing.T, store admit.Store) {
		c := serveWith(t, store, fieldsDir, rls.Options{})
		for i := range 7 { // host bar*b: 6 per hour, one counter per value
			want := "OK"
			if i == 6 {
				want = "OVER_LIMIT"
			}
			wantCodes(t, "bar-b", ask(t, c, "fields", 0, desc("host", "bar-b")), want, want)
		}
		wantCodes(t, "barb", ask(t, c, "fields", 0, desc("host", "barb")), "OK", "OK")
		var remaining []uint32
		for _, v := range []string{"/shared/a", "/shared/b", "/shared/c"} { // 5 per hour, shared
			remaining = append(remaining, ask(t, c, "fields", 0, desc("path", v)).Statuses[0].LimitRemaining)
		}
		if !slices.Equal(remaining, []uint32{4, 3, 2}) {
			t.Errorf("share_threshold: remaining %v, want [4 3 2]", remaining)
		}
		r := ask(t, c, "fields", 0, desc("path", "/v1/a2/b3"))
		if l := r.Statuses[0].CurrentLimit; l.GetRequestsPerUnit() != 4 {
			t.Errorf("/v*/a*/b*: current_limit %v", l)
		}
	})
}

// TestManyDescriptorsDecided: a request of 4,097 descriptors, each with a rule, in a domain with
// and one without atomic, is decided, each descriptor counted, as envoyproxy/ratelimit counts them.
func TestManyDescriptorsDecided(t *testing.T) {
	const many = 4097
	stores(t, func(t *testing.T, store admit.Store) {
		c, _ := serve(t, store)
		for _, tc := range []struct{ domain, key string }{{"messaging", "to_number"}, {"atomic", "client"}} {
			var ds []*ratelimitv3.RateLimitDescriptor
			for i := range many {
				ds = append(ds, desc(tc.key, fmt.Sprint(i)))
			}
			r := ask(t, c, tc.domain, 0, ds...)
			if r.OverallCode != rlsv3.RateLimitResponse_OK || len(r.Statuses) != many {
				t.Fatalf("%s: %v, %d statuses", tc.domain, r.OverallCode, len(r.Statuses))
			}
			for i, st := range r.Statuses {
				if st.CurrentLimit == nil || st.LimitRemaining != st.CurrentLimit.RequestsPerUnit-1 {
					t.Fatalf("%s: descriptor %d: %v", tc.domain, i, st)
				}
			}
		}
	})
}

// TestLargestRequestMemory: a request as large as the message size allows (4 MiB) costs the Server
// a bounded few hundred bytes a descriptor: two million descriptors of no entries (the most a
// request holds, sharing one status), and a tenth of the message of descriptors with a rule, each
// decided (about 900 bytes, 1.2 KB under the race detector).
func TestLargestRequestMemory(t *testing.T) {
	s := newServer(t, memStore(t), testConfig(t))
	for _, tc := range []struct {
		name  string
		desc  func() *ratelimitv3.RateLimitDescriptor
		bytes int    // of the request
		most  uint64 // bytes allocated a descriptor
	}{
		{"no entries", func() *ratelimitv3.RateLimitDescriptor { return desc() }, rls.MaxMessageSize, 256},
		{"a rule", func() *ratelimitv3.RateLimitDescriptor { return desc("remote_address", "") }, rls.MaxMessageSize / 10, 2048},
	} {
		req := &rlsv3.RateLimitRequest{Domain: "edge_proxy_per_ip"}
		one := proto.Size(&rlsv3.RateLimitRequest{Descriptors: []*ratelimitv3.RateLimitDescriptor{tc.desc()}})
		for range (tc.bytes - 64) / one {
			req.Descriptors = append(req.Descriptors, tc.desc())
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		resp, err := s.ShouldRateLimit(t.Context(), req)
		runtime.ReadMemStats(&after)
		if err != nil || len(resp.Statuses) != len(req.Descriptors) {
			t.Fatalf("%s: %d statuses, %v", tc.name, len(resp.GetStatuses()), err)
		}
		n := uint64(len(req.Descriptors))
		per := (after.TotalAlloc - before.TotalAlloc) / n
		t.Logf("%s: %d descriptors, %d bytes of request: %d bytes allocated, %d a descriptor", tc.name, n, proto.Size(req), after.TotalAlloc-before.TotalAlloc, per)
		if per > tc.most {
			t.Errorf("%s: %d bytes allocated a descriptor; want at most %d", tc.name, per, tc.most)
		}
	}
}
