package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
		rep, err := openPatient(t, srv.AdminURL()).Preflight(ctx)
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
		rep, err := openPatient(t, srv.URL()).Preflight(ctx)
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
	// A user lacking any one command of the ACL line is refused, naming the command, and the probe
	// leaves nothing behind.
	for i, rule := range strings.Fields(ACLRules()) {
		cmd, ok := strings.CutPrefix(rule, "+")
		if !ok {
			continue
		}
		t.Run("No"+cmd, func(t *testing.T) {
			srv.Do(t, "SCRIPT", "FLUSH")
			rules := strings.Replace(ACLRules(), " "+rule, "", 1)
			_, err := openPatient(t, setUser(t, srv, fmt.Sprintf("u%d", i), rules)).Preflight(ctx)
			want := "'" + cmd + "'" // as the probe, or the 7.0 message of a refused call in a script, names it
			if cmd == "evalsha" || cmd == "script|load" || cmd == "ping" || cmd == "wait" {
				want = "'" + cmd + "' command" // Redis's NOPERM of a command called directly
			}
			if !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), want) {
				t.Fatalf("Preflight without %s: %v, want ErrPermission naming %s", rule, err, want)
			}
			if errors.Is(err, admit.ErrUnavailable) {
				t.Errorf("a permission problem also matches ErrUnavailable: %v", err)
			}
			if keys := keysOf(t, srv); len(keys) != 0 {
				t.Errorf("Preflight without %s left keys %q", rule, keys)
			}
			t.Log(err)
		})
	}
	t.Run("KeyPattern", func(t *testing.T) {
		srv.Do(t, "SCRIPT", "FLUSH")
		_, err := openPatient(t, setUser(t, srv, "other-keys", strings.Replace(ACLRules(), "~rl:*", "~admit:*", 1))).Preflight(ctx)
		if !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), "~rl:*") {
			t.Fatalf("Preflight with keys ~admit:*: %v, want ErrPermission naming ~rl:*", err)
		}
	})
	t.Run("ProbeCallsEveryScriptCommand", func(t *testing.T) {
		var probed []string
		for _, c := range probeCalls {
			if !slices.Contains(probed, c[0]) {
				probed = append(probed, c[0])
			}
		}
		slices.Sort(probed)
		if want := scriptCommands(); !slices.Equal(probed, want) {
			t.Errorf("the permission probe calls %v; the scripts call %v", probed, want)
		}
	})
	t.Run("Eviction", func(t *testing.T) {
		srv.Do(t, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
		defer srv.Do(t, "CONFIG", "SET", "maxmemory-policy", "noeviction")
		rep, err := openPatient(t, srv.AdminURL()).Preflight(ctx)
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
		_, err := openPatient(t, url).Preflight(ctx)
		if !errors.Is(err, admit.ErrUnavailable) || errors.Is(err, ErrPermission) {
			t.Fatalf("Preflight of a stopped Redis: %v, want ErrUnavailable only", err)
		}
	})
}
