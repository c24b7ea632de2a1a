package main

import (
	"bufio"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/redistest"
)

// leakConfig reveals subjects in the sketch of a policy of one request an hour.
const leakConfig = `
server:
  top: {size: 10, reveal_subjects: true}
policies:
  - {name: tight, algorithm: fixed_window, limit: 1, window: 1h}
`

// monitorRedis sends MONITOR to srv as its unrestricted default user and collects every command
// the server runs from then on, until t ends.
func monitorRedis(t *testing.T, srv *redistest.Server) func() string {
	t.Helper()
	c, err := net.DialTimeout("tcp", srv.Addr(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := bufio.NewReader(c)
	if _, err := c.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := r.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("MONITOR answered %q, %v", line, err)
	}
	c.SetReadDeadline(time.Time{})
	var mu sync.Mutex
	var seen strings.Builder
	go func() {
		for {
			line, err := r.ReadString('\n')
			mu.Lock()
			seen.WriteString(line)
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return seen.String()
	}
}

// TestE2ERawSubjectNeverLeaks runs one admit serve on a real Redis with
// server.top.reveal_subjects: true, rejects a distinctive subject, reads its state, resets it and
// sets it an override through the admin API, and checks the raw subject is held in the process's memory only: GET
// /v1/top shows it, but it is in no Redis key's name or value (while the override's reason is:
// the scan reads values), no command Redis ran (MONITOR), no line of /metrics and no line of the
// process's log.
func TestE2ERawSubjectNeverLeaks(t *testing.T) {
	const subject = "Leak-Canary-QzXw@example.org" // not hex: no digest can hold it
	redis := redistest.Start(t)
	commands := monitorRedis(t, redis)
	config := filepath.Join(t.TempDir(), "admit.yaml")
	writeConfig(t, config, leakConfig)
	env := admitEnv(secretEnv+"="+testSecret, adminTokenEnv+"="+testAdminToken)
	p := startAdmitEnv(t, env, "--config", config, "--redis", redis.URL(), "--admin-listen", "127.0.0.1:0")
	adminURL := "http://" + p.logs.waitAdminAddr(t)
	body := `{"policy":"tight","key":"` + subject + `"}`
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests, http.StatusTooManyRequests, http.StatusTooManyRequests} {
		if res := postCheck(t, p, body); res.status != want {
			t.Fatalf("check %d of the subject: %d; want %d", i+1, res.status, want)
		}
	}

	top := adminTop(t, adminURL)
	if len(top.Subjects) != 1 || top.Subjects[0].Key != subject || top.Subjects[0].Rejected != 3 || !top.Revealed {
		t.Fatalf("GET /v1/top: %+v; want the subject, revealed, rejected 3 times", top)
	}
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/state?policy=tight&key=" + url.QueryEscape(subject), ""},
		{http.MethodPost, "/v1/reset", body},
		{http.MethodPut, "/v1/overrides", `{"policy":"tight","key":"` + subject + `","limit":5,"reason":"leak test"}`},
		{http.MethodGet, "/v1/overrides?policy=tight", ""},
	} {
		if status, answer := adminDo(t, c.method, adminURL+c.path, testAdminToken, c.body); status != http.StatusOK || strings.Contains(answer, subject) {
			t.Fatalf("%s %s: %d %s; want 200, without the subject", c.method, c.path, status, answer)
		}
	}
	if res := postCheck(t, p, body); res.status != http.StatusOK {
		t.Fatalf("the subject's check after the reset: %d; want 200", res.status)
	}
	keys, err := redis.Do(t, "KEYS", "*").AsStrSlice()
	if err != nil || len(keys) == 0 {
		t.Fatalf("KEYS * = %q, %v; want the subject's key", keys, err)
	}
	reason := false // the override's reason, a control: the scan reads the values
	for _, k := range keys {
		if strings.Contains(k, subject) {
			t.Errorf("Redis key %q holds the subject", k)
		}
		dump, err := redis.Do(t, "DUMP", k).ToString()
		if err != nil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		if strings.Contains(dump, subject) {
			t.Errorf("the DUMP of %s holds the subject", k)
		}
		reason = reason || strings.Contains(dump, "leak test")
		if typ, _ := redis.Do(t, "TYPE", k).ToString(); typ == "string" {
			if v, err := redis.Do(t, "GET", k).ToString(); err != nil || strings.Contains(v, subject) {
				t.Errorf("GET %s = %q, %v: holds the subject, or unreadable", k, v, err)
			}
		}
	}
	if !reason {
		t.Errorf("no DUMP of %q holds the override's reason: the scan read nothing", keys)
	}
	metrics := get(t, p.base+"/metrics").body
	if !strings.Contains(metrics, `admit_top_subjects_entries{policy="tight"} 1`) {
		t.Fatalf("/metrics lacks the sketch's one entry:\n%s", metrics)
	}
	if strings.Contains(metrics, subject) {
		t.Error("/metrics holds the subject")
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("admit did not exit within 30s of SIGTERM")
	}
	log := p.logs.String()
	if !strings.Contains(log, "reset") || !strings.Contains(log, "override_set") || strings.Contains(log, subject) {
		t.Errorf("the process log names no reset or override, or holds the subject:\n%s", log)
	}
	monitored := commands()
	if !strings.Contains(monitored, `"EVALSHA"`) || !strings.Contains(monitored, "leak test") {
		t.Fatalf("MONITOR saw no script call, or not the override's reason: %d bytes\n%s", len(monitored), monitored)
	}
	if strings.Contains(monitored, subject) {
		t.Error("a command Redis ran holds the subject")
	}
}
