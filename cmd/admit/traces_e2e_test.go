package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/redistest"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// collector is an OTLP/gRPC trace collector: it keeps every span it is sent, and the bytes of
// every export.
type collector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string // the service.name of each export's resources
	raw      [][]byte
}

// Export keeps req's spans and bytes.
func (c *collector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	b, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.raw = append(c.raw, b)
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				c.services = append(c.services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			c.spans = append(c.spans, ss.GetSpans()...)
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// startCollector starts a collector on a free loopback port, stopped at t's cleanup, and returns it
// and its address.
func startCollector(t *testing.T) (*collector, string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{}
	g := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(g, c)
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	return c, ln.Addr().String()
}

// A traceparent is the W3C trace context of a client's span.
type traceparent struct{ trace, span string }

// newTraceparent returns the trace context of a new sampled span, of ids made of b.
func newTraceparent(b byte) traceparent {
	return traceparent{strings.Repeat(hex.EncodeToString([]byte{b}), 16), strings.Repeat(hex.EncodeToString([]byte{b + 1}), 8)}
}

// header returns tp as a traceparent field.
func (tp traceparent) header() string { return "00-" + tp.trace + "-" + tp.span + "-01" }

// attrs returns the attributes of s as strings: a list's values joined by ",".
func attrs(s *tracepb.Span) map[string]string {
	out := make(map[string]string)
	for _, kv := range s.GetAttributes() {
		out[kv.GetKey()] = anyString(kv.GetValue())
	}
	return out
}

// anyString returns v as a string: a bool as true or false, an array's values joined by ",".
func anyString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		if x.BoolValue {
			return "true"
		}
		return "false"
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_ArrayValue:
		var vs []string
		for _, e := range x.ArrayValue.GetValues() {
			vs = append(vs, anyString(e))
		}
		return strings.Join(vs, ",")
	}
	return "?"
}

// TestE2ETraces runs admit serve on Redis with tracing on, pointed at a real OTLP/gRPC collector
// in the test, and makes decisions carrying a traceparent: JSON /v1/check (allowed, replayed,
// limited), forward-auth and Envoy's ShouldRateLimit. Each decision is one admit.decide span,
// child of the caller's span, with its attributes; its store call an admit.store span, child of
// it; and no subject, key or request ID is anywhere in what was exported.
func TestE2ETraces(t *testing.T) {
	redis := redistest.Start(t)
	col, addr := startCollector(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "admit.yaml")
	writeConfig(t, config, "policies:\n  - name: per-day\n    algorithm: fixed_window\n    limit: 1\n    window: 24h\n  - name: roomy\n    algorithm: gcra\n    limit: 1000\n    window: 24h\n")
	envoy := filepath.Join(dir, "envoy")
	if err := os.Mkdir(envoy, 0o700); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, filepath.Join(envoy, "config.yaml"), "domain: traced\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: day\n      requests_per_unit: 5\n      name: per-user\n")
	env := admitEnv(secretEnv+"="+testSecret, "REDIS_URL="+redis.URL(),
		"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://"+addr,
		"OTEL_SERVICE_NAME=admit-e2e", "OTEL_BSP_SCHEDULE_DELAY=200")
	env = withoutEnv(env, "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", "OTEL_RESOURCE_ATTRIBUTES")
	p := startAdmitEnv(t, env, "--config", config, "--envoy-config", envoy, "--grpc-listen", "127.0.0.1:0")
	p.logs.waitLine(t, "listening for gRPC")
	const subject, grpcSubject = "subject-never-exported-7f3a", "grpc-subject-never-exported-91c2"
	secrets := []string{subject, grpcSubject, "request-never-exported-1", "request-never-exported-2"}

	// The HTTP decisions, each with a traceparent of its own.
	type decision struct {
		name string
		tp   traceparent
		want map[string]string
	}
	var decisions []decision
	post := func(name string, tp traceparent, body string, want map[string]string) {
		t.Helper()
		req, err := http.NewRequest("POST", p.base+"/v1/check", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Traceparent", tp.header())
		do(t, req)
		decisions = append(decisions, decision{name, tp, want})
	}
	want := func(policies, algorithms, result, replayed string) map[string]string {
		return map[string]string{"admit.policies": policies, "admit.algorithms": algorithms, "admit.result": result,
			"admit.degraded": "false", "admit.replayed": replayed, "admit.backend": "redis"}
	}
	post("allowed", newTraceparent(0x10), `{"policies":["per-day","roomy"],"key":"`+subject+`","cost":1,"request_id":"`+secrets[2]+`"}`,
		want("per-day,roomy", "fixed_window,gcra", "allowed", "false"))
	post("replayed", newTraceparent(0x20), `{"policies":["per-day","roomy"],"key":"`+subject+`","cost":1,"request_id":"`+secrets[2]+`"}`,
		want("per-day,roomy", "fixed_window,gcra", "allowed", "true"))
	post("limited", newTraceparent(0x30), `{"policy":"per-day","key":"`+subject+`","cost":1,"request_id":"`+secrets[3]+`"}`,
		want("per-day", "fixed_window", "limited", "false"))
	fwd := newTraceparent(0x40)
	req, err := http.NewRequest("GET", p.base+"/v1/check", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Traceparent", fwd.header())
	req.Header.Set("X-Admit-Policy", "roomy")
	req.Header.Set("X-Admit-Key", subject)
	do(t, req)
	decisions = append(decisions, decision{"forward-auth", fwd, want("roomy", "gcra", "allowed", "false")})

	// Envoy's, with the traceparent in the gRPC metadata.
	m := grpcListeningRE.FindStringSubmatch(p.logs.String())
	if m == nil {
		t.Fatalf("no gRPC address in the log:\n%s", p.logs)
	}
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rpc := newTraceparent(0x50)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(metadata.AppendToOutgoingContext(ctx, "traceparent", rpc.header()),
		&rlsv3.RateLimitRequest{Domain: "traced", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: grpcSubject}},
		}}})
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("ShouldRateLimit: %v, %v; want OK", resp, err)
	}
	decisions = append(decisions, decision{"envoy", rpc, nil})

	// Exported at the latest as admit stops.
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if !slices.Contains(col.services, "admit-e2e") {
		t.Errorf("service.name of the exports %q; want admit-e2e (OTEL_SERVICE_NAME)", col.services)
	}
	for _, d := range decisions {
		var decide, store []*tracepb.Span
		for _, s := range col.spans {
			if hex.EncodeToString(s.GetTraceId()) != d.tp.trace {
				continue
			}
			switch s.GetName() {
			case "admit.decide":
				decide = append(decide, s)
			case "admit.store":
				store = append(store, s)
			default:
				t.Errorf("%s: a span %q", d.name, s.GetName())
			}
		}
		if len(decide) != 1 || len(store) != 1 {
			t.Errorf("%s: %d admit.decide and %d admit.store spans in its trace; want 1 of each", d.name, len(decide), len(store))
			continue
		}
		if got := hex.EncodeToString(decide[0].GetParentSpanId()); got != d.tp.span {
			t.Errorf("%s: admit.decide's parent %s; want the caller's span %s", d.name, got, d.tp.span)
		}
		if !bytes.Equal(store[0].GetParentSpanId(), decide[0].GetSpanId()) {
			t.Errorf("%s: admit.store's parent %x; want admit.decide %x", d.name, store[0].GetParentSpanId(), decide[0].GetSpanId())
		}
		got := attrs(decide[0])
		if d.want == nil { // Envoy's: its rule's name, decided separately
			d.want = want("per-user", "fixed_window", "allowed", "false")
			d.want["admit.grouping"] = "separately"
		}
		for k, v := range d.want {
			if got[k] != v {
				t.Errorf("%s: %s = %q; want %q (all: %v)", d.name, k, got[k], v, got)
			}
		}
		if sa := attrs(store[0]); sa["admit.backend"] != "redis" || sa["admit.requests"] == "" {
			t.Errorf("%s: admit.store's attributes %v; want admit.backend redis and admit.requests", d.name, sa)
		}
	}
	all := bytes.Join(col.raw, nil)
	if len(all) == 0 {
		t.Fatal("nothing exported")
	}
	for _, s := range secrets {
		if bytes.Contains(all, []byte(s)) {
			t.Errorf("%q is in the exported spans", s)
		}
	}
	for _, key := range keysOf(t, redis) {
		if bytes.Contains(all, []byte(key)) || bytes.Contains(all, []byte(digestOf(key))) {
			t.Errorf("the key %q (or its digest) is in the exported spans", key)
		}
	}
}

// do sends req and fails t unless it is answered.
func do(t *testing.T, req *http.Request) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("%s %s: %d", req.Method, req.URL, resp.StatusCode)
	}
}

// keysOf returns the keys of s under rl:, at least one.
func keysOf(t *testing.T, s *redistest.Server) []string {
	t.Helper()
	out, err := s.Do(t, "KEYS", "rl:*").AsStrSlice()
	if err != nil || len(out) == 0 {
		t.Fatalf("KEYS rl:*: %q, %v; want some", out, err)
	}
	return out
}

// digestOf returns the digest of key: what its braces hold.
func digestOf(key string) string {
	i, j := strings.IndexByte(key, '{'), strings.IndexByte(key, '}')
	if i < 0 || j < i {
		return key
	}
	return key[i+1 : j]
}

// TestE2ETracesBadEnvironment checks that admit serve refuses to start, exit 2, with a wrong OTel
// variable, and says which.
func TestE2ETracesBadEnvironment(t *testing.T) {
	for _, bad := range []string{"OTEL_TRACES_EXPORTER=zipkin", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_TRACES_SAMPLER=often"} {
		cmd := exec.Command(admitBinary(t), "serve", "--listen", "127.0.0.1:0")
		cmd.Env = append(withoutEnv(admitEnv(), "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED"), "OTEL_TRACES_EXPORTER=otlp", bad)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != exitUsage {
			t.Errorf("%s: %v; want exit %d\n%s", bad, err, exitUsage, out)
		}
		name, _, _ := strings.Cut(bad, "=")
		if !bytes.Contains(out, []byte("cannot start tracing")) || !bytes.Contains(out, []byte(name)) {
			t.Errorf("%s: the log does not say which variable is wrong:\n%s", bad, out)
		}
	}
}

// TestE2ETracesProxy runs admit proxy in memory with tracing on by an endpoint alone
// (OTEL_EXPORTER_OTLP_ENDPOINT, no OTEL_TRACES_EXPORTER): a routed request's decision span is the
// child of its traceparent's span, and the app receives the traceparent unchanged.
func TestE2ETracesProxy(t *testing.T) {
	col, addr := startCollector(t)
	seen := make(chan string, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Traceparent")
	}))
	defer upstream.Close()
	config := filepath.Join(t.TempDir(), "proxy.yaml")
	writeConfig(t, config, proxyConfig)
	env := withoutEnv(admitEnv(secretEnv+"="+testSecret), "OTEL_SDK_DISABLED", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+addr)
	p := startCommand(t, env, "proxy", "--upstream", upstream.URL, "--config", config)
	tp := newTraceparent(0x60)
	req, err := http.NewRequest("GET", p.base+"/api/items", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Traceparent", tp.header())
	do(t, req)
	if got := <-seen; got != tp.header() {
		t.Errorf("the app received traceparent %q; want the client's %q", got, tp.header())
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	var found bool
	for _, s := range col.spans {
		if s.GetName() != "admit.decide" || hex.EncodeToString(s.GetTraceId()) != tp.trace {
			continue
		}
		found = true
		a := attrs(s)
		if hex.EncodeToString(s.GetParentSpanId()) != tp.span || a["admit.policies"] != "api" || a["admit.backend"] != "memory" || a["admit.result"] != "allowed" {
			t.Errorf("the proxy's decision span: parent %x, %v; want parent %s, api, memory, allowed", s.GetParentSpanId(), a, tp.span)
		}
	}
	if !found {
		t.Errorf("no admit.decide span in the trace of the request among %d spans", len(col.spans))
	}
}
