package policy_test

import (
	"errors"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/policy"
)

var update = flag.Bool("update", false, "rewrite the .err files of testdata/errors from the errors Parse reports")

// TestErrorFixtures parses each file of testdata/errors, which holds one mistake, and compares what
// Parse reports with the file's .err twin, exactly: one error, with its place and message.
func TestErrorFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/errors/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			_, err := policy.Load(file)
			var list policy.ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("Load = %v; want an ErrorList", err)
			}
			if len(list) != 1 {
				t.Errorf("%d errors; want the fixture's one mistake:\n%v", len(list), err)
			}
			golden := strings.TrimSuffix(file, ".yaml") + ".err"
			if *update {
				if err := os.WriteFile(golden, []byte(err.Error()+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, rerr := os.ReadFile(golden)
			if rerr != nil {
				t.Fatalf("%v (run go test ./policy -update to write it)", rerr)
			}
			if got := err.Error() + "\n"; got != string(want) {
				t.Errorf("errors:\n%s\nwant:\n%s", got, want)
			}
			if i := strings.IndexFunc(err.Error(), func(r rune) bool { return r > unicode.MaxASCII }); i >= 0 {
				t.Errorf("the error holds a non-ASCII character at byte %d: %q", i, err.Error())
			}
		})
	}
}

// TestEveryErrorAtOnce checks that a file with many mistakes has all of them reported, in the
// order of their places.
func TestEveryErrorAtOnce(t *testing.T) {
	_, err := policy.Parse("many.yaml", []byte(`server:
  ipv6_prefix: 0
policies:
  - name: a
    algorithm: gcrb
    limit: 0
    window: 1s
  - name: b
    algorithm: fixed_window
    limit: "10"
    window: soon
    mode: loud
routes:
  - path_prefix: /
    policies: [c]
`))
	want := []string{
		"many.yaml:2:16: server.ipv6_prefix: 0 is outside 1-128",
		`many.yaml:5:16: policies[0] (a).algorithm: "gcrb": want fixed_window, sliding_window, sliding_log, gcra (token_bucket) or concurrency`,
		"many.yaml:6:12: policies[0] (a).limit: 0 is outside 1-1000000000000000",
		`many.yaml:10:12: policies[1] (b).limit: want a whole number, found the string "10"`,
		`many.yaml:11:13: policies[1] (b).window: "soon": want a duration such as 1s, 250ms or 24h, at most 8784h0m0s`,
		`many.yaml:12:11: policies[1] (b).mode: "loud": want enforce or shadow`,
		`many.yaml:15:16: routes[0].policies[0]: no policy is named "c"`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("errors:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
}

func TestFileTooLarge(t *testing.T) {
	data := []byte("policies: []\n" + strings.Repeat("#", policy.MaxFileSize))
	_, err := policy.Parse("big.yaml", data)
	if err == nil || err.Error() != "big.yaml: file of more than 1048576 bytes" {
		t.Errorf("Parse of %d bytes = %v; want the file refused", len(data), err)
	}
}

// TestParse reads a file that uses every field, and checks each lands where it should.
func TestParse(t *testing.T) {
	cfg, err := policy.Load("testdata/valid/everything.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wantServer := policy.Server{
		Listen:           "0.0.0.0:9090",
		Redis:            "rediss://127.0.0.1:6379/0",
		RedisTLS:         policy.RedisTLS{CAFile: "/etc/admit/redis-ca.pem", CertFile: "/etc/admit/redis-client.pem", KeyFile: "/etc/admit/redis-client-key.pem", ServerName: "redis.internal"},
		HMACSecretFile:   "/etc/admit/secret",
		TrustedProxies:   []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("192.0.2.7/32")},
		ForwardedHeader:  "forwarded",
		IPv6Prefix:       56,
		RateLimitHeaders: false,
	}
	if s := cfg.Server; s.Listen != wantServer.Listen || s.Redis != wantServer.Redis || s.RedisTLS != wantServer.RedisTLS || s.HMACSecretFile != wantServer.HMACSecretFile ||
		!slices.Equal(s.TrustedProxies, wantServer.TrustedProxies) || s.ForwardedHeader != wantServer.ForwardedHeader ||
		s.IPv6Prefix != wantServer.IPv6Prefix || s.RateLimitHeaders != wantServer.RateLimitHeaders {
		t.Errorf("Server = %+v; want %+v", s, wantServer)
	}
	want := []policy.Policy{
		{Limit: admit.Limit{Name: "per-second", Algorithm: admit.GCRA, Rate: 10, Period: time.Second, Burst: 20}, Version: "1",
			Tiers: map[string]admit.Limit{"pro": {Name: "per-second", Tier: "pro", Algorithm: admit.GCRA, Rate: 100, Period: time.Second, Burst: 200}}},
		{Limit: admit.Limit{Name: "per-day", Algorithm: admit.FixedWindow, Rate: 1000, Period: 24 * time.Hour, Aligned: true, Shadow: true}, Version: "2",
			Tiers: map[string]admit.Limit{
				"enterprise": {Name: "per-day", Tier: "enterprise", Algorithm: admit.FixedWindow, Rate: 100000, Period: 24 * time.Hour, Aligned: true, Shadow: true},
				"weekly":     {Name: "per-day", Tier: "weekly", Algorithm: admit.FixedWindow, Rate: 1000, Period: 7 * 24 * time.Hour, Aligned: true, Shadow: true},
			}},
		{Limit: admit.Limit{Name: "per-minute", Algorithm: admit.SlidingWindow, Rate: 600, Period: time.Minute}, Version: "1", Failure: policy.Open, LocalLimit: 200,
			Tiers: map[string]admit.Limit{"pro": {Name: "per-minute", Tier: "pro", Algorithm: admit.SlidingWindow, Rate: 6000, Period: time.Minute}}},
		{Limit: admit.Limit{Name: "exact", Algorithm: admit.SlidingLog, Rate: 100, Period: 10 * time.Second}, Version: "1"},
		{Limit: admit.Limit{Name: "bucket", Algorithm: admit.GCRA, Rate: 5, Period: time.Second}, Version: "1"},
		{Limit: admit.Limit{Name: "in-flight", Algorithm: admit.Concurrency, Rate: 5, Period: 30 * time.Second}, Version: "1",
			Tiers: map[string]admit.Limit{"pro": {Name: "in-flight", Tier: "pro", Algorithm: admit.Concurrency, Rate: 50, Period: time.Minute}}},
	}
	if len(cfg.Policies) != len(want) {
		t.Fatalf("%d policies; want %d", len(cfg.Policies), len(want))
	}
	for i, p := range want {
		if !reflect.DeepEqual(cfg.Policies[i], p) {
			t.Errorf("policy %d = %+v; want %+v", i, cfg.Policies[i], p)
		}
		if got, ok := cfg.Policy(p.Limit.Name); !ok || !reflect.DeepEqual(got, p) {
			t.Errorf("Policy(%q) = %+v, %v; want it", p.Limit.Name, got, ok)
		}
	}
	if _, ok := cfg.Policy("nope"); ok {
		t.Error(`Policy("nope") found a policy`)
	}
	wantRoutes := []policy.Route{
		{Method: "POST", PathPrefix: "/v1/chat/", Policies: []string{"per-second", "per-day"}, Subject: policy.Subject{From: policy.SubjectHeader, Header: "X-User"}, Cost: 5},
		{PathPrefix: "/", Policies: []string{"per-minute"}, Subject: policy.Subject{From: policy.SubjectClientIP}, Cost: 1},
	}
	if len(cfg.Routes) != len(wantRoutes) {
		t.Fatalf("%d routes; want %d", len(cfg.Routes), len(wantRoutes))
	}
	for i, r := range wantRoutes {
		got := cfg.Routes[i]
		if got.Method != r.Method || got.PathPrefix != r.PathPrefix || !slices.Equal(got.Policies, r.Policies) || got.Subject != r.Subject || got.Cost != r.Cost {
			t.Errorf("route %d = %+v; want %+v", i, got, r)
		}
	}
	if len(cfg.Hash) != 64 {
		t.Errorf("Hash = %q; want 64 hex characters", cfg.Hash)
	}
}

// TestDefaults reads the smallest file, and checks what Parse fills in.
func TestDefaults(t *testing.T) {
	cfg, err := policy.Parse("min.yaml", []byte("policies:\n  - {name: api, algorithm: token_bucket, limit: 10, window: 1s}\nroutes:\n  - {path_prefix: /, policies: [api]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Server
	if s.Listen != policy.DefaultListen || s.IPv6Prefix != policy.DefaultIPv6Prefix || !s.RateLimitHeaders || s.Redis != "" || s.HMACSecretFile != "" || s.TrustedProxies != nil || s.ForwardedHeader != "" {
		t.Errorf("Server = %+v; want the defaults", s)
	}
	p := cfg.Policies[0]
	if p.Limit.Algorithm != admit.GCRA || p.Version != bound.DefaultVersion || p.Limit.Shadow || p.Failure != policy.Closed || p.LocalLimit != 0 {
		t.Errorf("policy = %+v; want gcra, version %s, enforce, closed", p, bound.DefaultVersion)
	}
	if r := cfg.Routes[0]; r.Cost != 1 || r.Subject.From != policy.SubjectClientIP || r.Method != "" {
		t.Errorf("route = %+v; want cost 1, subject client_ip, any method", r)
	}
}

// FuzzParse checks that Parse never panics, and that whatever it accepts is valid: every policy a
// valid admit.Limit, every route naming known policies.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/*.yaml")
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := policy.Parse("fuzz.yaml", data)
		if err != nil {
			var list policy.ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %v is not a non-empty ErrorList", err)
			}
			return
		}
		if len(cfg.Policies) == 0 {
			t.Fatal("accepted a file with no policy")
		}
		for _, p := range cfg.Policies {
			if err := p.Limit.Validate(); err != nil || p.Limit.Name == "" {
				t.Fatalf("accepted policy %+v: %v", p, err)
			}
			for name, lim := range p.Tiers {
				if err := lim.Validate(); err != nil || lim.Name != p.Limit.Name || lim.Algorithm != p.Limit.Algorithm || p.Failure == policy.Open && p.LocalLimit > lim.Rate {
					t.Fatalf("accepted tier %q of policy %+v: %+v: %v", name, p, lim, err)
				}
			}
		}
		for _, r := range cfg.Routes {
			for _, name := range r.Policies {
				if _, ok := cfg.Policy(name); !ok {
					t.Fatalf("accepted a route naming unknown policy %q", name)
				}
			}
		}
	})
}

// TestRoute checks that Config.Route finds the first route whose method and path prefix match.
func TestRoute(t *testing.T) {
	cfg, err := policy.Parse("routes.yaml", []byte(`
policies:
  - name: p
    algorithm: fixed_window
    limit: 5
    window: 1s
routes:
  - method: POST
    path_prefix: /api/write
    policies: [p]
    cost: 5
  - path_prefix: /api/
    policies: [p]
  - method: GET
    path_prefix: /
    policies: [p]
    subject:
      from: constant
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path string
		want         int // index in cfg.Routes, -1 for none
	}{
		{"POST", "/api/write/x", 0},
		{"GET", "/api/write/x", 1},
		{"DELETE", "/api/", 1},
		{"GET", "/api", 2},
		{"GET", "/", 2},
		{"HEAD", "/", 2}, // an app answers HEAD as GET: it must not escape the GET route
		{"POST", "/other", -1},
		{"post", "/other", -1},
	} {
		r, ok := cfg.Route(tc.method, tc.path)
		switch {
		case tc.want < 0 && ok:
			t.Errorf("Route(%s, %s) = %+v; want none", tc.method, tc.path, r)
		case tc.want >= 0 && (!ok || r.PathPrefix != cfg.Routes[tc.want].PathPrefix || r.Method != cfg.Routes[tc.want].Method):
			t.Errorf("Route(%s, %s) = %+v, %v; want route %d %+v", tc.method, tc.path, r, ok, tc.want, cfg.Routes[tc.want])
		}
	}
}
