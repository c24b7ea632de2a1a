package policy_test

import (
	"testing"
	"time"

	"github.com/admit-dev/admit/policy"
)

// server.local_cache_max_age is a duration, 1s when the file leaves it out, and 0 (no local cache)
// when the file says 0.
func TestLocalCacheMaxAge(t *testing.T) {
	for _, c := range []struct {
		line string
		want time.Duration
	}{
		{"", policy.DefaultLocalCacheMaxAge},
		{"local_cache_max_age: 0", 0},
		{"local_cache_max_age: 0s", 0},
		{"local_cache_max_age: 250ms", 250 * time.Millisecond},
		{"local_cache_max_age: 1m", time.Minute},
		{"local_cache_max_age: 1ms", time.Millisecond},
	} {
		file := "server:\n  listen: 127.0.0.1:0\n  " + c.line + "\npolicies:\n  - {name: api, algorithm: fixed_window, limit: 10, window: 1s}\n"
		cfg, err := policy.Parse("cache.yaml", []byte(file))
		if err != nil {
			t.Errorf("%q: %v", c.line, err)
			continue
		}
		if got := cfg.Server.LocalCacheMaxAge; got != c.want {
			t.Errorf("%q: LocalCacheMaxAge = %v, want %v", c.line, got, c.want)
		}
	}
	if policy.DefaultLocalCacheMaxAge != time.Second {
		t.Errorf("DefaultLocalCacheMaxAge = %v, want 1s", policy.DefaultLocalCacheMaxAge)
	}
	cfg, err := policy.Load("testdata/valid/everything.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Server.LocalCacheMaxAge; got != 250*time.Millisecond {
		t.Errorf("everything.yaml: LocalCacheMaxAge = %v, want 250ms", got)
	}
}

// The bounds the error messages of server.local_cache_max_age name are the package's.
func TestLocalCacheMaxAgeBounds(t *testing.T) {
	if policy.MinLocalCacheMaxAge != time.Millisecond || policy.MaxLocalCacheMaxAge != time.Minute {
		t.Errorf("bounds %v … %v; the messages say 1ms … 1m", policy.MinLocalCacheMaxAge, policy.MaxLocalCacheMaxAge)
	}
	for _, v := range []string{"999us", "1m1ms", "-1ns"} {
		file := "server:\n  local_cache_max_age: " + v + "\npolicies:\n  - {name: api, algorithm: fixed_window, limit: 10, window: 1s}\n"
		if _, err := policy.Parse("cache.yaml", []byte(file)); err == nil {
			t.Errorf("local_cache_max_age: %s: no error", v)
		}
	}
}
