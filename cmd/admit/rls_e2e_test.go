package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// grpcListeningRE finds the address of the gRPC server in admit serve's text log.
var grpcListeningRE = regexp.MustCompile(`msg="listening for gRPC" addr=(\S+)`)

// TestE2EEnvoyRLS runs admit serve --envoy-config with a real gRPC client: a limit, a reload of the
// directory, and a graceful exit on SIGTERM.
func TestE2EEnvoyRLS(t *testing.T) {
	dir := t.TempDir()
	writeEnvoy := func(limit string) {
		t.Helper()
		yaml := "domain: mongo_cps\ndescriptors:\n  - key: database\n    value: users\n    rate_limit:\n      unit: day\n      requests_per_unit: " + limit + "\n"
		if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeEnvoy("2")
	p := startAdmit(t, "--envoy-config", dir, "--grpc-listen", "127.0.0.1:0")
	p.logs.waitLine(t, "listening for gRPC")
	m := grpcListeningRE.FindStringSubmatch(p.logs.String())
	if m == nil {
		t.Fatalf("no gRPC address in the log:\n%s", p.logs)
	}
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := rlsv3.NewRateLimitServiceClient(conn)
	ask := func() rlsv3.RateLimitResponse_Code {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "mongo_cps", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "database", Value: "users"}},
		}}})
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v", err)
		}
		return resp.OverallCode
	}
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		if got := ask(); got != want {
			t.Fatalf("request %d: %v, want %v", i, got, want)
		}
	}
	writeEnvoy("3") // a change of the rate keeps the counters: one more fits
	p.logs.waitLine(t, "Envoy rate limit configuration reloaded")
	if got := ask(); got != rlsv3.RateLimitResponse_OK {
		t.Fatalf("after the reload: %v, want OK", got)
	}
	if got := ask(); got != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("after the reload, 4th: %v, want OVER_LIMIT", got)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
}

// TestGRPCListenNeedsEnvoyConfig checks that --grpc-listen alone is a usage error.
func TestGRPCListenNeedsEnvoyConfig(t *testing.T) {
	if _, code, done := parseServe([]string{"--grpc-listen", "127.0.0.1:9999"}, io.Discard, io.Discard); !done || code != exitUsage {
		t.Errorf("parseServe(--grpc-listen alone) = %d, %v; want exit %d", code, done, exitUsage)
	}
}

// TestEnvoyFlagsNeedEnvoyConfig checks that the --envoy-* settings alone are a usage error.
func TestEnvoyFlagsNeedEnvoyConfig(t *testing.T) {
	for _, f := range [][]string{{"--envoy-merge-domains"}, {"--envoy-increment-over-limit"}, {"--envoy-dynamic-metadata"}, {"--envoy-metrics"}, {"--metrics-mode", "envoy_compat"}} {
		if _, code, done := parseServe(f, io.Discard, io.Discard); !done || code != exitUsage {
			t.Errorf("parseServe(%s alone) = %d, %v; want exit %d", f, code, done, exitUsage)
		}
	}
}

// TestMetricsMode: --metrics-mode envoy_compat, the pinned name, is --envoy-metrics;
// admit, the default, is neither; another value, or both flags, is a usage error naming them.
func TestMetricsMode(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--metrics-mode", "admit"}, false},
		{[]string{"--metrics-mode", "envoy_compat"}, true},
		{[]string{"--metrics-mode=envoy_compat"}, true},
		{[]string{"--envoy-metrics"}, true},
	} {
		cfg, code, done := parseServe(append([]string{"--envoy-config", dir}, tc.args...), io.Discard, io.Discard)
		if done || cfg.envoy.metrics != tc.want {
			t.Errorf("%q: exit %d (%v), envoy metrics %v; want %v", tc.args, code, done, cfg.envoy.metrics, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--metrics-mode", "envoy"}, "want admit or envoy_compat"},
		{[]string{"--metrics-mode", "envoy_compat", "--envoy-metrics"}, "--envoy-metrics is --metrics-mode envoy_compat"},
		{[]string{"--envoy-metrics", "--metrics-mode", "admit"}, "--envoy-metrics is --metrics-mode envoy_compat"},
	} {
		var stderr strings.Builder
		if _, code, done := parseServe(append([]string{"--envoy-config", dir}, tc.args...), io.Discard, &stderr); !done || code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d (%v), %q; want %d with %q", tc.args, code, done, stderr.String(), exitUsage, tc.want)
		}
	}
	// Under --envoy-env, USE_PROMETHEUS=true is envoy_compat, unless --metrics-mode says otherwise.
	t.Setenv("USE_PROMETHEUS", "true")
	t.Setenv("REDIS_URL", "127.0.0.1:6379")
	t.Setenv("REDIS_SOCKET_TYPE", "tcp")
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"--metrics-mode", "admit"}, false},
	} {
		cfg, code, done := parseServe(append([]string{"--envoy-env", "--envoy-config", dir}, tc.args...), io.Discard, io.Discard)
		if done || cfg.envoy.metrics != tc.want {
			t.Errorf("--envoy-env, USE_PROMETHEUS=true, %q: exit %d (%v), envoy metrics %v; want %v", tc.args, code, done, cfg.envoy.metrics, tc.want)
		}
	}
}

// TestE2EEnvoySettings runs admit serve with envoyproxy/ratelimit's settings: two files of one
// domain, one in a subdirectory, refused at start without --envoy-merge-domains and merged with
// it; with --envoy-dynamic-metadata a quota_mode descriptor over its limit is OK and reported;
// with --envoy-increment-over-limit a rejected hit fills the window.
func TestE2EEnvoySettings(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "team"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, yaml := range map[string]string{
		"a.yaml":      "domain: api\ndescriptors:\n  - key: quota\n    quota_mode: true\n    rate_limit: {unit: day, requests_per_unit: 1}\n",
		"team/b.yaml": "domain: api\ndescriptors:\n  - key: client\n    rate_limit: {unit: day, requests_per_unit: 3}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	useSecret(t)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"serve", "--envoy-config", dir, "--grpc-listen", "127.0.0.1:0", "--listen", "127.0.0.1:0"}, &stdout, &stderr); code != exitUsage {
		t.Fatalf("two files of one domain without --envoy-merge-domains: exit %d, want %d\n%s", code, exitUsage, stderr.String())
	}
	if !regexp.MustCompile(`configured in \S+a\.yaml too`).MatchString(stderr.String()) {
		t.Errorf("the error does not name the other file:\n%s", stderr.String())
	}
	p := startAdmit(t, "--envoy-config", dir, "--grpc-listen", "127.0.0.1:0", "--envoy-merge-domains", "--envoy-dynamic-metadata", "--envoy-increment-over-limit")
	p.logs.waitLine(t, "listening for gRPC")
	m := grpcListeningRE.FindStringSubmatch(p.logs.String())
	if m == nil {
		t.Fatalf("no gRPC address in the log:\n%s", p.logs)
	}
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := rlsv3.NewRateLimitServiceClient(conn)
	ask := func(key string, hits uint32) *rlsv3.RateLimitResponse {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "api", HitsAddend: hits, Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: "x"}},
		}}})
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v", err)
		}
		return resp
	}
	ask("quota", 1)
	r := ask("quota", 1)
	if r.OverallCode != rlsv3.RateLimitResponse_OK || r.DynamicMetadata.GetFields()["quotaModeViolations"] == nil {
		t.Errorf("quota mode over: %v, metadata %v; want OK with quotaModeViolations", r.OverallCode, r.DynamicMetadata)
	}
	ask("client", 2) // 2 of 3
	if r := ask("client", 2); r.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("2 more of 3: %v", r.OverallCode)
	}
	if r := ask("client", 1); r.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Errorf("after a rejection counted: %v, want OVER_LIMIT", r.OverallCode)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
}
