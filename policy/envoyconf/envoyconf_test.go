package envoyconf_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/policy/envoyconf"
)

func loadReadme(t *testing.T) *envoyconf.Config {
	t.Helper()
	cfg, err := envoyconf.Load("testdata/readme")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestLoadReadme(t *testing.T) {
	cfg := loadReadme(t)
	if got, want := strings.Join(cfg.Domains(), " "), "atomic edge_proxy_per_ip example4 example6 example7 example8 example9 features internal messaging mongo_cps separate"; got != want {
		t.Errorf("Domains() = %q, want %q", got, want)
	}
	for _, d := range cfg.Domains() {
		if got, want := cfg.Atomic(d), d == "atomic"; got != want {
			t.Errorf("Atomic(%q) = %v, want %v", d, got, want)
		}
	}
	if len(cfg.Hash) != 64 {
		t.Errorf("Hash = %q", cfg.Hash)
	}
}

func TestMatch(t *testing.T) {
	cfg := loadReadme(t)
	type e = envoyconf.Entry
	tests := []struct {
		domain  string
		entries []envoyconf.Entry
		path    string // "" for no rule
		limit   string
	}{
		{"mongo_cps", []e{{"database", "users"}}, "database_users", "envoy: 500 per 1s (fixed_window, aligned)"},
		{"mongo_cps", []e{{"database", "default"}}, "database_default", "envoy: 500 per 1s (fixed_window, aligned)"},
		{"mongo_cps", []e{{"database", "other"}}, "", ""},
		{"mongo_cps", []e{{"database", "users"}, {"extra", "x"}}, "", ""}, // deeper than the tree
		{"nope", []e{{"database", "users"}}, "", ""},
		{"messaging", []e{{"message_type", "marketing"}, {"to_number", "2061111111"}}, "message_type_marketing.to_number", "envoy: 5 per 24h0m0s (fixed_window, aligned)"},
		{"messaging", []e{{"message_type", "marketing"}}, "", ""}, // shallower than the rule
		{"messaging", []e{{"message_type", "transactional"}, {"to_number", "2061111111"}}, "", ""},
		{"messaging", []e{{"to_number", "2061111111"}}, "to_number", "envoy: 100 per 24h0m0s (fixed_window, aligned)"},
		{"edge_proxy_per_ip", []e{{"remote_address", "10.0.0.1"}}, "remote_address", "envoy: 10 per 1s (fixed_window, aligned)"},
		{"edge_proxy_per_ip", []e{{"remote_address", "50.0.0.5"}}, "remote_address_50.0.0.5", "envoy: 0 per 1s (fixed_window, aligned)"},
		{"features", []e{{"path", "/api/users"}}, "path_/api/*", "envoy: 3 per 1h0m0s (fixed_window, aligned)"},
		{"features", []e{{"path", "/api/"}}, "path_/api/*", "envoy: 3 per 1h0m0s (fixed_window, aligned)"},
		{"features", []e{{"path", "/other"}}, "", ""},
		{"features", []e{{"user", "alice"}}, "user", "envoy: 1 per 1h0m0s (fixed_window, aligned) [shadow]"},
		{"features", []e{{"plan", "gold"}}, "plan_gold", "gold: 5 per 1h0m0s (fixed_window, aligned)"},
		{"features", []e{{"api_key", "k"}}, "api_key", "envoy: 10 per 10s, burst 4 (gcra)"},
	}
	for _, tt := range tests {
		r := cfg.Match(tt.domain, tt.entries)
		switch {
		case tt.path == "" && r != nil:
			t.Errorf("Match(%s, %v) = %s, want none", tt.domain, tt.entries, r.Path)
		case tt.path == "":
		case r == nil:
			t.Errorf("Match(%s, %v) = none, want %s", tt.domain, tt.entries, tt.path)
		case r.Path != tt.path || r.Limit.String() != tt.limit || r.Domain != tt.domain:
			t.Errorf("Match(%s, %v) = %s %s %v, want %s %s", tt.domain, tt.entries, r.Domain, r.Path, r.Limit, tt.path, tt.limit)
		}
	}
	// The exact value wins over the wildcard, whatever the order in the file.
	if r := cfg.Match("features", []e{{"path", "/api/admin"}}); r == nil || !r.Unlimited {
		t.Errorf("/api/admin: %+v, want unlimited", r)
	}
	r := cfg.Match("features", []e{{"plan", "gold"}})
	if len(r.Replaces) != 1 || r.Replaces[0] != "free" || r.Name != "gold" || r.Unit != envoyconf.UnitHour {
		t.Errorf("plan_gold = %+v", r)
	}
	if r := cfg.Match("features", []e{{"plan", "free"}}); !r.DetailedMetric || r.Name != "free" {
		t.Errorf("plan_free = %+v", r)
	}
	if r := cfg.Match("features", []e{{"api_key", "k"}}); r.Unit != envoyconf.UnitNone || r.Limit.Aligned || r.Limit.Algorithm != admit.GCRA {
		t.Errorf("api_key = %+v", r)
	}
}

func TestUnits(t *testing.T) {
	for u, want := range map[string]time.Duration{"second": time.Second, "MINUTE": time.Minute, "hour": time.Hour,
		"day": 24 * time.Hour, "week": 7 * 24 * time.Hour, "month": 30 * 24 * time.Hour, "year": 365 * 24 * time.Hour} {
		cfg, err := envoyconf.Parse(envoyconf.File{Name: "u.yaml", Data: []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: " + u + "\n      requests_per_unit: 1\n")})
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Match("d", []envoyconf.Entry{{"k", "v"}}).Limit.Period; got != want {
			t.Errorf("unit %s: period %v, want %v", u, got, want)
		}
	}
}

func TestErrors(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"", "e.yaml: empty file: want a domain"},
		{"descriptors: []\n", "e.yaml:1:1: domain: missing"},
		{"domain: \"\"\n", "e.yaml:1:9: domain: empty"},
		{"domain: d\nfoo: 1\n", "e.yaml:2:1: foo: unknown field (want one of domain, descriptors, atomic, metadata)"},
		{"domain: d\natomic: yes please\n", `e.yaml:2:9: atomic: want true or false, found the string "yes please"`},
		{"domain: d\ndescriptors:\n  - value: v\n", "e.yaml:3:5: descriptors[0].key: missing"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n",
			`e.yaml:5:13: descriptors[0].rate_limit.unit: "fortnight": want second, minute, hour, day, week, month or year`},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: -1\n",
			"e.yaml:6:26: descriptors[0].rate_limit.requests_per_unit: -1 is outside 0-4294967295"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      limit: 2\n",
			"e.yaml:7:7: descriptors[0].rate_limit.limit: unknown field (want one of unit, requests_per_unit, unlimited, name, replaces, algorithm, window, burst, durability, durability_replicas, durability_timeout)"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unlimited: true\n      unit: second\n",
			"e.yaml:6:13: descriptors[0].rate_limit.unit: an unlimited rate_limit has no unit"},
		{"domain: d\ndescriptors:\n  - key: k\n  - key: k\n", `e.yaml:4:5: descriptors[1]: duplicate descriptor "k"`},
		{"domain: d\ndescriptors:\n  - key: k\n    shadow_mode: yes please\n", `e.yaml:4:18: descriptors[0].shadow_mode: want true or false, found the string "yes please"`},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      window: 10s\n      unit: second\n      requests_per_unit: 1\n",
			"e.yaml:5:15: descriptors[0].rate_limit.window: give a unit or a window, not both"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      burst: 3\n",
			"e.yaml:5:7: descriptors[0].rate_limit: burst 3: only gcra has a burst"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      requests_per_unit: 1\n", "e.yaml:5:7: descriptors[0].rate_limit.unit: missing"},
	}
	for _, tt := range tests {
		_, err := envoyconf.Parse(envoyconf.File{Name: "e.yaml", Data: []byte(tt.yaml)})
		if err == nil || err.Error() != tt.want {
			t.Errorf("Parse(%q):\n got %v\nwant %s", tt.yaml, err, tt.want)
		}
	}
}

func TestDuplicateDomain(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.yaml", "b.yml"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("domain: d\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not yaml"), 0o600)
	_, err := envoyconf.Load(dir)
	want := filepath.Join(dir, "b.yml") + `:1:1: domain: "d" is configured in ` + filepath.Join(dir, "a.yaml") + " too; admit serve --envoy-merge-domains merges them"
	if err == nil || err.Error() != want {
		t.Errorf("Load: %v, want %s", err, want)
	}
	if _, err := envoyconf.Load(t.TempDir()); err == nil {
		t.Error("Load of an empty directory: no error")
	}
}
