package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/guard"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/redisstore"
	"github.com/prometheus/client_golang/prometheus"
)

// The defaults of server.redis_command_timeout and server.breaker are redisstore's and guard's.
func TestServerBreakerDefaultsAreTheLibrary(t *testing.T) {
	if policy.DefaultRedisCommandTimeout != redisstore.DefaultCommandTimeout {
		t.Errorf("policy.DefaultRedisCommandTimeout = %v, redisstore.DefaultCommandTimeout = %v", policy.DefaultRedisCommandTimeout, redisstore.DefaultCommandTimeout)
	}
	if policy.DefaultBreakerFailures != guard.DefaultFailures || policy.DefaultBreakerCoolOff != guard.DefaultCoolOff {
		t.Errorf("policy's breaker defaults %d, %v; guard's %d, %v", policy.DefaultBreakerFailures, policy.DefaultBreakerCoolOff, guard.DefaultFailures, guard.DefaultCoolOff)
	}
}

// lateStore fails every Take with a timeout of a late client.
type lateStore struct{ downStore }

var errLate = fmt.Errorf("store: %w: %w (%w)", admit.ErrUnavailable, context.DeadlineExceeded, guard.ErrClientLate)

func (lateStore) Take(context.Context, admit.Request) (admit.Decision, error) {
	return admit.Decision{}, errLate
}

func (lateStore) TakeAll(context.Context, []admit.Request, []admit.Decision) (bool, error) {
	return false, errLate
}

// guardStack's breaker opens after server.breaker.failures failures, and counts a late client's
// timeouts only under server.breaker.count_late.
func TestGuardStackBreakerSettings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backend admit.Store
		breaker policy.Breaker
		refused int // the first call refused by the open breaker, 0 for none of 10
	}{
		{"failures 2", downStore{}, policy.Breaker{Failures: 2, CoolOff: time.Hour}, 3},
		{"failures 7", downStore{}, policy.Breaker{Failures: 7, CoolOff: time.Hour}, 8},
		{"late, not counted", lateStore{}, policy.Breaker{Failures: 2, CoolOff: time.Hour}, 0},
		{"late, count_late", lateStore{}, policy.Breaker{Failures: 2, CoolOff: time.Hour, CountLate: true}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := guardStack(prometheus.NewRegistry(), tc.backend, true, 0, 0, tc.breaker)
			if err != nil {
				t.Fatal(err)
			}
			defer g.close()
			refused := 0
			for call := 1; call <= 10 && refused == 0; call++ {
				_, err := g.top.Take(t.Context(), admit.Request{Key: "rl:k", Limit: readyLimit, Cost: 1})
				if errors.Is(err, guard.ErrOpen) {
					refused = call
				} else if !errors.Is(err, admit.ErrUnavailable) {
					t.Fatalf("call %d: %v, want unavailable", call, err)
				}
			}
			if refused != tc.refused {
				t.Fatalf("first call refused by the breaker: %d, want %d (0: none of 10)", refused, tc.refused)
			}
		})
	}
}

// The Redis Store of admit serve has the file's server.redis_command_timeout (0, redisstore's
// default, when the settings come from no file) and server.redis_tls.
func TestRedisConfigFromTheFile(t *testing.T) {
	file := "server:\n  redis: redis://127.0.0.1:6379\n  redis_command_timeout: 750ms\n  redis_tls: {ca_file: /ca.pem}\n" +
		"policies:\n  - {name: api, algorithm: fixed_window, limit: 10, window: 1s}\n"
	p, err := policy.Parse("serve.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	var cfg serveConfig
	cfg.applyFile(p.Server)
	got := redisConfig(cfg)
	if got.URL != "redis://127.0.0.1:6379" || got.CommandTimeout != 750*time.Millisecond || got.CAFile != "/ca.pem" {
		t.Errorf("redisConfig = %+v; want the file's URL, 750ms and /ca.pem", got)
	}
	if cfg.breaker != p.Server.Breaker || cfg.breaker.Failures != policy.DefaultBreakerFailures {
		t.Errorf("breaker settings %+v, want the file's %+v", cfg.breaker, p.Server.Breaker)
	}
	if got := redisConfig(serveConfig{redisURL: "redis://x:1"}); got.CommandTimeout != 0 {
		t.Errorf("without a file: CommandTimeout %v, want 0 (redisstore's default)", got.CommandTimeout)
	}
}

// server.redis_command_timeout reaches the Store that admit serve decides with, end to end: against
// a frozen Redis a check under a long timeout is still waiting two seconds on (the 200ms default
// would have answered 503 by then) and is answered 200 once Redis runs again, while under a short
// one it is answered 503 with Redis still frozen.
func TestServeRedisCommandTimeoutFrozen(t *testing.T) {
	useSecret(t)
	for _, tc := range []struct {
		timeout string
		want    int
	}{{"30s", http.StatusOK}, {"100ms", http.StatusServiceUnavailable}} {
		t.Run(tc.timeout, func(t *testing.T) {
			srv := redistest.Start(t)
			file := filepath.Join(t.TempDir(), "admit.yaml")
			writeConfig(t, file, "server:\n  redis_command_timeout: "+tc.timeout+"\n"+
				"policies:\n  - {name: api, algorithm: fixed_window, limit: 100, window: 1m}\n")
			base, _, _ := serveInProcess(t, "--config", file, "--redis", srv.URL())
			check := func() int {
				resp, err := http.Post(base+"/v1/check", "application/json", strings.NewReader(`{"policy":"api","key":"alice"}`))
				if err != nil {
					return -1
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			if code := check(); code != http.StatusOK {
				t.Fatalf("before the freeze: %d, want 200", code)
			}
			srv.Freeze(t)
			thawed := false
			defer func() {
				if !thawed {
					srv.Thaw(t)
				}
			}()
			answer := make(chan int, 1)
			start := time.Now()
			go func() { answer <- check() }()
			if tc.want == http.StatusOK {
				time.Sleep(2 * time.Second)
				select {
				case code := <-answer:
					t.Fatalf("answered %d %v after the freeze under a %s command timeout; want it still waiting", code, time.Since(start), tc.timeout)
				default:
				}
				srv.Thaw(t)
				thawed = true
			}
			select {
			case code := <-answer:
				if code != tc.want {
					t.Fatalf("answered %d after %v (thawed: %t), want %d", code, time.Since(start), thawed, tc.want)
				}
				t.Logf("answered %d after %v (thawed: %t)", code, time.Since(start), thawed)
			case <-time.After(time.Minute):
				t.Fatalf("no answer within a minute of the freeze (thawed: %t)", thawed)
			}
		})
	}
}
