package rls_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/loadgen"
	"github.com/admit-dev/admit/internal/redistest"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/status"
)

// TestLoad measures ShouldRateLimit at fixed arrival rates, open-loop (internal/loadgen), with a
// real gRPC client over TCP to a Server on a redisstore on a redis-server of this machine. It runs
// only when ADMIT_RLS_LOAD is set: to a comma-separated list of rates (requests per second), or
// "1" for 1000,5000,10000,20000. ADMIT_RLS_LOAD_DURATION sets each rate's duration (default 10s).
//
// Each request is edge_proxy_per_ip's descriptor (remote_address, one of 10,000 addresses, 10 a
// second each) and, every other request, messaging's two descriptors (to one of 10,000 numbers):
// one script per descriptor's slot.
//
//	ADMIT_RLS_LOAD=1 go test -run TestLoad -v -timeout 10m ./transport/rls
func TestLoad(t *testing.T) {
	spec := os.Getenv("ADMIT_RLS_LOAD")
	if spec == "" {
		t.Skip("set ADMIT_RLS_LOAD to run (see the doc comment)")
	}
	if !redistest.Available() {
		t.Skip("redis-server not installed")
	}
	if spec == "1" {
		spec = "1000,5000,10000,20000"
	}
	dur := 10 * time.Second
	if d := os.Getenv("ADMIT_RLS_LOAD_DURATION"); d != "" {
		var err error
		if dur, err = time.ParseDuration(d); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := serve(t, redisStore(t, redistest.Start(t)))
	do := func(ctx context.Context) string {
		n := rand.IntN(10000)
		req := &rlsv3.RateLimitRequest{Domain: "edge_proxy_per_ip",
			Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("remote_address", fmt.Sprintf("10.0.%d.%d", n/256, n%256))}}
		if n%2 == 0 {
			num := fmt.Sprintf("206%07d", n)
			req = &rlsv3.RateLimitRequest{Domain: "messaging", Descriptors: []*ratelimitv3.RateLimitDescriptor{
				desc("message_type", "marketing", "to_number", num), desc("to_number", num)}}
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		resp, err := c.ShouldRateLimit(ctx, req)
		if err != nil {
			return "error: " + status.Code(err).String()
		}
		return resp.OverallCode.String()
	}
	// Warm up: connections, scripts loaded.
	if _, err := loadgen.Run(context.Background(), loadgen.Config{Rate: 1000, Duration: time.Second}, do); err != nil {
		t.Fatal(err)
	}
	for _, r := range strings.Split(spec, ",") {
		rate, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
		if err != nil {
			t.Fatal(err)
		}
		res, err := loadgen.Run(context.Background(), loadgen.Config{Rate: rate, Duration: dur}, do)
		if err != nil {
			t.Fatal(err)
		}
		s := &res.Total
		errs := 0 // loadgen's Stats.Errors counts what is not an HTTP status: count the gRPC errors here
		for o, n := range s.Outcomes {
			if strings.HasPrefix(o, "error: ") {
				errs += n
			}
		}
		decided := s.Scheduled - s.Dropped - errs
		h := &s.Latency
		t.Logf("rate=%.0f/s: decisions/s=%.0f scheduled=%d dropped=%d errors=%d outcomes=%v p50=%v p99=%v p99.9=%v max=%v",
			rate, float64(decided)/dur.Seconds(), s.Scheduled, s.Dropped, errs, s.Outcomes,
			h.Quantile(0.5), h.Quantile(0.99), h.Quantile(0.999), h.Max())
	}
}
