package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/redistest"
)

// dailyConfig has a policy of a day: a full key's 429 has a Retry-After of about 24 h. %s is the
// server's settings.
const dailyConfig = `
server:
%s
policies:
  - name: daily
    algorithm: fixed_window
    limit: 2
    window: 24h
`

// overLimitHits returns the over-limit cache's hits from p's /metrics, and whether it has the series.
func overLimitHits(t *testing.T, p *proc) (int, bool) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^admit_overlimit_cache_hits_total\{cache="redis"\} (\d+)$`).FindStringSubmatch(get(t, p.base+"/metrics").body)
	if m == nil {
		return 0, false
	}
	n, _ := strconv.Atoi(m[1])
	return n, true
}

// fillDaily sends daily's two admissions and a few rejections for alice, and checks the answers.
func fillDaily(t *testing.T, p *proc) {
	t.Helper()
	const body = `{"policy":"daily","key":"alice"}`
	for i, want := range []int{200, 200, 429, 429, 429, 429} {
		if res := postCheck(t, p, body); res.status != want {
			t.Fatalf("check %d of a fresh key: %d %+v, want %d", i+1, res.status, res, want)
		}
	}
}

// untilStatus sends alice's check of daily until it is answered want, for up to 10 s, and returns
// how long that took.
func untilStatus(t *testing.T, p *proc, want int) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		res := postCheck(t, p, `{"policy":"daily","key":"alice"}`)
		took := time.Since(start)
		if res.status == want {
			return took
		}
		if took > 10*time.Second {
			t.Fatalf("still %d %+v %v after the change in Redis, want %d", res.status, res, took.Round(time.Millisecond), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestE2EOverLimitCacheSeesRedis checks that admit serve on Redis, whose over-limit cache answers a
// full key's 429s without Redis, sees a change made in Redis within server.local_cache_max_age
// (1 s by default), however long the 429's Retry-After: an operator's DEL gives the quota back, a
// corrupt value answers 503, a FLUSHALL starts afresh.
func TestE2EOverLimitCacheSeesRedis(t *testing.T) {
	s := redistest.Start(t)
	config := filepath.Join(t.TempDir(), "admit.yaml")
	writeConfig(t, config, fmt.Sprintf(dailyConfig, "  listen: 127.0.0.1:0"))
	p := startAdmit(t, "--redis", s.URL(), "--config", config)
	const bound = time.Second // the default
	for _, c := range []struct {
		name   string
		change []string
		want   int
	}{
		{"DEL gives the quota back", []string{"DEL", "KEY"}, http.StatusOK},
		{"corrupt state is an error", []string{"SET", "KEY", "abc"}, http.StatusServiceUnavailable},
		{"FLUSHALL starts afresh", []string{"FLUSHALL"}, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			s.Do(t, "FLUSHALL")
			hits, _ := overLimitHits(t, p)
			fillDaily(t, p)
			if now, ok := overLimitHits(t, p); !ok || now <= hits {
				t.Fatalf("over-limit cache hits %d → %d (series present: %v): the 429s were not answered by the cache", hits, now, ok)
			}
			keys, err := s.Do(t, "KEYS", "rl:daily:*").AsStrSlice()
			if err != nil || len(keys) != 1 {
				t.Fatalf("KEYS rl:daily:* = %q, %v; want one key", keys, err)
			}
			args := append([]string(nil), c.change...)
			for i, a := range args {
				if a == "KEY" {
					args[i] = keys[0]
				}
			}
			s.Do(t, args...)
			took := untilStatus(t, p, c.want)
			t.Logf("%q: answered %d %v after it", args, c.want, took.Round(time.Millisecond))
			if slack := 4 * time.Second; took > bound+slack {
				t.Errorf("%q: answered %d only %v after it, want within the bound %v (and %v of slack)", args, c.want, took, bound, slack)
			}
		})
	}
}

// TestE2EOverLimitCacheOff checks that server.local_cache_max_age: 0 stacks no over-limit cache:
// no local answers (no hits series), and a DEL is seen by the very next request.
func TestE2EOverLimitCacheOff(t *testing.T) {
	s := redistest.Start(t)
	config := filepath.Join(t.TempDir(), "admit.yaml")
	writeConfig(t, config, fmt.Sprintf(dailyConfig, "  local_cache_max_age: 0"))
	p := startAdmit(t, "--redis", s.URL(), "--config", config)
	fillDaily(t, p)
	if n, ok := overLimitHits(t, p); ok {
		t.Errorf("/metrics has admit_overlimit_cache_hits_total (%d): a cache is stacked", n)
	}
	keys, err := s.Do(t, "KEYS", "rl:daily:*").AsStrSlice()
	if err != nil || len(keys) != 1 {
		t.Fatalf("KEYS rl:daily:* = %q, %v; want one key", keys, err)
	}
	s.Do(t, "DEL", keys[0])
	if res := postCheck(t, p, `{"policy":"daily","key":"alice"}`); res.status != http.StatusOK {
		t.Errorf("the check right after DEL: %d %+v, want 200", res.status, res)
	}
}

// TestE2EOverLimitCacheProxy checks the same of admit proxy, which stacks the same cache: after an
// operator's DEL of a full key, the route admits again within the bound.
func TestE2EOverLimitCacheProxy(t *testing.T) {
	s := redistest.Start(t)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "upstream\n")
	}))
	defer upstream.Close()
	config := filepath.Join(t.TempDir(), "proxy.yaml")
	writeConfig(t, config, fmt.Sprintf(dailyConfig, "  listen: 127.0.0.1:0")+`
routes:
  - path_prefix: /
    policies: [daily]
    subject: {from: constant}
`)
	p := startCommand(t, admitEnv(secretEnv+"="+testSecret), "proxy", "--upstream", upstream.URL, "--redis", s.URL(), "--config", config)
	for i, want := range []int{200, 200, 429, 429, 429} {
		if r := get(t, p.base+"/x"); r.status != want {
			t.Fatalf("request %d: %d %q, want %d", i+1, r.status, r.body, want)
		}
	}
	keys, err := s.Do(t, "KEYS", "rl:daily:*").AsStrSlice()
	if err != nil || len(keys) != 1 {
		t.Fatalf("KEYS rl:daily:* = %q, %v; want one key", keys, err)
	}
	s.Do(t, "DEL", keys[0])
	start := time.Now()
	for {
		r := get(t, p.base+"/x")
		took := time.Since(start)
		if r.status == http.StatusOK {
			t.Logf("DEL: answered 200 %v after it", took.Round(time.Millisecond))
			if bound, slack := time.Second, 4*time.Second; took > bound+slack {
				t.Errorf("answered 200 only %v after the DEL, want within the bound %v (and %v of slack)", took, bound, slack)
			}
			return
		}
		if took > 10*time.Second {
			t.Fatalf("still %d %q %v after the DEL, want 200", r.status, r.body, took.Round(time.Millisecond))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
