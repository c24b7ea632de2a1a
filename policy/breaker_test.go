package policy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit/policy"
)

// server.redis_command_timeout and server.breaker are optional: 200ms, and 5 failures, 1s, late
// timeouts not counted, when the file leaves them out, in part or whole.
func TestRedisCommandTimeoutAndBreaker(t *testing.T) {
	def := policy.Breaker{Failures: 5, CoolOff: time.Second}
	for _, c := range []struct {
		lines   string
		timeout time.Duration
		breaker policy.Breaker
	}{
		{"", 200 * time.Millisecond, def},
		{"redis_command_timeout: 10ms", 10 * time.Millisecond, def},
		{"redis_command_timeout: 1m", time.Minute, def},
		{"breaker: {}", 200 * time.Millisecond, def},
		{"breaker: {failures: 1}", 200 * time.Millisecond, policy.Breaker{Failures: 1, CoolOff: time.Second}},
		{"breaker: {failures: 1000, cool_off: 10m, count_late: true}", 200 * time.Millisecond, policy.Breaker{Failures: 1000, CoolOff: 10 * time.Minute, CountLate: true}},
		{"breaker: {cool_off: 10ms, count_late: false}", 200 * time.Millisecond, policy.Breaker{Failures: 5, CoolOff: 10 * time.Millisecond}},
	} {
		file := "server:\n  listen: 127.0.0.1:0\n  " + c.lines + "\npolicies:\n  - {name: api, algorithm: fixed_window, limit: 10, window: 1s}\n"
		cfg, err := policy.Parse("breaker.yaml", []byte(file))
		if err != nil {
			t.Errorf("%q: %v", c.lines, err)
			continue
		}
		if got := cfg.Server.RedisCommandTimeout; got != c.timeout {
			t.Errorf("%q: RedisCommandTimeout = %v, want %v", c.lines, got, c.timeout)
		}
		if got := cfg.Server.Breaker; got != c.breaker {
			t.Errorf("%q: Breaker = %+v, want %+v", c.lines, got, c.breaker)
		}
	}
	if policy.DefaultRedisCommandTimeout != 200*time.Millisecond || policy.MinRedisCommandTimeout != 10*time.Millisecond || policy.MaxRedisCommandTimeout != time.Minute ||
		policy.DefaultBreakerFailures != 5 || policy.MaxBreakerFailures != 1000 ||
		policy.DefaultBreakerCoolOff != time.Second || policy.MinBreakerCoolOff != 10*time.Millisecond || policy.MaxBreakerCoolOff != 10*time.Minute {
		t.Error("the bounds are not those the messages and docs give: redis_command_timeout 10ms-1m (200ms), breaker.failures 1-1000 (5), breaker.cool_off 10ms-10m (1s)")
	}
	cfg, err := policy.Load("testdata/valid/everything.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Server.Breaker, (policy.Breaker{Failures: 8, CoolOff: 2 * time.Second, CountLate: true}); got != want || cfg.Server.RedisCommandTimeout != 500*time.Millisecond {
		t.Errorf("everything.yaml: RedisCommandTimeout = %v, Breaker = %+v; want 500ms, %+v", cfg.Server.RedisCommandTimeout, got, want)
	}
}

// A bad server.redis_command_timeout or server.breaker value is an error naming the field; the file
// gives no Config.
func TestRedisCommandTimeoutAndBreakerErrors(t *testing.T) {
	for _, c := range []struct{ lines, want string }{
		{"redis_command_timeout: 9ms", "server.redis_command_timeout: 9ms is outside 10ms-1m"},
		{"redis_command_timeout: 0s", "server.redis_command_timeout: 0s is outside 10ms-1m"},
		{"redis_command_timeout: 61s", "server.redis_command_timeout: 1m1s is outside 10ms-1m"},
		{"redis_command_timeout: 200", "server.redis_command_timeout: want a duration"},
		{"redis_command_timeout: -1s", "server.redis_command_timeout"},
		{"breaker: {failures: 0}", "server.breaker.failures: 0 is outside 1-1000"},
		{"breaker: {failures: 1001}", "server.breaker.failures: 1001 is outside 1-1000"},
		{"breaker: {failures: five}", "server.breaker.failures: want a whole number"},
		{"breaker: {cool_off: 9ms}", "server.breaker.cool_off: 9ms is outside 10ms-10m"},
		{"breaker: {cool_off: 11m}", "server.breaker.cool_off: 11m0s is outside 10ms-10m"},
		{"breaker: {cool_off: 1}", "server.breaker.cool_off: want a duration"},
		{"breaker: {count_late: yes}", "server.breaker.count_late: want true or false"},
		{"breaker: {failure: 3}", "server.breaker.failure: unknown field; did you mean failures?"},
		{"breaker: {cool_down: 1s}", "server.breaker.cool_down: unknown field (want one of failures, cool_off, count_late)"},
		{"breaker: 5", "server.breaker: want a mapping of the fields failures, cool_off, count_late"},
	} {
		file := "server:\n  " + c.lines + "\npolicies:\n  - {name: api, algorithm: fixed_window, limit: 10, window: 1s}\n"
		cfg, err := policy.Parse("breaker.yaml", []byte(file))
		if err == nil || cfg != nil {
			t.Errorf("%q: no error", c.lines)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want %q", c.lines, err, c.want)
		}
	}
}
