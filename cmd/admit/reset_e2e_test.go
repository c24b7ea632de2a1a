package main

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/transport/admin"
)

// hourlyConfig has a policy of an hour, and an over-limit cache that remembers a rejection for a
// minute: far longer than the test waits, so only a reset heard can make an instance forget one.
const hourlyConfig = `
server:
  local_cache_max_age: 1m
policies:
  - name: hourly
    algorithm: fixed_window
    limit: 2
    window: 1h
`

// postAdmin sends POST url with body and the bearer token, and returns the status and the body.
func postAdmin(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("POST %s: reading the answer: %v", url, err)
	}
	return res.StatusCode, string(b)
}

// resetSubscribers returns how many connections are subscribed to the reset channel of s.
func resetSubscribers(t *testing.T, s *redistest.Server) int64 {
	t.Helper()
	reply, err := s.Do(t, "PUBSUB", "NUMSUB", "rl:reset").ToArray()
	if err != nil || len(reply) != 2 {
		t.Fatalf("PUBSUB NUMSUB rl:reset = %v, %v", reply, err)
	}
	n, err := reply[1].AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestE2EResetAcrossInstances runs two admit serve processes on one Redis, A with the admin API, and
// spends a subject on B until B's over-limit cache answers its 429s; a reset through A's admin API
// then makes B admit it again at once: B heard the reset on rl:reset and forgot the rejection,
// which it would otherwise remember for a minute. Before the reset the test waits until both
// processes are subscribed, so no publication can be missed; after it, B is polled for at most
// 10 s in case the message is in flight, and the test fails if B is still refusing.
func TestE2EResetAcrossInstances(t *testing.T) {
	s := redistest.Start(t)
	config := filepath.Join(t.TempDir(), "admit.yaml")
	writeConfig(t, config, hourlyConfig)
	a := startAdmitEnv(t, admitEnv(secretEnv+"="+testSecret, adminTokenEnv+"="+testAdminToken),
		"--redis", s.URL(), "--config", config, "--admin-listen", "127.0.0.1:0")
	adminURL := "http://" + a.logs.waitAdminAddr(t)
	b := startAdmit(t, "--redis", s.URL(), "--config", config)

	for deadline := time.Now().Add(30 * time.Second); resetSubscribers(t, s) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections subscribed to rl:reset after 30 s; want 2, one per instance", resetSubscribers(t, s))
		}
	}
	const check = `{"policy":"hourly","key":"alice"}`
	for i, want := range []int{200, 200, 429, 429, 429} {
		if res := postCheck(t, b, check); res.status != want {
			t.Fatalf("check %d on B: %d %+v; want %d", i+1, res.status, res, want)
		}
	}
	if hits, ok := overLimitHits(t, b); !ok || hits < 1 {
		t.Fatalf("B's over-limit cache hits: %d (series present: %v); want its 429s answered from the cache", hits, ok)
	}

	status, body := postAdmin(t, adminURL+"/v1/reset", testAdminToken, `{"policy":"hourly","key":"alice","reason":"e2e"}`)
	var res admin.ResetResponse
	if err := json.Unmarshal([]byte(body), &res); status != http.StatusOK || err != nil || res != (admin.ResetResponse{Reset: true, Policy: "hourly", Keys: 1}) {
		t.Fatalf("POST /v1/reset on A = %d %s (%v); want 200 and one key reset", status, body, err)
	}
	start := time.Now()
	for attempt := 1; ; attempt++ {
		r := postCheck(t, b, check)
		took := time.Since(start)
		if r.status == http.StatusOK {
			t.Logf("B admitted alice on check %d after the reset, %v after A answered it", attempt, took.Round(time.Microsecond))
			break
		}
		if took > 10*time.Second {
			t.Fatalf("B still answers %d %+v %v after the reset through A (check %d); want 200: B did not forget its cached rejection",
				r.status, r, took.Round(time.Millisecond), attempt)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if keys, err := s.Do(t, "KEYS", "rl:hourly:*").AsStrSlice(); err != nil || len(keys) != 1 {
		t.Errorf("KEYS rl:hourly:* after the reset and one admission = %q, %v; want the one key, counting afresh", keys, err)
	}
	if r := postCheck(t, b, check); r.status != http.StatusOK || r.Remaining != 0 {
		t.Errorf("the second check on B after the reset: %d %+v; want 200 and 0 remaining: the whole allowance of 2 was back", r.status, r)
	}
	if want := `msg="admin change" action=reset policy=hourly subject_digest=`; !strings.Contains(a.logs.String(), want) ||
		!strings.Contains(a.logs.String(), `reason=e2e client=127.0.0.1 result=ok`) {
		t.Errorf("A's log lacks the audit record %q…result=ok:\n%s", want, a.logs)
	}
}
