package rlqs_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/transport/rlqs"
)

const inputConfig = `policies:
  - {name: api-global, algorithm: token_bucket, limit: 100, window: 1s}
  - {name: watch, algorithm: token_bucket, limit: 100, window: 1s, mode: shadow}
rlqs:
  - domain: mesh
    buckets:
      - {match: {name: api}, policy: api-global}
      - {match: {name: watch}, policy: watch}
  - domain: strict
    unmatched: deny_all
    buckets:
      - {match: {name: api}, policy: api-global}
`

// openStream starts a Server of opts (its Config inputConfig's) and opens one stream to it.
func openStream(t *testing.T, opts rlqs.Options) rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient {
	t.Helper()
	return dialStream(t, serveConfig(t, inputConfig, opts))
}

// serveConfig starts a Server of opts with the configuration yaml, on the memory ledger.
func serveConfig(t *testing.T, yaml string, opts rlqs.Options) *instance {
	t.Helper()
	cfg, err := policy.Parse("input.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	opts.Config, opts.Ledger = cfg, &rlqs.MemoryLedger{}
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	return startInstanceOpts(t, opts, clock)
}

// dialStream opens one stream to in.
func dialStream(t *testing.T, in *instance) rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient {
	t.Helper()
	conn, err := grpc.NewClient(in.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	stream, err := rlqsv3.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return stream
}

func usage(id map[string]string, elapsed time.Duration, allowed, denied uint64) *rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage {
	return &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: &rlqsv3.BucketId{Bucket: id},
		TimeElapsed: durationpb.New(elapsed), NumRequestsAllowed: allowed, NumRequestsDenied: denied}
}

func send(t *testing.T, s rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient, domain string, us ...*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage) {
	t.Helper()
	if err := s.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: us}); err != nil {
		t.Fatal(err)
	}
}

// TestStreamAnswers checks the actions of each kind of bucket: a token bucket of whole seconds
// for a policy, ALLOW_ALL for a shadow policy, DENY_ALL for an unmatched bucket of a domain that
// says so, and nothing for an unmatched bucket elsewhere.
func TestStreamAnswers(t *testing.T) {
	in := serveConfig(t, inputConfig, rlqs.Options{})
	s := dialStream(t, in)
	send(t, s, "mesh", usage(map[string]string{"name": "api", "tenant": "acme"}, 0, 1, 0),
		usage(map[string]string{"name": "watch"}, 0, 1, 0), usage(map[string]string{"name": "other"}, 0, 1, 0))
	resp, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetBucketAction()) != 2 {
		t.Fatalf("%d actions, want 2 (none for the unmatched bucket): %v", len(resp.GetBucketAction()), resp)
	}
	// The bucket's ledger is new: the first Envoy is sent half the budget until the warm-up's end
	// (half the TTL), and a TTL a second past it.
	budget := 100 / (1 + rlqs.Deadband)
	warmup := rlqs.Warmup(policy.DefaultRLQSTTL)
	tb := resp.GetBucketAction()[0].GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
	if tb == nil || tb.GetFillInterval().AsDuration() != time.Second || tb.GetTokensPerFill().GetValue() != uint32(budget/2) || tb.GetMaxTokens() != tb.GetTokensPerFill().GetValue() {
		t.Errorf("the first Envoy of a new bucket of 100/s: %v, want half the budget %v per 1s", tb, budget)
	}
	if ttl := resp.GetBucketAction()[0].GetQuotaAssignmentAction().GetAssignmentTimeToLive().AsDuration(); ttl != warmup+time.Second {
		t.Errorf("TTL in the warm-up %v, want %v", ttl, warmup+time.Second)
	}
	if r := resp.GetBucketAction()[1].GetQuotaAssignmentAction().GetRateLimitStrategy(); r.GetBlanketRule() != typev3.RateLimitStrategy_ALLOW_ALL || r.GetStrategy() == nil {
		t.Errorf("a shadow policy: %v, want ALLOW_ALL", r)
	}
	// At the warm-up's end, without a report, the whole budget and the configured TTL.
	in.clock.advance(warmup)
	resp, err = s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetBucketAction()) != 1 {
		t.Fatalf("at the warm-up's end: %v, want the one token bucket", resp)
	}
	tb = resp.GetBucketAction()[0].GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
	if tb.GetTokensPerFill().GetValue() != uint32(budget) || tb.GetMaxTokens() != uint32(budget) {
		t.Errorf("the one Envoy of a bucket of 100/s after the warm-up: %v, want every token of the budget %v per 1s", tb, budget)
	}
	if ttl := resp.GetBucketAction()[0].GetQuotaAssignmentAction().GetAssignmentTimeToLive().AsDuration(); ttl != policy.DefaultRLQSTTL {
		t.Errorf("TTL %v, want %v", ttl, policy.DefaultRLQSTTL)
	}

	// A domain no entry names is answered nothing: the next message on its stream is the end.
	s3 := openStream(t, rlqs.Options{FirstReport: time.Hour})
	send(t, s3, "nowhere", usage(map[string]string{"name": "api"}, 0, 1, 0))
	if err := s3.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if resp, err := s3.Recv(); err == nil {
		t.Errorf("a bucket of an unknown domain was answered %v", resp)
	}

	s2 := openStream(t, rlqs.Options{})
	send(t, s2, "strict", usage(map[string]string{"name": "other"}, 0, 1, 0))
	resp, err = s2.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.GetBucketAction()[0].GetQuotaAssignmentAction().GetRateLimitStrategy(); r.GetBlanketRule() != typev3.RateLimitStrategy_DENY_ALL {
		t.Errorf("an unmatched bucket of a deny_all domain: %v, want DENY_ALL", r)
	}
}

const defaultsConfig = `policies:
  - {name: api-global, algorithm: token_bucket, limit: 100, window: 1s}
  - {name: fallback, algorithm: token_bucket, limit: 20, window: 1s}
rlqs:
  - domain: mesh
    unmatched: {policy: fallback}
    buckets:
      - {match: {name: api}, policy: api-global}
  - domain: "*"
    unmatched: deny_all
    buckets:
      - {match: {name: api}, policy: fallback}
`

// recvActions receives the next response of s and returns its actions by the bucket id's name.
func recvActions(t *testing.T, s rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient) map[string]*typev3.RateLimitStrategy {
	t.Helper()
	resp, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*typev3.RateLimitStrategy{}
	for _, a := range resp.GetBucketAction() {
		id := a.GetBucketId().GetBucket()
		out[id["name"]+"/"+id["tenant"]] = a.GetQuotaAssignmentAction().GetRateLimitStrategy()
	}
	return out
}

// TestStreamDefaultPolicy checks unmatched: {policy: NAME} (a bucket no rule matches is assigned
// its share of the default policy, each distinct bucket id a budget of its own) and the "*"
// domain, which answers every domain no entry names, each domain's buckets their own budgets.
func TestStreamDefaultPolicy(t *testing.T) {
	in := serveConfig(t, defaultsConfig, rlqs.Options{})
	perFill := func(r *typev3.RateLimitStrategy) uint32 { return r.GetTokenBucket().GetTokensPerFill().GetValue() }
	full := func(limit float64) uint32 { return uint32(limit / (1 + rlqs.Deadband)) }

	mesh := dialStream(t, in)
	send(t, mesh, "mesh", usage(map[string]string{"name": "api"}, 0, 1, 0),
		usage(map[string]string{"name": "other", "tenant": "a"}, 0, 1, 0), usage(map[string]string{"name": "other", "tenant": "b"}, 0, 1, 0))
	got := recvActions(t, mesh)
	half := func(limit float64) uint32 { return uint32(limit / (1 + rlqs.Deadband) / 2) }
	if len(got) != 3 || perFill(got["api/"]) != half(100) || perFill(got["other/a"]) != half(20) || perFill(got["other/b"]) != half(20) {
		t.Errorf("mesh in the warm-up: %v; want api %d tokens a second and each unmatched bucket the default policy's %d", got, half(100), half(20))
	}

	// Two streams of domains no entry names: the "*" entry's rules, each domain a budget of its own.
	var edges []rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient
	for _, domain := range []string{"edge", "edge2"} {
		s := dialStream(t, in)
		edges = append(edges, s)
		send(t, s, domain, usage(map[string]string{"name": "api"}, 0, 1, 0), usage(map[string]string{"name": "other"}, 0, 1, 0))
		got := recvActions(t, s)
		if perFill(got["api/"]) != half(20) {
			t.Errorf("%s's api bucket in the warm-up: %v, want the first Envoy's half of the %d tokens a second of its own budget", domain, got["api/"], full(20))
		}
		if r := got["other/"]; r.GetBlanketRule() != typev3.RateLimitStrategy_DENY_ALL {
			t.Errorf("%s's unmatched bucket: %v, want DENY_ALL", domain, r)
		}
	}

	// The warm-up's end: each token bucket its whole budget, pushed.
	in.clock.advance(rlqs.Warmup(policy.DefaultRLQSTTL))
	if got := recvActions(t, mesh); len(got) != 3 || perFill(got["api/"]) != full(100) || perFill(got["other/a"]) != full(20) || perFill(got["other/b"]) != full(20) {
		t.Errorf("mesh: %v; want api %d tokens a second and each unmatched bucket the default policy's %d", got, full(100), full(20))
	}
	for i, s := range edges {
		if got := recvActions(t, s); len(got) != 1 || perFill(got["api/"]) != full(20) {
			t.Errorf("edge stream %d after the warm-up: %v, want the api bucket alone, the whole %d tokens a second", i, got, full(20))
		}
	}

	// A second stream of mesh on the same bucket splits its budget with the first.
	mesh2 := dialStream(t, in)
	send(t, mesh2, "mesh", usage(map[string]string{"name": "other", "tenant": "a"}, time.Second, 1, 0))
	if got := recvActions(t, mesh2); perFill(got["other/a"]) >= full(20) || perFill(got["other/a"]) == 0 {
		t.Errorf("a second Envoy of mesh's other/a: %v, want a share of the default policy's %d", got, full(20))
	}
}

// TestStreamRefusesBadInput checks that each bad message ends its stream with a clear gRPC error.
func TestStreamRefusesBadInput(t *testing.T) {
	api := map[string]string{"name": "api"}
	for _, c := range []struct {
		name string
		opts rlqs.Options
		send func(t *testing.T, s rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient)
		code codes.Code
		msg  string
	}{
		{"no domain", rlqs.Options{}, func(t *testing.T, s rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient) {
			send(t, s, "", usage(api, 0, 1, 0))
		}, codes.InvalidArgument, "must name its domain"},
		{"another domain", rlqs.Options{}, func(t *testing.T, s rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient) {
			send(t, s, "mesh", usage(api, 0, 1, 0))
			send(t, s, "strict", usage(api, 0, 1, 0))
		}, codes.InvalidArgument, `domain "strict" in a stream of domain "mesh"`},
		{"empty bucket id", rlqs.Options{}, func(t *testing.T, s rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient) {
			send(t, s, "mesh", usage(map[string]string{}, 0, 1, 0))
		}, codes.InvalidArgument, "bucket_quota_usages[0].bucket_id: empty bucket id"},
		{"long entry", rlqs.Options{}, func(t *testing.T, s rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient) {
			send(t, s, "mesh", usage(api, 0, 1, 0), usage(map[string]string{"name": strings.Repeat("x", rlqs.MaxEntryLen+1)}, 0, 1, 0))
		}, codes.InvalidArgument, "bucket_quota_usages[1].bucket_id: bucket id entry"},
		{"absurd count", rlqs.Options{}, func(t *testing.T, s rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient) {
			send(t, s, "mesh", usage(api, time.Second, rlqs.MaxRequests, 1))
		}, codes.InvalidArgument, "more than"},
		{"negative time", rlqs.Options{}, func(t *testing.T, s rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient) {
			send(t, s, "mesh", usage(api, -time.Second, 1, 0))
		}, codes.InvalidArgument, "time_elapsed"},
		{"a flood of buckets", rlqs.Options{MaxBuckets: 3}, func(t *testing.T, s rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient) {
			for _, n := range []string{"a", "b", "c", "d"} {
				send(t, s, "mesh", usage(map[string]string{"name": "api", "tenant": n}, 0, 1, 0))
			}
		}, codes.ResourceExhausted, "more than 3 distinct buckets"},
		{"never reports", rlqs.Options{FirstReport: 50 * time.Millisecond}, func(*testing.T, rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient) {
		}, codes.DeadlineExceeded, "no usage report within 50ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := openStream(t, c.opts)
			c.send(t, s)
			var err error
			for err == nil {
				_, err = s.Recv()
			}
			if status.Code(err) != c.code || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("stream ended with %v, want %v containing %q", err, c.code, c.msg)
			}
		})
	}
}

// TestStreamAbandonsIdleBuckets checks that a bucket with no request for idle_after is abandoned.
func TestStreamAbandonsIdleBuckets(t *testing.T) {
	cfg, err := policy.Parse("idle.yaml", []byte(`policies:
  - {name: api-global, algorithm: token_bucket, limit: 100, window: 1s}
rlqs:
  - {domain: mesh, assignment_ttl: 1s, idle_after: 2s, buckets: [{match: {name: api}, policy: api-global}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	in := startInstanceOpts(t, rlqs.Options{Config: cfg, Ledger: &rlqs.MemoryLedger{}}, clock)
	conn, err := grpc.NewClient(in.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s, err := rlqsv3.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	api := map[string]string{"name": "api"}
	send(t, s, "mesh", usage(api, 0, 1, 0))
	if resp, err := s.Recv(); err != nil || resp.GetBucketAction()[0].GetQuotaAssignmentAction() == nil {
		t.Fatalf("first answer %v, %v", resp, err)
	}
	clock.advance(time.Second)
	send(t, s, "mesh", usage(api, time.Second, 0, 0))
	if resp, err := s.Recv(); err != nil || resp.GetBucketAction()[0].GetQuotaAssignmentAction() == nil {
		t.Fatalf("answer to an idle second %v, %v: want the assignment still", resp, err)
	}
	clock.advance(2 * time.Second)
	resp, err := s.Recv()
	if err != nil || resp.GetBucketAction()[0].GetAbandonAction() == nil {
		t.Fatalf("after 2s without a request: %v, %v; want an abandon action", resp, err)
	}
}

// TestReloadAbandonsBucketsThatLostTheirRule swaps in a configuration without the bucket's rule:
// the bucket is abandoned at once, so that Envoy falls back to its no_assignment_behavior.
func TestReloadAbandonsBucketsThatLostTheirRule(t *testing.T) {
	cfg, err := policy.Parse("input.yaml", []byte(inputConfig))
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	in := startInstanceOpts(t, rlqs.Options{Config: cfg, Ledger: &rlqs.MemoryLedger{}}, clock)
	conn, err := grpc.NewClient(in.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s, err := rlqsv3.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	send(t, s, "mesh", usage(map[string]string{"name": "api"}, 0, 1, 0))
	if resp, err := s.Recv(); err != nil || resp.GetBucketAction()[0].GetQuotaAssignmentAction() == nil {
		t.Fatalf("first answer %v, %v", resp, err)
	}
	without, err := policy.Parse("without.yaml", []byte(strings.Replace(inputConfig, "      - {match: {name: api}, policy: api-global}\n      - {match: {name: watch}", "      - {match: {name: watch}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := without.RLQSDomain("mesh"); len(d.Buckets) != 1 {
		t.Fatalf("the edited configuration has %d rules in mesh, want 1", len(d.Buckets))
	}
	in.srv.Swap(without)
	resp, err := s.Recv()
	if err != nil || len(resp.GetBucketAction()) != 1 || resp.GetBucketAction()[0].GetAbandonAction() == nil {
		t.Fatalf("after the reload: %v, %v; want an abandon action", resp, err)
	}
}

// leaveLedger is a MemoryLedger that notes the buckets whose demands were reported and left, and
// the deadline of each leave.
type leaveLedger struct {
	rlqs.MemoryLedger
	mu               sync.Mutex
	reported, leaves []string
	deadlines        []time.Time
}

func (l *leaveLedger) ReportDemand(ctx context.Context, bucket, client string, demand float64, now time.Time, ttl time.Duration) (map[string]float64, time.Time, error) {
	l.mu.Lock()
	l.reported = append(l.reported, bucket)
	l.mu.Unlock()
	return l.MemoryLedger.ReportDemand(ctx, bucket, client, demand, now, ttl)
}

func (l *leaveLedger) LeaveDemand(ctx context.Context, bucket, client string) error {
	l.mu.Lock()
	l.leaves = append(l.leaves, bucket)
	d, _ := ctx.Deadline()
	l.deadlines = append(l.deadlines, d)
	l.mu.Unlock()
	return l.MemoryLedger.LeaveDemand(ctx, bucket, client)
}

// TestShutdownEndsStreams checks that Shutdown ends an open stream with UNAVAILABLE, its demand
// leaving the Ledger, refuses a stream opened after it alike, and lets a graceful stop finish.
func TestShutdownEndsStreams(t *testing.T) {
	cfg, err := policy.Parse("input.yaml", []byte(inputConfig))
	if err != nil {
		t.Fatal(err)
	}
	ledger := &leaveLedger{}
	in := startInstanceOpts(t, rlqs.Options{Config: cfg, Ledger: ledger}, &fakeClock{t: time.Unix(1_800_000_000, 0)})
	s := dialStream(t, in)
	send(t, s, "mesh", usage(map[string]string{"name": "api"}, 0, 1, 0))
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	in.srv.Shutdown()
	if _, err := s.Recv(); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("after Shutdown: %v, want UNAVAILABLE, shutting down", err)
	}
	late := dialStream(t, in)
	if _, err := late.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("a stream opened after Shutdown: %v, want UNAVAILABLE", err)
	}
	stopped := make(chan struct{})
	go func() { in.g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(time.Minute):
		t.Fatal("GracefulStop did not return within a minute of Shutdown")
	}
	// Every handler has returned: the ended stream's demand left the Ledger.
	ledger.mu.Lock()
	defer ledger.mu.Unlock()
	if len(ledger.reported) != 1 || !slices.Equal(ledger.leaves, ledger.reported) {
		t.Errorf("buckets reported %v, left %v; want the one reported to have left", ledger.reported, ledger.leaves)
	}
}

// TestLeaveHasOneDeadline checks that a stream that ends leaves every bucket's demand within one
// deadline, not one each: a Ledger that does not answer holds up its end (and a shutdown) once.
func TestLeaveHasOneDeadline(t *testing.T) {
	cfg, err := policy.Parse("input.yaml", []byte(inputConfig))
	if err != nil {
		t.Fatal(err)
	}
	ledger := &leaveLedger{}
	in := startInstanceOpts(t, rlqs.Options{Config: cfg, Ledger: ledger}, &fakeClock{t: time.Unix(1_800_000_000, 0)})
	s := dialStream(t, in)
	send(t, s, "mesh", usage(map[string]string{"name": "api", "tenant": "a"}, 0, 1, 0),
		usage(map[string]string{"name": "api", "tenant": "b"}, 0, 1, 0), usage(map[string]string{"name": "api", "tenant": "c"}, 0, 1, 0))
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err == nil {
		t.Fatal("the stream goes on after CloseSend")
	}
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		ledger.mu.Lock()
		n := len(ledger.leaves)
		ledger.mu.Unlock()
		if n == 3 {
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("%d of 3 buckets left the Ledger within a minute of the stream's end", n)
		}
	}
	ledger.mu.Lock()
	defer ledger.mu.Unlock()
	if d := ledger.deadlines; d[0].IsZero() || !d[1].Equal(d[0]) || !d[2].Equal(d[0]) {
		t.Errorf("the leaves' deadlines %v: want one, the same for all", d)
	}
}

// Envoy counts time_elapsed in whole seconds, so a report less than a second after the one before
// says 0: its requests count over the time the instance saw pass, rather than not at all. Two Envoys of a
// bucket of 100/s, past the warm-up, demand 90/s and 10/s; then the first reports 5 requests half
// a second on, 10/s: its demand falls to 0.75*10 + 0.25*90 = 30/s, and its share with it.
func TestReportOfNoWholeSecond(t *testing.T) {
	in := serveConfig(t, inputConfig, rlqs.Options{})
	id := map[string]string{"name": "api"}
	a, b := dialStream(t, in), dialStream(t, in)
	tokens := func(s rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient) uint32 {
		t.Helper()
		resp, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetBucketAction()[0].GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket().GetTokensPerFill().GetValue()
	}
	send(t, a, "mesh", usage(id, 0, 1, 0))
	tokens(a)
	send(t, b, "mesh", usage(id, 0, 1, 0))
	tokens(b)
	in.clock.advance(rlqs.Warmup(policy.DefaultRLQSTTL)) // the split is pushed to both at its end
	tokens(a)
	tokens(b)
	in.clock.advance(time.Second)
	send(t, b, "mesh", usage(id, time.Second, 10, 0))
	tokens(b)
	send(t, a, "mesh", usage(id, time.Second, 90, 0))
	budget := 100 / (1 + rlqs.Deadband)
	share := func(d, total float64) uint32 {
		return uint32(budget*rlqs.FloorFraction/2 + budget*(1-rlqs.FloorFraction)*d/total)
	}
	if got, want := tokens(a), share(90, 100); got != want {
		t.Fatalf("demands 90/s and 10/s: %d tokens a second, want %d", got, want)
	}
	in.clock.advance(500 * time.Millisecond)
	send(t, a, "mesh", usage(id, 0, 5, 0))
	if got, want := tokens(a), share(30, 40); got != want {
		t.Errorf("5 requests half a second on, time_elapsed 0: %d tokens a second, want %d (demand 30/s against 10/s)", got, want)
	}
}
