package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/admit-dev/admit/internal/redistest"
)

// TestCheckCommand runs admit check against a real Redis: each exit code, and the JSON decision.
func TestCheckCommand(t *testing.T) {
	useSecret(t)
	redis := redistest.Start(t)
	config := filepath.Join(t.TempDir(), "admit.yaml")
	writeConfig(t, config, fmt.Sprintf(serviceConfig, 2))
	checkCmd := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), append([]string{"check", "--config", config}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	for i := range 2 {
		code, out, errs := checkCmd("--redis", redis.URL(), "--policy", "per-second", "--policy", "per-day", "--key", "alice")
		var res struct {
			Allowed   bool  `json:"allowed"`
			Remaining int64 `json:"remaining"`
			Decisions []struct {
				Policy string `json:"policy"`
			} `json:"decisions"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || code != checkAllowed || !res.Allowed || res.Remaining != int64(1-i) || len(res.Decisions) != 2 || errs != "" {
			t.Fatalf("check %d: exit %d, %+v (%v), stderr %q; want 0, allowed, %d remaining", i, code, res, err, errs, 1-i)
		}
	}
	if code, out, _ := checkCmd("--redis", redis.URL(), "--policy", "per-second", "--key", "alice"); code != checkLimited || !strings.Contains(out, `"allowed": false`) {
		t.Errorf("third check: exit %d, %s; want 1, limited", code, out)
	}
	// REDIS_URL is the same counters.
	t.Setenv("REDIS_URL", redis.URL())
	if code, _, _ := checkCmd("--policy", "per-second", "--key", "alice", "--cost", "0"); code != checkAllowed {
		t.Errorf("a peek: exit %d; want 0", code)
	}
	t.Setenv("REDIS_URL", "")
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"--policy", "per-hour", "--key", "alice"}, checkInvalid, `unknown policy "per-hour"`},
		{[]string{"--policy", "per-second", "--key", "alice", "--cost", "3"}, checkInvalid, "cost 3 outside 0-2"},
		{[]string{"--policy", "per-second"}, checkInvalid, "--key are required"},
		{[]string{"--policy", "per-second", "--key", "a", "--redis", "redis://" + redistest.ClosedPort(t)}, checkUnavailable, "unavailable"},
	} {
		code, out, errs := checkCmd(c.args...)
		if code != c.code || !strings.Contains(errs, c.err) || out != "" || c.code == checkInvalid && (strings.Contains(errs, "memstore:") || strings.Contains(errs, ": admit: ")) {
			t.Errorf("admit check %q: exit %d, stderr %q, stdout %q; want %d saying %q", c.args, code, errs, out, c.code, c.err)
		}
	}
	if code, out, _ := checkCmd("--help"); code != exitOK || !strings.Contains(out, "Exit status") {
		t.Errorf("--help: exit %d:\n%s", code, out)
	}
}
