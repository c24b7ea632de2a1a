package envoyconf_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/policy/envoyconf"
)

// TestUpstreamExamples: the configuration files envoyproxy/ratelimit ships in
// examples/ratelimit/config load, and match as they do there.
func TestUpstreamExamples(t *testing.T) {
	cfg, err := envoyconf.Load("testdata/upstream")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Domains(), " "); got != "quota rl" {
		t.Errorf("Domains() = %q", got)
	}
	type e = envoyconf.Entry
	for _, tt := range []struct {
		domain  string
		entries []envoyconf.Entry
		limit   string // "" for no rule
		quota   bool
	}{
		{"rl", []e{{"source_cluster", "proxy"}, {"destination_cluster", "mock"}}, "envoy: 1 per 1m0s (fixed_window, aligned)", false},
		{"rl", []e{{"source_cluster", "proxy"}, {"destination_cluster", "other"}}, "", false},
		{"rl", []e{{"foo", "x"}}, "envoy: 2 per 1m0s (fixed_window, aligned)", false},
		{"rl", []e{{"foo", "x"}, {"bar", "y"}}, "envoy: 3 per 1m0s (fixed_window, aligned)", false},
		{"rl", []e{{"foo", "x"}, {"bar", "banned"}}, "envoy: 0 per 1m0s (fixed_window, aligned)", false},
		{"rl", []e{{"foo", "x"}, {"baz", "y"}}, "envoy: 1 per 1s (fixed_window, aligned)", false},
		{"quota", []e{{"service", "service_1"}}, "envoy: 1 per 1m0s (fixed_window, aligned) [shadow]", true},
		{"quota", []e{{"service", "service_2"}}, "envoy: 2 per 1m0s (fixed_window, aligned) [shadow]", true},
	} {
		r := cfg.Match(tt.domain, tt.entries)
		switch {
		case tt.limit == "" && r != nil:
			t.Errorf("%s %v: %s, want no rule", tt.domain, tt.entries, r.Limit)
		case tt.limit == "":
		case r == nil:
			t.Errorf("%s %v: no rule, want %s", tt.domain, tt.entries, tt.limit)
		case r.Limit.String() != tt.limit || r.QuotaMode != tt.quota:
			t.Errorf("%s %v: %s quota_mode %v, want %s quota_mode %v", tt.domain, tt.entries, r.Limit, r.QuotaMode, tt.limit, tt.quota)
		}
	}
}

// TestNewerFields: metadata, quota_mode, share_threshold, value_to_metric, detailed_metric and an
// empty descriptors: are accepted, with their meanings.
func TestNewerFields(t *testing.T) {
	cfg, err := envoyconf.Load("testdata/fields")
	if err != nil {
		t.Fatal(err)
	}
	type e = envoyconf.Entry
	r := cfg.Match("fields", []e{{"service", "batch"}})
	if r == nil || !r.QuotaMode || !r.Limit.Shadow || r.Limit.Rate != 2 {
		t.Errorf("quota_mode: %+v", r)
	}
	r = cfg.Match("fields", []e{{"path", "/api/v1/users"}})
	if r == nil || r.Limit.Rate != 3 || !r.DetailedMetric || !r.ValueToMetric || r.QuotaMode || r.Limit.Shadow {
		t.Errorf("detailed_metric, value_to_metric: %+v", r)
	}
	if r := cfg.Match("fields", []e{{"empty", "x"}}); r == nil || r.Limit.Rate != 7 {
		t.Errorf("empty descriptors: %+v", r)
	}
	// descriptors: with nothing at the top too, as envoyproxy/ratelimit reads it.
	empty, err := envoyconf.Parse(envoyconf.File{Name: "e.yaml", Data: []byte("domain: empty\ndescriptors:\n")})
	if err != nil || !empty.HasDomain("empty") || empty.Match("empty", []e{{"a", "b"}}) != nil {
		t.Errorf("a file of descriptors: with nothing: %v", err)
	}
	// share_threshold: every value the wildcard matches is counted by the wildcard's value.
	for _, v := range []string{"/shared/a", "/shared/b"} {
		r, keyed := cfg.Lookup("fields", []e{{"path", v}})
		if r == nil || r.Limit.Rate != 5 || !r.ShareThreshold || !slices.Equal(keyed, []e{{"path", "/shared/*"}}) {
			t.Errorf("share_threshold %s: %+v %v", v, r, keyed)
		}
	}
	// Without share_threshold, each value its own.
	in := []e{{"path", "/api/v1/users"}}
	if _, keyed := cfg.Lookup("fields", in); !slices.Equal(keyed, in) {
		t.Errorf("Lookup without share_threshold: %v", keyed)
	}
}

// TestMiddleWildcards: a '*' anywhere in a value, and several, match as envoyproxy/ratelimit
// matches them: any run of bytes, empty too. Before, bar*b loaded but matched nothing, so the
// traffic it should limit passed.
func TestMiddleWildcards(t *testing.T) {
	cfg, err := envoyconf.Load("testdata/fields")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		key, value string
		want       int64 // 0: no rule
	}{
		{"host", "barb", 6},
		{"host", "bar-b", 6},
		{"host", "barbarb", 6},
		{"host", "bar", 0},
		{"host", "bar-bc", 0},
		{"path", "/api//users", 3},
		{"path", "/api/v2/users", 3},
		{"path", "/api/v2/users/x", 0},
		{"path", "/v1/a2/b3", 4},
		{"path", "/v/a/b", 4},
		{"path", "/v1/b3", 0},
	} {
		r := cfg.Match("fields", []envoyconf.Entry{{Key: tt.key, Value: tt.value}})
		switch {
		case tt.want == 0 && r != nil:
			t.Errorf("%s=%s: %s, want no rule", tt.key, tt.value, r.Limit)
		case tt.want != 0 && (r == nil || r.Limit.Rate != tt.want):
			t.Errorf("%s=%s: %+v, want %d per hour", tt.key, tt.value, r, tt.want)
		}
	}
	for _, tt := range []struct {
		pattern, value string
		want           bool
	}{
		{"foo*bar*baz", "foobarbaz", true},
		{"foo*bar*baz", "foo-bar-baz", true},
		{"foo*bar*baz", "foo-baz-bar", false},
		{"foo*bar*baz", "foobaz", false},
		{"a*a", "a", false},
		{"a*a", "aa", true},
		{"*", "", true},
		{"**", "x", true},
		{"exact", "exact", true},
		{"exact", "exactly", false},
	} {
		if got := envoyconf.Wildcard(tt.pattern, tt.value); got != tt.want {
			t.Errorf("Wildcard(%q, %q) = %v, want %v", tt.pattern, tt.value, got, tt.want)
		}
	}
}

// TestSubdirectories: Load walks the tree as envoyproxy/ratelimit's runtime loader does, at any
// depth, skipping names starting with '.' and files not named .yaml or .yml.
func TestSubdirectories(t *testing.T) {
	cfg, err := envoyconf.Load("testdata/tree")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Domains(), " "); got != "team_one team_two top" {
		t.Errorf("Domains() = %q, want team_one team_two top", got)
	}
	// A symbolic link to a directory is not followed; one to a file is read.
	dir := t.TempDir()
	abs, _ := filepath.Abs("testdata/tree/team")
	if err := os.Symlink(abs, filepath.Join(dir, "linked")); err != nil {
		t.Fatal(err)
	}
	top, _ := filepath.Abs("testdata/tree/top.yaml")
	if err := os.Symlink(top, filepath.Join(dir, "top.yaml")); err != nil {
		t.Fatal(err)
	}
	cfg, err = envoyconf.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Domains(), " "); got != "top" {
		t.Errorf("Domains() through links = %q, want top", got)
	}
}

// TestMergeDomains: MergeDomains merges the files of one domain as MERGE_DOMAIN_CONFIG=true does;
// without it they are an error, and a descriptor two files give is an error either way.
func TestMergeDomains(t *testing.T) {
	if _, err := envoyconf.Load("testdata/merge"); err == nil || !strings.Contains(err.Error(), `domain: "api" is configured in testdata/merge/api.yaml too`) {
		t.Errorf("Load without MergeDomains: %v", err)
	}
	cfg, err := envoyconf.Options{MergeDomains: true}.Load("testdata/merge")
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.Match("api", []envoyconf.Entry{{Key: "client", Value: "a"}}); r == nil || r.Limit.Rate != 10 {
		t.Errorf("client: %+v", r)
	}
	if r := cfg.Match("api", []envoyconf.Entry{{Key: "path", Value: "/xyz"}}); r == nil || r.Limit.Rate != 20 {
		t.Errorf("path: %+v", r)
	}
	o := envoyconf.Options{MergeDomains: true}
	a := envoyconf.File{Name: "a.yaml", Data: []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")}
	b := envoyconf.File{Name: "b.yaml", Data: []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 2}\n")}
	c := envoyconf.File{Name: "c.yaml", Data: []byte("domain: d\natomic: true\n")}
	for _, tt := range []struct {
		files []envoyconf.File
		want  string
	}{
		{[]envoyconf.File{a, b}, `b.yaml:3:5: duplicate descriptor "k": a.yaml has it too`},
		{[]envoyconf.File{a, c}, `c.yaml:1:1: atomic: true here, false in a.yaml, another file of domain "d"`},
	} {
		_, err := o.Parse(tt.files...)
		var list policy.ErrorList
		if !errors.As(err, &list) || err.Error() != tt.want {
			t.Errorf("Parse: %v, want %s", err, tt.want)
		}
	}
}

// TestDurabilityFields parses the durability extension of a rate_limit into its Limit, and refuses
// what makes no sense.
func TestDurabilityFields(t *testing.T) {
	doc := func(fields string) envoyconf.File {
		return envoyconf.File{Name: "d.yaml", Data: []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5" + fields + "}\n")}
	}
	for _, tc := range []struct {
		fields   string
		replicas int
		timeout  time.Duration
		err      string
	}{
		{"", 0, 0, ""},
		{", durability: async", 0, 0, ""},
		{", durability: replicated", 1, 0, ""},
		{", durability: replicated, durability_replicas: 3, durability_timeout: 250ms", 3, 250 * time.Millisecond, ""},
		{", durability: quorum", 0, 0, `durability: "quorum": want async or replicated`},
		{", durability_replicas: 2", 0, 0, "durability_replicas: only a rate_limit with durability: replicated"},
		{", durability: replicated, durability_replicas: 17", 0, 0, "durability_replicas"},
		{", durability: replicated, durability_timeout: 2m", 0, 0, "durability_timeout"},
		{", durability: replicated, durability_timeout: 1500us", 0, 0, "whole number of milliseconds"},
		{", unlimited: true, durability: replicated", 0, 0, "an unlimited rate_limit has no durability"},
	} {
		if strings.Contains(tc.fields, "unlimited") {
			tc.fields = strings.Replace(tc.fields, ", unlimited: true", "", 1)
			f := envoyconf.File{Name: "d.yaml", Data: []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true" + tc.fields + "}\n")}
			if _, err := envoyconf.Parse(f); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("unlimited%s: %v; want %q", tc.fields, err, tc.err)
			}
			continue
		}
		c, err := envoyconf.Parse(doc(tc.fields))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v; want an error with %q", tc.fields, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.fields, err)
			continue
		}
		rule := c.Match("d", []envoyconf.Entry{{Key: "k"}})
		if rule == nil {
			t.Fatalf("%q: no rule for k", tc.fields)
		}
		lim := rule.Limit
		if n, where := c.Replicas(); n != tc.replicas || n > 0 && where != "d k" {
			t.Errorf("%q: Replicas() = %d, %q; want %d, \"d k\"", tc.fields, n, where, tc.replicas)
		}
		if lim.Replicas != tc.replicas || lim.ReplicaTimeout != tc.timeout {
			t.Errorf("%q: Replicas %d, ReplicaTimeout %v; want %d, %v", tc.fields, lim.Replicas, lim.ReplicaTimeout, tc.replicas, tc.timeout)
		}
	}
}
