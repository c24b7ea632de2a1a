package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/benchrun"
	"github.com/admit-dev/admit/internal/redistest"
)

// benchConfig50 is the policy of the bench tests: 50 a key per hour, so a run of a second on one
// hot key is allowed exactly 50.
const benchConfig50 = `
policies:
  - name: fifty
    algorithm: fixed_window
    limit: 50
    window: 1h
`

// runBench runs admit bench in this process with args and --json, and returns its exit code, its
// report (if any) and its stderr.
func runBench(t *testing.T, args ...string) (int, *benchrun.Report, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), append([]string{"bench", "--json"}, args...), &stdout, &stderr)
	if stdout.Len() == 0 {
		return code, nil, stderr.String()
	}
	var r benchrun.Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("admit bench %q: the report is not JSON: %v\n%s", args, err, stdout.String())
	}
	return code, &r, stderr.String()
}

// runBenchBinary runs the admit binary's bench with args and --json, and returns the same.
func runBenchBinary(t *testing.T, args ...string) (int, *benchrun.Report, string) {
	t.Helper()
	cmd := exec.Command(admitBinary(t), append([]string{"bench", "--json"}, args...)...)
	cmd.Env = admitEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	if stdout.Len() == 0 {
		return code, nil, stderr.String()
	}
	var r benchrun.Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("admit bench %q: the report is not JSON: %v\n%s", args, err, stdout.String())
	}
	return code, &r, stderr.String()
}

// checkCounts checks that the report of a run of admit bench adds up, with no errors, and, on a hot
// key under a limit that does not refill during the run, that exactly the limit was allowed — or
// every request, if fewer were made — and every other request limited.
func checkCounts(t *testing.T, r *benchrun.Report, limit int) {
	t.Helper()
	t.Logf("%s", r.Text())
	if r.Allowed+r.Limited+r.Errors+r.Dropped != r.Scheduled {
		t.Errorf("allowed %d + limited %d + errors %d + dropped %d != scheduled %d", r.Allowed, r.Limited, r.Errors, r.Dropped, r.Scheduled)
	}
	if r.Errors != 0 || r.Dropped != 0 {
		t.Errorf("errors %v, %d dropped; want none", r.ErrorKinds, r.Dropped)
	}
	if want := min(limit, r.Scheduled); r.Allowed != want || r.Limited != r.Scheduled-want {
		t.Errorf("allowed %d, limited %d of %d; want the policy's limit, %d, allowed and the rest limited", r.Allowed, r.Limited, r.Scheduled, limit)
	}
	if r.Scheduled == 0 || r.DecisionsPerSecond <= 0 || r.LatencyUS.Max <= 0 || r.LatencyUS.P50 > r.LatencyUS.P99 || r.LatencyUS.P99 > r.LatencyUS.Max {
		t.Errorf("%d scheduled, decisions/s %v, latency %+v: want requests, a rate and ordered quantiles", r.Scheduled, r.DecisionsPerSecond, r.LatencyUS)
	}
}

// benchLoads are the two loops each target is driven with: the open loop schedules exactly
// rate × duration requests, 150 — over the limit of 50, whatever the machine's speed.
var benchLoads = []struct {
	name      string
	args      []string
	scheduled int // 0: any
}{
	{"open", []string{"--rate", "300/s", "--duration", "500ms"}, 150},
	{"closed", []string{"--concurrency", "8", "--duration", "500ms"}, 0},
}

// TestBenchStore runs admit bench on the in-memory store and on a real Redis, directly: the counts
// add up, and a hot key is allowed exactly its limit over the one window of the run.
func TestBenchStore(t *testing.T) {
	config := filepath.Join(t.TempDir(), "admit.yaml")
	writeConfig(t, config, benchConfig50)
	srv := redistest.Start(t)
	for _, target := range []string{"memory", srv.URL()} {
		for _, load := range benchLoads {
			t.Run(load.name+"/"+strings.SplitN(target, ":", 2)[0], func(t *testing.T) {
				code, r, stderr := runBench(t, append([]string{"--target", target, "--config", config, "--policy", "fifty", "--hot-key"}, load.args...)...)
				if code != 0 || r == nil {
					t.Fatalf("exit %d, stderr %q; want 0 and a report", code, stderr)
				}
				checkCounts(t, r, 50)
				if load.scheduled != 0 && r.Scheduled != load.scheduled {
					t.Errorf("scheduled %d; want %d", r.Scheduled, load.scheduled)
				}
			})
		}
	}
	// Many keys: 20 keys of 50 over 150 requests are never limited.
	code, r, stderr := runBench(t, "--redis", srv.URL(), "--config", config, "--policy", "fifty", "--keys", "20", "--rate", "300", "--duration", "500ms")
	if code != 0 || r == nil || r.Allowed != 150 || r.Keys != 20 || r.Mode != "open" {
		t.Fatalf("many keys: exit %d, report %+v, stderr %q; want 150 allowed on 20 keys", code, r, stderr)
	}
}

// TestE2EBenchHTTP runs the admit binary's bench against admit serve's POST /v1/check, in memory
// and on Redis.
func TestE2EBenchHTTP(t *testing.T) {
	config := filepath.Join(t.TempDir(), "admit.yaml")
	writeConfig(t, config, benchConfig50)
	srv := redistest.Start(t)
	for _, backend := range []string{"memory", "redis"} {
		args := []string{"--config", config}
		if backend == "redis" {
			args = append(args, "--redis", srv.URL())
		}
		p := startAdmit(t, args...)
		for _, load := range benchLoads {
			t.Run(backend+"/"+load.name, func(t *testing.T) {
				code, r, stderr := runBenchBinary(t, append([]string{"--target", p.base, "--policy", "fifty", "--hot-key"}, load.args...)...)
				if code != 0 || r == nil {
					t.Fatalf("exit %d, stderr %q; want 0 and a report", code, stderr)
				}
				checkCounts(t, r, 50)
				if load.scheduled != 0 && r.Scheduled != load.scheduled {
					t.Errorf("scheduled %d; want %d", r.Scheduled, load.scheduled)
				}
				// Mostly rejections: the report says what it measured. On Redis, the service's
				// over-limit cache answered some of them, and the report counts those.
				switch {
				case backend == "redis" && (r.CacheHits == nil || *r.CacheHits == 0 || *r.CacheHits > uint64(r.Limited)):
					t.Errorf("cache_hits %v of %d limited; want some, read from the service's /metrics", r.CacheHits, r.Limited)
				case backend == "memory" && r.CacheHits != nil:
					t.Errorf("cache_hits %d; want none: in memory admit serve has no over-limit cache", *r.CacheHits)
				case r.Limited > r.Allowed && !strings.Contains(r.Note, "rejections"):
					t.Errorf("note %q; want one that says most decisions were rejections", r.Note)
				}
			})
		}
		// A policy the service does not know is a bad command line, found by the probe.
		if code, _, stderr := runBenchBinary(t, "--target", p.base, "--policy", "nope", "--duration", "1s"); code != exitUsage || !strings.Contains(stderr, `unknown policy \"nope\"`) && !strings.Contains(stderr, `unknown policy "nope"`) {
			t.Errorf("unknown policy: exit %d, stderr %q; want 2 and the service's reason", code, stderr)
		}
	}
}

// TestE2EBenchGRPC runs admit bench against admit serve's Envoy rate limit service, in memory and
// on Redis.
func TestE2EBenchGRPC(t *testing.T) {
	dir := t.TempDir()
	yaml := "domain: bench\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: hour\n      requests_per_unit: 50\n"
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t)
	for _, backend := range []string{"memory", "redis"} {
		args := []string{"--envoy-config", dir, "--grpc-listen", "127.0.0.1:0"}
		if backend == "redis" {
			args = append(args, "--redis", srv.URL())
		}
		p := startAdmit(t, args...)
		p.logs.waitLine(t, "listening for gRPC")
		m := grpcListeningRE.FindStringSubmatch(p.logs.String())
		if m == nil {
			t.Fatalf("no gRPC address in the log:\n%s", p.logs)
		}
		target := "grpc://" + m[1]
		for _, load := range benchLoads {
			t.Run(backend+"/"+load.name, func(t *testing.T) {
				code, r, stderr := runBenchBinary(t, append([]string{"--target", target, "--domain", "bench", "--descriptor", "user={key}", "--hot-key"}, load.args...)...)
				if code != 0 || r == nil {
					t.Fatalf("exit %d, stderr %q; want 0 and a report", code, stderr)
				}
				checkCounts(t, r, 50)
				if load.scheduled != 0 && r.Scheduled != load.scheduled {
					t.Errorf("scheduled %d; want %d", r.Scheduled, load.scheduled)
				}
			})
		}
		code, r, stderr := runBench(t, "--target", target, "--domain", "bench", "--descriptor", "user={key}", "--keys", "30", "--rate", "300", "--duration", "500ms")
		if code != 0 || r == nil || r.Allowed != 150 {
			t.Errorf("many keys: exit %d, report %+v, stderr %q; want 150 allowed", code, r, stderr)
		}
	}
}

// TestBenchInterrupted: a run stopped by its context (SIGINT, SIGTERM) reports the part that ran,
// its counts adding up, and exits 1.
func TestBenchInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"bench", "--json", "--target", "memory", "--rate", "200", "--duration", "1h"}, &stdout, &stderr)
	var r benchrun.Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("exit %d, stderr %q: the report is not JSON: %v", code, stderr.String(), err)
	}
	if code != benchInterrupted || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("exit %d, stderr %q; want %d, interrupted", code, stderr.String(), benchInterrupted)
	}
	if r.Scheduled == 0 || r.Allowed+r.Limited+r.Errors+r.Dropped != r.Scheduled {
		t.Errorf("report %+v: want the requests of the part that ran, adding up", r)
	}
}

// TestBenchUnreachable: a target that does not answer is exit 3, with no report.
func TestBenchUnreachable(t *testing.T) {
	addr := redistest.ClosedPort(t)
	for _, target := range []string{"http://" + addr, "grpc://" + addr, "grpc://" + addr + "/", "redis://" + addr} {
		args := []string{"--target", target, "--duration", "1s", "--timeout", "2s"}
		if strings.HasPrefix(target, "grpc") {
			args = append(args, "--domain", "d", "--descriptor", "k={key}")
		}
		code, r, stderr := runBench(t, args...)
		if code != benchUnreachable || r != nil || !strings.Contains(stderr, "unreachable") {
			t.Errorf("%s: exit %d, report %v, stderr %q; want 3, no report, unreachable", target, code, r, stderr)
		}
	}
}

// TestBenchBadFlags: every bad command line is exit 2, with a message that says what is wrong,
// before any load.
func TestBenchBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rate", "10", "--concurrency", "2"}, "exclude each other"},
		{[]string{"--rate", "fast"}, `--rate "fast"`},
		{[]string{"--rate", "0"}, `--rate "0"`},
		{[]string{"--rate", "-5/s"}, `--rate "-5/s"`},
		{[]string{"--concurrency", "0"}, "--concurrency 0"},
		{[]string{"--concurrency", "4", "--max-outstanding", "10"}, "--max-outstanding bounds an open loop"},
		{[]string{"--duration", "0s"}, "--duration 0s"},
		{[]string{"--duration", "soon"}, "invalid value"},
		{[]string{"--timeout", "-1s"}, "--timeout -1s"},
		{[]string{"--keys", "0"}, "--keys 0"},
		{[]string{"--keys", "5", "--hot-key"}, "--keys N and --hot-key exclude each other"},
		{[]string{"--target", "ftp://x"}, "want http://HOST:PORT"},
		{[]string{"--target", "127.0.0.1:8080"}, `--target "127.0.0.1:8080": want http://HOST:PORT`},
		{[]string{"--target", "redis://:hunter2@127.0.0.1:1", "--redis", "redis://127.0.0.1:1"}, "give one of them"},
		{[]string{"--target", "http://127.0.0.1:1", "--config", "x.yaml"}, "--config is for a store target"},
		{[]string{"--domain", "d"}, "--domain and --descriptor are for a grpc:// target"},
		{[]string{"--target", "grpc://127.0.0.1:1"}, "needs --domain D and --descriptor"},
		{[]string{"--target", "grpc://127.0.0.1:1", "--domain", "d", "--descriptor", "user"}, "want KEY=VALUE entries"},
		{[]string{"--target", "grpc://127.0.0.1:1", "--domain", "d", "--descriptor", "user=alice"}, "has no {key}"},
		{[]string{"--target", "grpc://127.0.0.1:1", "--domain", "d", "--descriptor", "u={key}", "--policy", "p"}, "--policy and --config are for"},
		{[]string{"--target", "memory", "--config", "/nonexistent/admit.yaml"}, "admit.yaml"},
		{[]string{"--target", "memory", "--policy", "nope"}, `unknown policy "nope"`},
		{[]string{"--target", "memory", "--client-token-file", "/nonexistent/token"}, "--client-token-file is for an http or grpc target"},
		{[]string{"--client-token-file", "/nonexistent/token"}, "--client-token-file: open /nonexistent/token"},
		{[]string{"--ca-file", "/nonexistent/ca.crt"}, "--ca-file, --cert-file and --key-file are for an https:// or grpcs:// target"},
		{[]string{"--target", "https://127.0.0.1:1", "--cert-file", "/nonexistent/c.crt"}, "--cert-file and --key-file go together"},
		{[]string{"--target", "https://127.0.0.1:1", "--ca-file", "/nonexistent/ca.crt"}, "--ca-file: open /nonexistent/ca.crt"},
		{[]string{"--target", "grpcs://127.0.0.1:1/x", "--domain", "d", "--descriptor", "u={key}"}, "want grpcs://HOST:PORT"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--bogus"}, "flag provided but not defined"},
	} {
		code, r, stderr := runBench(t, tc.args...)
		if code != exitUsage || r != nil || !strings.Contains(stderr, tc.want) {
			t.Errorf("admit bench %q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
		if strings.Contains(stderr, "hunter2") {
			t.Errorf("admit bench %q: stderr shows the password: %q", tc.args, stderr)
		}
	}
	var stdout bytes.Buffer
	if code := run(context.Background(), []string{"help", "bench"}, &stdout, &bytes.Buffer{}); code != exitOK || !strings.Contains(stdout.String(), "--concurrency N is a closed loop") {
		t.Errorf("admit help bench: exit %d, %q", code, stdout.String())
	}
}

// TestBenchTargetKind checks which kind of target each --target names.
func TestBenchTargetKind(t *testing.T) {
	for target, want := range map[string]string{
		"memory": "memory", "http://127.0.0.1:8080": "http", "https://admit.internal": "http",
		"grpc://127.0.0.1:8081": "grpc", "grpc://127.0.0.1:8081/": "grpc", "grpcs://admit.internal:8081": "grpc", "redis://127.0.0.1:6379/0": "redis",
		"rediss://:pw@redis.internal:6380": "redis", "unix:///run/redis.sock": "redis",
	} {
		if got, err := targetKind(target); got != want || err != nil {
			t.Errorf("targetKind(%q) = %q, %v; want %q", target, got, err, want)
		}
	}
	for _, target := range []string{"", "127.0.0.1:8080", "http://", "grpc://127.0.0.1:8081/v1", "mem", "ftp://x"} {
		if got, err := targetKind(target); err == nil {
			t.Errorf("targetKind(%q) = %q, nil; want an error", target, got)
		}
	}
}

// TestBenchDefaultPolicyAdmits: a store target's default run, without --config or --policy,
// measures decisions that admit (the built-in policy bench), not the rejections of a full key.
func TestBenchDefaultPolicyAdmits(t *testing.T) {
	srv := redistest.Start(t)
	for _, target := range []string{"memory", srv.URL()} {
		code, r, stderr := runBench(t, "--target", target, "--rate", "300", "--duration", "500ms", "--keys", "3")
		if code != 0 || r == nil {
			t.Fatalf("%s: exit %d, stderr %q; want 0 and a report", target, code, stderr)
		}
		t.Logf("%s", r.Text())
		if r.Scheduled != 150 || r.Allowed != r.Scheduled || r.Limited != 0 {
			t.Errorf("%s: policies %q, %d scheduled, %d allowed, %d limited; want the 150 scheduled allowed",
				target, r.Policies, r.Scheduled, r.Allowed, r.Limited)
		}
	}
}
