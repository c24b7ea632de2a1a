package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/benchrun"
	"github.com/admit-dev/admit/internal/redistest"
)

// TestServeUnderLoad runs admit serve in this process under admit bench's load for 10 s, so that
// go test's -cpuprofile and -memprofile profile the service (with the load client beside it; its
// stacks are apart, under internal/loadgen). Off unless ADMIT_SERVE_LOAD names the load: grpc
// (ShouldRateLimit, one descriptor over 10,000 values) or http (POST /v1/check, 10,000 keys), 64
// callers; on a harness-started redis-server, or on memory with ADMIT_SERVE_LOAD_BACKEND=memory:
//
//	ADMIT_SERVE_LOAD=grpc go test -run TestServeUnderLoad -v -cpuprofile cpu.prof ./cmd/admit
//	go tool pprof -top -cum -focus 'serveStreams' cmd/admit.test cpu.prof
//
// It fails if the service answers an error or decides nothing.
func TestServeUnderLoad(t *testing.T) {
	load := os.Getenv("ADMIT_SERVE_LOAD")
	if load == "" {
		t.Skip("ADMIT_SERVE_LOAD is not set: this is a load to profile, not a test of behaviour")
	}
	useSecret(t)
	dir := t.TempDir()
	envoy := "domain: bench\ndescriptors:\n  - key: key\n    rate_limit:\n      unit: second\n      requests_per_unit: 1000000000\n"
	policies := "policies:\n  - name: bench\n    algorithm: fixed_window\n    limit: 1000000000\n    window: 1s\n"
	if err := os.Mkdir(filepath.Join(dir, "envoy"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "envoy", "bench.yaml"), envoy)
	writeFile(t, filepath.Join(dir, "admit.yaml"), policies)
	args := []string{"--envoy-config", filepath.Join(dir, "envoy"), "--grpc-listen", "127.0.0.1:0", "--config", filepath.Join(dir, "admit.yaml")}
	if os.Getenv("ADMIT_SERVE_LOAD_BACKEND") != "memory" {
		args = append(args, "--redis", redistest.Start(t).URL())
	}
	base, logs, _ := serveInProcess(t, args...)
	logs.waitLine(t, "listening for gRPC")
	m := grpcListeningRE.FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no gRPC address in the log:\n%s", logs)
	}
	cfg := benchrun.Config{Concurrency: 64, Duration: 10 * time.Second, Timeout: 10 * time.Second, Keys: 10_000, KeyPrefix: "load-"}
	var target benchrun.Target
	switch load {
	case "http":
		cfg.Kind, cfg.Target, cfg.Policies = "http", base, []string{"bench"}
		target = benchrun.NewHTTP(cfg)
	case "grpc":
		cfg.Kind, cfg.Target, cfg.GRPCAddr, cfg.Domain = "grpc", m[1], m[1], "bench"
		cfg.Descriptor = []benchrun.Entry{{Key: "key", Value: benchrun.KeyPlaceholder}}
		var err error
		if target, err = benchrun.NewGRPC(cfg); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("ADMIT_SERVE_LOAD=%q: want grpc or http", load)
	}
	defer target.Close()
	r, err := benchrun.Run(context.Background(), cfg, target, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.0f decisions/s, p99 %.0f µs, %d errors %v", r.DecisionsPerSecond, r.LatencyUS.P99, r.Errors, r.ErrorKinds)
	if r.Errors > 0 || r.Allowed == 0 {
		t.Errorf("%d allowed, %d limited, %d errors %v: want every request allowed", r.Allowed, r.Limited, r.Errors, r.ErrorKinds)
	}
}
