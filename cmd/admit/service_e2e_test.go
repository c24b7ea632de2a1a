package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/redistest"
)

// serviceConfig is the configuration of the service's end-to-end tests; %d is per-second's limit.
const serviceConfig = `
policies:
  - name: per-second
    algorithm: fixed_window
    limit: %d
    window: 10s
  - name: per-day
    algorithm: gcra
    limit: 1000
    window: 24h
`

// checkResult is what the tests read of an answer of POST /v1/check.
type checkResult struct {
	status    int
	Allowed   bool   `json:"allowed"`
	Policy    string `json:"policy"`
	Remaining int64  `json:"remaining"`
	Degraded  bool   `json:"degraded"`
	Error     string `json:"error"`
	Decisions []struct {
		Policy string `json:"policy"`
	} `json:"decisions"`
}

// postCheck sends body to POST /v1/check of p, and returns the answer.
func postCheck(t *testing.T, p *proc, body string) checkResult {
	t.Helper()
	resp, err := http.Post(p.base+"/v1/check", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res checkResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatalf("POST /v1/check %s: %d, body not JSON: %v", body, resp.StatusCode, err)
	}
	res.status = resp.StatusCode
	return res
}

// writeConfig writes the configuration with per-second's limit to path, atomically (a rename), so
// the reloader never reads half a file.
func writeConfig(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// eventually waits up to 10 s for ok to hold.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestE2EServiceMemory and TestE2EServiceRedis drive /v1/check through every status code and both
// request shapes, reload a good and a bad configuration under load without a failed request, and
// stop cleanly.
func TestE2EServiceMemory(t *testing.T) { testService(t, nil) }

func TestE2EServiceRedis(t *testing.T) { testService(t, redistest.Start(t)) }

func testService(t *testing.T, redis *redistest.Server) {
	config := filepath.Join(t.TempDir(), "admit.yaml")
	writeConfig(t, config, fmt.Sprintf(serviceConfig, 3))
	args := []string{"--config", config}
	if redis != nil {
		args = append(args, "--redis", redis.URL())
	}
	p := startAdmit(t, args...)

	for i := range 3 {
		if res := postCheck(t, p, `{"policy":"per-second","key":"alice"}`); res.status != 200 || !res.Allowed || res.Remaining != int64(2-i) {
			t.Fatalf("check %d: %+v; want 200", i, res)
		}
	}
	if res := postCheck(t, p, `{"policies":["per-second","per-day"],"key":"alice"}`); res.status != 429 || res.Policy != "per-second" || len(res.Decisions) != 2 {
		t.Fatalf("over the limit: %+v; want 429 by per-second, two decisions", res)
	}
	if res := postCheck(t, p, `{"policies":["per-second","per-day"],"key":"bob","cost":2}`); res.status != 200 || len(res.Decisions) != 2 {
		t.Fatalf("bob: %+v; want 200", res)
	}
	if res := postCheck(t, p, `{"policy":"per-hour","key":"alice"}`); res.status != 400 || !strings.Contains(res.Error, "unknown policy") {
		t.Fatalf("unknown policy: %+v; want 400", res)
	}
	if r := get(t, p.base+"/readyz"); r.status != 200 {
		t.Fatalf("/readyz: %d %q", r.status, r.body)
	}

	// Reload under load: no request may fail meanwhile.
	var failed atomic.Int64
	var sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf(`{"policies":["per-second","per-day"],"key":"load-%d-%d"}`, g, i%50)
				resp, err := http.Post(p.base+"/v1/check", "application/json", strings.NewReader(body))
				sent.Add(1)
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 && resp.StatusCode != 429 {
					failed.Add(1)
				}
			}
		})
	}
	policies := func() string { return get(t, p.base+"/v1/policies").body }
	writeConfig(t, config, fmt.Sprintf(serviceConfig, 5))
	eventually(t, "the good configuration loaded", func() bool { return strings.Contains(policies(), `"limit":5,`) })
	writeConfig(t, config, "policies:\n  - name: per-second\n    limit: 0\n")
	eventually(t, "the bad configuration refused", func() bool {
		return strings.Contains(get(t, p.base+"/metrics").body, `admit_config_reloads_total{result="failure"} 1`)
	})
	if !strings.Contains(policies(), `"limit":5,`) {
		t.Errorf("after a bad file, /v1/policies = %s; want the good configuration still serving", policies())
	}
	writeConfig(t, config, fmt.Sprintf(serviceConfig, 7))
	p.cmd.Process.Signal(syscall.SIGHUP)
	eventually(t, "the configuration reloaded", func() bool { return strings.Contains(policies(), `"limit":7,`) })
	close(stop)
	wg.Wait()
	if failed.Load() > 0 || sent.Load() == 0 {
		t.Errorf("%d of %d requests failed during the reloads; want none", failed.Load(), sent.Load())
	}
	t.Logf("%d requests during the reloads", sent.Load())

	// The limit grew from 3 to 7 and alice's counter was kept: 4 more.
	for i := range 4 {
		if res := postCheck(t, p, `{"policy":"per-second","key":"alice"}`); res.status != 200 {
			t.Fatalf("alice after the reload, %d: %+v; want 200", i, res)
		}
	}
	if res := postCheck(t, p, `{"policy":"per-second","key":"alice"}`); res.status != 429 {
		t.Fatalf("alice's eighth: %+v; want 429", res)
	}

	m := get(t, p.base+"/metrics").body
	for _, want := range []string{`admit_decisions_total{policy="per-second",result="allowed"}`, `admit_decisions_total{policy="per-second",result="limited"}`,
		`admit_config_reloads_total{result="success"} 2`, "admit_decision_duration_seconds_bucket", "admit_build_info", "go_goroutines"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(m, "alice") || strings.Contains(m, "rl:") {
		t.Error("/metrics holds a key or subject")
	}

	if redis != nil {
		redis.Kill(t)
		if res := postCheck(t, p, `{"policy":"per-second","key":"carol"}`); res.status != 503 || res.Error != "limiter unavailable" {
			t.Errorf("Redis down: %+v; want 503", res)
		}
		if r := get(t, p.base+"/readyz"); r.status != 503 {
			t.Errorf("/readyz with Redis down: %d; want 503", r.status)
		}
		// The circuit breaker opens after consecutive failures: the rest are refused at once.
		for range 6 {
			if res := postCheck(t, p, `{"policy":"per-second","key":"dave"}`); res.status != 503 {
				t.Fatalf("Redis down: %+v; want 503", res)
			}
		}
		m := get(t, p.base+"/metrics").body
		for _, want := range []string{`admit_breaker_state{breaker="redis",state="open"} 1`, `admit_breaker_opened_total{breaker="redis"} 1`,
			`admit_overlimit_cache_entries{cache="redis"}`} {
			if !strings.Contains(m, want) {
				t.Errorf("/metrics with Redis down lacks %s", want)
			}
		}
	}

	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t); code != 0 {
		t.Errorf("exit %d after SIGTERM; want 0", code)
	}
}

// TestE2EServiceWithoutConfig checks that without --config /v1/check serves the demo policy.
func TestE2EServiceWithoutConfig(t *testing.T) {
	p := startAdmit(t)
	if res := postCheck(t, p, `{"policy":"demo","key":"x"}`); res.status != 200 || res.Remaining != 2 {
		t.Errorf("demo policy: %+v; want 200, 2 remaining", res)
	}
	checkDemo(t, p.base, 200, 200, 200, 429)
}

// TestE2EServiceBadConfig checks that serve refuses to start on a configuration with errors, and
// says where they are.
func TestE2EServiceBadConfig(t *testing.T) {
	config := filepath.Join(t.TempDir(), "admit.yaml")
	writeConfig(t, config, "policies:\n  - name: x\n    algorithm: fixed_window\n    limit: 0\n    window: 1s\n")
	var stderr bytes.Buffer
	code := run(t.Context(), []string{"serve", "--config", config}, io.Discard, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "admit.yaml:4:12: policies[0] (x).limit: 0 is outside") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 2 naming the error", code, stderr.String())
	}
}

// TestE2EJSONLog checks that --log-format json writes one JSON object per line.
func TestE2EJSONLog(t *testing.T) {
	p := startAdmit(t, "--log-format", "json")
	checkDemo(t, p.base, 200)
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t)
	lines := strings.Split(strings.TrimSpace(p.logs.String()), "\n")
	for _, line := range lines {
		var record map[string]any
		if err := json.Unmarshal([]byte(line), &record); err != nil || record["msg"] == nil || record["level"] == nil {
			t.Errorf("log line %q is not a JSON record: %v", line, err)
		}
	}
	if len(lines) < 3 {
		t.Errorf("%d log lines; want the start-up records at least", len(lines))
	}
}
