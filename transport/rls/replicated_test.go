package rls_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/policy/envoyconf"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// paymentsConfig is a domain that is not atomic, of three replicated rules waiting up to TIMEOUT
// and an async one.
const paymentsConfig = `
domain: payments
descriptors:
  - key: card
    rate_limit: {unit: hour, requests_per_unit: 100, durability: replicated, durability_timeout: TIMEOUT}
  - key: merchant
    rate_limit: {unit: hour, requests_per_unit: 100, durability: replicated, durability_timeout: TIMEOUT}
  - key: account
    rate_limit: {unit: hour, requests_per_unit: 100, durability: replicated, durability_timeout: TIMEOUT}
  - key: api
    rate_limit: {unit: hour, requests_per_unit: 100}
`

// Issue 28 through Envoy's rate limit service: a request of three replicated descriptors in a
// domain that is not atomic (each decided on its own) waits once for its replicas: one WAIT on
// the primary, OK. With the replica stopped the whole request is UNAVAILABLE, after one WAIT, and
// a request of the async descriptor alone is OK, waiting for nothing.
func TestReplicatedDescriptorsWaitOnce(t *testing.T) {
	primary, replicas := redistest.StartReplicated(t, 1)
	store := redisStore(t, primary)
	serveTimeout := func(timeout string) rlsv3.RateLimitServiceClient {
		cfg, err := envoyconf.Parse(envoyconf.File{Name: "payments.yaml", Data: []byte(strings.ReplaceAll(paymentsConfig, "TIMEOUT", timeout))})
		if err != nil {
			t.Fatal(err)
		}
		c, _ := serveConfig(t, store, cfg)
		return c
	}
	// A patient timeout while the replica runs (on a loaded machine it may be slow to acknowledge),
	// a short one once it is stopped.
	patient, c := serveTimeout("10s"), serveTimeout("300ms")
	req := func(ds ...string) *rlsv3.RateLimitRequest {
		r := &rlsv3.RateLimitRequest{Domain: "payments"}
		for _, k := range ds {
			r.Descriptors = append(r.Descriptors, desc(k, "alice"))
		}
		return r
	}
	for i := range 3 {
		before := primary.CommandCalls(t, "wait")
		wantCodes(t, "three replicated descriptors", ask(t, patient, "payments", 0, req("card", "merchant", "account").Descriptors...), "OK", "OK", "OK", "OK")
		if got := primary.CommandCalls(t, "wait") - before; got != 1 {
			t.Errorf("request %d of three replicated descriptors: %d WAITs on the primary, want 1", i, got)
		}
	}

	replicas[0].Freeze(t)
	t.Cleanup(func() { replicas[0].Thaw(t) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := primary.CommandCalls(t, "wait")
	begin := time.Now()
	resp, err := c.ShouldRateLimit(ctx, req("card", "merchant", "account", "api"))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("three replicated descriptors and an async one, the replica stopped: %v, %v; want UNAVAILABLE", resp, err)
	}
	t.Logf("the replica stopped: UNAVAILABLE after %v (timeout 300ms): %v", time.Since(begin).Round(time.Millisecond), err)
	if got := primary.CommandCalls(t, "wait") - before; got != 1 {
		t.Errorf("the replica stopped: %d WAITs on the primary, want 1", got)
	}
	before = primary.CommandCalls(t, "wait")
	wantCodes(t, "the async descriptor, the replica stopped", ask(t, c, "payments", 0, desc("api", "alice")), "OK", "OK")
	if got := primary.CommandCalls(t, "wait") - before; got != 0 {
		t.Errorf("the async descriptor: %d WAITs, want 0", got)
	}
}
