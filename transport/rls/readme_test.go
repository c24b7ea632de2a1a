package rls_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/admit-dev/admit/policy/envoyconf"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// A readmeStep is one request of an example of envoyproxy/ratelimit's README, sent n times: every
// response must have the codes want (the overall code, then each descriptor's) and, per
// descriptor, the current_limit's requests_per_unit limit (-1: no current_limit).
type readmeStep struct {
	n     int
	ds    [][]string // each descriptor's key, value pairs
	want  []string
	limit []int
}

// runReadme sends steps to domain, request by request, through a gRPC server on cfg over memstore
// (whose clock stands still, so that a second's window does not end during the test).
func runReadme(t *testing.T, cfg *envoyconf.Config, domain string, steps []readmeStep) {
	t.Helper()
	c, _ := serveConfig(t, memStore(t), cfg)
	for i, s := range steps {
		ds := make([]*ratelimitv3.RateLimitDescriptor, len(s.ds))
		for j, kv := range s.ds {
			ds[j] = desc(kv...)
		}
		for k := range max(s.n, 1) {
			r := ask(t, c, domain, 0, ds...)
			step := fmt.Sprintf("%s: step %d (%v), request %d", domain, i+1, s.ds, k+1)
			wantCodes(t, step, r, s.want...)
			for j, st := range r.Statuses {
				got := -1
				if st.CurrentLimit != nil {
					got = int(st.CurrentLimit.RequestsPerUnit)
				}
				if got != s.limit[j] {
					t.Fatalf("%s: descriptor %d: current_limit %d, want %d", step, j+1, got, s.limit[j])
				}
			}
		}
	}
}

// Shorthands of the codes.
const (
	ok   = "OK"
	over = "OVER_LIMIT"
)

// TestReadmeExamples drives every example of envoyproxy/ratelimit's README
// (testdata/readme/example*.yaml) and checks the outcome the README describes, request by request.
func TestReadmeExamples(t *testing.T) {
	cfg := testConfig(t)
	t.Run("1 mongo_cps", func(t *testing.T) {
		// Two limits of one key and different values, each 500 a second.
		runReadme(t, cfg, "mongo_cps", []readmeStep{
			{500, [][]string{{"database", "users"}}, []string{ok, ok}, []int{500}},
			{1, [][]string{{"database", "users"}}, []string{over, over}, []int{500}},
			{500, [][]string{{"database", "default"}}, []string{ok, ok}, []int{500}},
			{1, [][]string{{"database", "default"}}, []string{over, over}, []int{500}},
			{1, [][]string{{"database", "other"}}, []string{ok, ok}, []int{-1}},
		})
	})
	t.Run("2 messaging", func(t *testing.T) {
		// 5 marketing messages a day to each number, and 100 messages a day to each number; one
		// request may carry both descriptors, and is over when either is (a logical OR).
		mk := func(n string) []string { return []string{"message_type", "marketing", "to_number", n} }
		to := func(n string) []string { return []string{"to_number", n} }
		runReadme(t, cfg, "messaging", []readmeStep{
			{5, [][]string{mk("2061111111"), to("2061111111")}, []string{ok, ok, ok}, []int{5, 100}},
			{1, [][]string{mk("2061111111"), to("2061111111")}, []string{over, over, ok}, []int{5, 100}},
			{5, [][]string{mk("2062222222")}, []string{ok, ok}, []int{5}},
			{1, [][]string{mk("2062222222")}, []string{over, over}, []int{5}},
			// 2061111111 has had 6 messages counted (the rejected marketing one is not, its
			// to_number one is): 94 more fit.
			{94, [][]string{to("2061111111")}, []string{ok, ok}, []int{100}},
			{1, [][]string{to("2061111111")}, []string{over, over}, []int{100}},
			{100, [][]string{to("2062222222")}, []string{ok, ok}, []int{100}},
			{1, [][]string{to("2062222222")}, []string{over, over}, []int{100}},
		})
	})
	t.Run("3 edge_proxy_per_ip", func(t *testing.T) {
		// 10 a second per IP; 50.0.0.5 matches its value before the key alone, and gets none.
		runReadme(t, cfg, "edge_proxy_per_ip", []readmeStep{
			{10, [][]string{{"remote_address", "50.0.0.1"}}, []string{ok, ok}, []int{10}},
			{1, [][]string{{"remote_address", "50.0.0.1"}}, []string{over, over}, []int{10}},
			{10, [][]string{{"remote_address", "50.0.0.2"}}, []string{ok, ok}, []int{10}},
			{1, [][]string{{"remote_address", "50.0.0.5"}}, []string{over, over}, []int{0}},
		})
	})
	t.Run("4 levels", func(t *testing.T) {
		// A descriptor of two entries matches the configuration of two levels…
		req := [][]string{{"key", "value", "subkey", "subvalue"}}
		runReadme(t, cfg, "example4", []readmeStep{
			{300, req, []string{ok, ok}, []int{300}},
			{1, req, []string{over, over}, []int{300}},
			{1, [][]string{{"key", "value"}}, []string{ok, ok}, []int{-1}},
		})
		// … and not the one of one level, though its first entry matches.
		first, err := envoyconf.Load("../../policy/envoyconf/testdata/readme4")
		if err != nil {
			t.Fatal(err)
		}
		runReadme(t, first, "example4", []readmeStep{
			{301, req, []string{ok, ok}, []int{-1}},
			{300, [][]string{{"key", "value"}}, []string{ok, ok}, []int{300}},
			{1, [][]string{{"key", "value"}}, []string{over, over}, []int{300}},
		})
	})
	t.Run("5 unlimited", func(t *testing.T) {
		// ldap is unlimited: OK, limit_remaining MaxUint32, no current_limit; azure 100 a minute.
		c, _ := serveConfig(t, memStore(t), cfg)
		for range 200 {
			r := ask(t, c, "internal", 0, desc("ldap", "x"))
			wantCodes(t, "ldap", r, ok, ok)
			if st := r.Statuses[0]; st.LimitRemaining != math.MaxUint32 || st.CurrentLimit != nil {
				t.Fatalf("ldap: %v; want limit_remaining %d and no current_limit", st, uint32(math.MaxUint32))
			}
		}
		runReadme(t, cfg, "internal", []readmeStep{
			{100, [][]string{{"azure", "x"}}, []string{ok, ok}, []int{100}},
			{1, [][]string{{"azure", "x"}}, []string{over, over}, []int{100}},
		})
	})
	t.Run("6 shadow_mode", func(t *testing.T) {
		// user-a of auth-service is never limited (shadow_mode, 10 a second); user-b is, at 20.
		a := [][]string{{"service", "auth-service", "user", "user-a"}}
		b := [][]string{{"service", "auth-service", "user", "user-b"}}
		runReadme(t, cfg, "example6", []readmeStep{
			{30, a, []string{ok, ok}, []int{10}},
			{20, b, []string{ok, ok}, []int{20}},
			{1, b, []string{over, over}, []int{20}},
		})
	})
	t.Run("7 replaces", func(t *testing.T) {
		// Both descriptors in one request: 10 a second, and the replaced 5-a-second limit is not
		// affected; (key_1, value_1), (user, bkthomps) alone: 5 a second.
		one := []string{"key_1", "value_1", "user", "bkthomps"}
		two := []string{"key_2", "value_2", "user", "bkthomps"}
		runReadme(t, cfg, "example7", []readmeStep{
			{10, [][]string{one, two}, []string{ok, ok, ok}, []int{-1, 10}},
			{1, [][]string{one, two}, []string{over, ok, over}, []int{-1, 10}},
			{5, [][]string{one}, []string{ok, ok}, []int{5}},
			{1, [][]string{one}, []string{over, over}, []int{5}},
		})
	})
	t.Run("8 detailed_metric", func(t *testing.T) {
		// Limits as usual: 10 a minute per unlisted value, 20 for value1.
		runReadme(t, cfg, "example8", []readmeStep{
			{10, [][]string{{"key1", "unspecified_value"}}, []string{ok, ok}, []int{10}},
			{1, [][]string{{"key1", "unspecified_value"}}, []string{over, over}, []int{10}},
			{10, [][]string{{"key1", "unspecified_value2"}}, []string{ok, ok}, []int{10}},
			{20, [][]string{{"key1", "value1"}}, []string{ok, ok}, []int{20}},
			{1, [][]string{{"key1", "value1"}}, []string{over, over}, []int{20}},
		})
	})
	t.Run("9 wildcard", func(t *testing.T) {
		// value* matches value1 and value2, each with its own 20 a minute; not other.
		runReadme(t, cfg, "example9", []readmeStep{
			{20, [][]string{{"key1", "value1"}}, []string{ok, ok}, []int{20}},
			{1, [][]string{{"key1", "value1"}}, []string{over, over}, []int{20}},
			{20, [][]string{{"key1", "value2"}}, []string{ok, ok}, []int{20}},
			{1, [][]string{{"key1", "other"}}, []string{ok, ok}, []int{-1}},
		})
	})
}
