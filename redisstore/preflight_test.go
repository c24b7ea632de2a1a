package redisstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
)

// setUser creates the user name with password s3cret and rules on srv, and returns a URL that logs
// in as it.
func setUser(t *testing.T, srv *redistest.Server, name, rules string) string {
	t.Helper()
	args := append([]string{"ACL", "SETUSER", name, "on", ">s3cret"}, strings.Fields(rules)...)
	if err := srv.Do(t, args...).Error(); err != nil {
		t.Fatalf("ACL SETUSER %s: %v", rules, err)
	}
	return "redis://" + name + ":s3cret@" + srv.Addr()
}

// keysOf returns every key on srv.
func keysOf(t *testing.T, srv *redistest.Server) []string {
	t.Helper()
	keys, err := srv.Do(t, "KEYS", "*").AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func TestPreflight(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()

	t.Run("DefaultUser", func(t *testing.T) {
		rep, err := open(t, srv.URL()).Preflight(ctx)
		if err != nil {
			t.Fatalf("Preflight: %v", err)
		}
		want, _ := srv.Do(t, "CONFIG", "GET", "maxmemory-policy").AsStrMap()
		if rep.MaxmemoryPolicy != want["maxmemory-policy"] || rep.MaxmemoryPolicy == PolicyUnknown {
			t.Errorf("MaxmemoryPolicy %q, want %q", rep.MaxmemoryPolicy, want["maxmemory-policy"])
		}
		if rep.MaxmemoryPolicy == "noeviction" && len(rep.Warnings) != 0 {
			t.Errorf("warnings under noeviction: %q", rep.Warnings)
		}
		if keys := keysOf(t, srv); len(keys) != 0 {
			t.Errorf("Preflight wrote keys %q", keys)
		}
	})
	t.Run("LeastPrivilegeUser", func(t *testing.T) {
		srv.Do(t, "SCRIPT", "FLUSH")
		rep, err := open(t, setUser(t, srv, "least", ACLRules())).Preflight(ctx)
		if err != nil {
			t.Fatalf("Preflight as a user with exactly ACLRules: %v", err)
		}
		if rep.MaxmemoryPolicy != PolicyUnknown || len(rep.Warnings) != 0 {
			t.Errorf("report %+v, want the policy unknown and no warning", rep)
		}
		if keys := keysOf(t, srv); len(keys) != 0 {
			t.Errorf("Preflight wrote keys %q", keys)
		}
	})
	missing := []struct{ name, rules, want string }{
		{"NoScriptLoad", strings.Replace(ACLRules(), " +script|load", "", 1), "script|load"},
		{"NoZcard", strings.Replace(ACLRules(), " +zcard", "", 1), "zcard"}, // called with redis.pcall
		{"NoTime", strings.Replace(ACLRules(), " +time", "", 1), "time"},
		{"NoPing", strings.Replace(ACLRules(), " +ping", "", 1), "ping"},
		{"KeyPattern", strings.Replace(ACLRules(), "~rl:*", "~admit:*", 1), "~rl:*"},
	}
	for i, m := range missing {
		t.Run(m.name, func(t *testing.T) {
			if m.rules == ACLRules() {
				t.Fatalf("the rules did not change: %s", m.rules)
			}
			srv.Do(t, "SCRIPT", "FLUSH")
			_, err := open(t, setUser(t, srv, "u"+string(rune('a'+i)), m.rules)).Preflight(ctx)
			if !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), m.want) {
				t.Fatalf("Preflight: %v, want ErrPermission naming %q", err, m.want)
			}
			if errors.Is(err, admit.ErrUnavailable) {
				t.Errorf("a permission problem also matches ErrUnavailable: %v", err)
			}
			t.Log(err)
		})
	}
	t.Run("Eviction", func(t *testing.T) {
		srv.Do(t, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
		defer srv.Do(t, "CONFIG", "SET", "maxmemory-policy", "noeviction")
		rep, err := open(t, srv.URL()).Preflight(ctx)
		if err != nil {
			t.Fatalf("Preflight: %v", err)
		}
		if rep.MaxmemoryPolicy != "allkeys-lru" || len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], "allkeys-lru") {
			t.Errorf("report %+v, want a warning of allkeys-lru", rep)
		}
	})
	t.Run("Down", func(t *testing.T) {
		down := redistest.Start(t)
		url := down.URL()
		down.Stop(t)
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := open(t, url).Preflight(ctx)
		if !errors.Is(err, admit.ErrUnavailable) || errors.Is(err, ErrPermission) {
			t.Fatalf("Preflight of a stopped Redis: %v, want ErrUnavailable only", err)
		}
	})
}
