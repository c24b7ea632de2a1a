package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/admit-dev/admit/internal/redistest"
)

const failOpenServiceConfig = `
policies:
  - name: open
    algorithm: fixed_window
    limit: 100
    window: 1m
    failure: open
    local_limit: 2
  - name: closed
    algorithm: fixed_window
    limit: 100
    window: 1m
`

// TestE2EFailOpen: admit serve with Redis killed answers a failure: open policy from its local limit,
// degraded (200, then 429), a failure: closed one 503, and counts the degraded decisions in its
// metrics; before the kill, Redis decides.
func TestE2EFailOpen(t *testing.T) {
	redis := redistest.Start(t)
	config := filepath.Join(t.TempDir(), "admit.yaml")
	writeConfig(t, config, failOpenServiceConfig)
	p := startAdmit(t, "--config", config, "--redis", redis.URL())
	check := func(body string) (checkResult, bool) {
		t.Helper()
		res := postCheck(t, p, body)
		return res, res.Degraded
	}
	if res, degraded := check(`{"policy":"open","key":"alice"}`); res.status != 200 || degraded {
		t.Fatalf("with Redis up: %+v; want 200, not degraded", res)
	}
	redis.Kill(t)
	for i, want := range []int{200, 200, 429} {
		if res, degraded := check(`{"policy":"open","key":"alice"}`); res.status != want || !degraded {
			t.Errorf("check %d with Redis killed: %+v, degraded %v; want %d, degraded", i, res, degraded, want)
		}
	}
	if res, _ := check(`{"policies":["open","closed"],"key":"alice"}`); res.status != 503 {
		t.Errorf("open and closed together with Redis killed: %+v; want 503", res)
	}
	if m := get(t, p.base+"/metrics").body; !strings.Contains(m, `admit_decisions_total{policy="open",result="degraded"} 3`) {
		t.Errorf("/metrics does not count 3 degraded decisions of open:\n%s", grepLines(m, "admit_decisions_total"))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			b.WriteString(line)
		}
	}
	return b.String()
}
