package main

import (
	"context"
	"net"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/admit-dev/admit/metrics"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/transport/rlqs"
	"github.com/admit-dev/admit/transport/rls"
)

// rlqsUsage is the paragraph of admit serve's usage on --rlqs-listen.
const rlqsUsage = `With --rlqs-listen ADDR, it also serves Envoy's Rate Limit Quota Service, gRPC
envoy.service.rate_limit_quota.v3.RateLimitQuotaService, on ADDR: the rlqs section of the
configuration matches Envoy's buckets to policies, and each Envoy is assigned its share of each
policy's rate, by demand, as a token bucket it enforces itself (docs/rlqs.md).

`

// startRLQS starts the Rate Limit Quota Service of admit serve on --rlqs-listen, through d's
// configuration and, on Redis, its backend's demand records (redisstore.Store.ReportDemand), and
// serves it until ctx is done, then stops gracefully and sends the exit code to done, which holds
// one code to replace. It follows the reloads of the configuration file. On a failure to start it
// returns the exit code, having logged why; else exitOK and a context cancelled when the server
// fails.
func startRLQS(ctx context.Context, d *daemon, done chan int) (context.Context, int) {
	logger := d.logger
	var ledger rlqs.Ledger = &rlqs.MemoryLedger{}
	if rs, ok := d.backend.(*redisstore.Store); ok {
		ledger = rs
	}
	cfg := d.svc.Config()
	m, err := metrics.NewRLQS(d.reg, rlqsPolicies(cfg)...)
	if err != nil {
		logger.Error("cannot register the metrics", "error", err)
		return ctx, exitError
	}
	s, err := rlqs.New(rlqs.Options{Config: cfg, Ledger: ledger, Logger: logger, Observer: m})
	if err != nil {
		logger.Error("cannot build the rate limit quota service", "error", err)
		return ctx, exitError
	}
	ln, err := net.Listen("tcp", d.cfg.rlqsListen)
	if err != nil {
		logger.Error("cannot listen for RLQS", "error", err)
		return ctx, exitError
	}
	logger.Info("Envoy rate limit quota service", "listen", ln.Addr().String(), "domains", len(cfg.RLQS))
	if len(cfg.RLQS) == 0 {
		logger.Warn("--rlqs-listen without an rlqs section in the configuration: every bucket is answered nothing (docs/rlqs.md)")
	}
	g := grpc.NewServer(append(d.expose.grpcOptions(), d.tracing.GRPC()...)...)
	rlqsv3.RegisterRateLimitQuotaServiceServer(g, s)
	h := rls.NewHealthOf(rlqs.HealthServices...) // serveGRPC's: NOT_SERVING from shutdown on, and while the backend does not answer
	healthpb.RegisterHealthServer(g, h)
	ctx, cancel := context.WithCancel(ctx)
	<-done
	go func() {
		done <- serveGRPC(ctx, cancel, ln, g, h, logger)
	}()
	go func() { // at shutdown, NOT_SERVING, then the streams end: the graceful stop does not wait for them
		<-ctx.Done()
		h.Shutdown()
		s.Shutdown()
	}()
	go followReloads(ctx, d, s, reloadPollInterval)
	go h.Run(ctx, func(ctx context.Context) error { return ready(ctx, d.backend) }, rls.DefaultHealthInterval)
	return ctx, exitOK
}

// followReloads swaps each configuration the reloader loads into s, looking every poll.
func followReloads(ctx context.Context, d *daemon, s *rlqs.Server, poll time.Duration) {
	last := d.svc.Config()
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if cfg := d.svc.Config(); cfg != last {
				last = cfg
				s.Swap(cfg)
			}
		}
	}
}

// rlqsPolicies returns the names of the policies the rlqs section names, default policies
// included: the metrics' labels.
func rlqsPolicies(cfg *policy.Config) []string {
	var names []string
	seen := map[string]bool{}
	for _, d := range cfg.RLQS {
		policies := []string{d.UnmatchedPolicy}
		for _, b := range d.Buckets {
			policies = append(policies, b.Policy)
		}
		for _, p := range policies {
			if p != "" && !seen[p] {
				seen[p] = true
				names = append(names, p)
			}
		}
	}
	return names
}
