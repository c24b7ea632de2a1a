package main

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/admit-dev/admit/policy/envoyconf"
	"github.com/admit-dev/admit/transport/rls"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
)

// startRLS starts Envoy's rate limit service of admit serve: it loads the directory of
// --envoy-config, listens on --grpc-listen, and serves there through d's Service until ctx is done, then
// stops gracefully within shutdownGrace and sends the exit code to done, which holds one code to
// replace. It reloads the directory on SIGHUP and when its files change. On a failure to start it
// returns the exit code, having logged why; else exitOK and a context that is cancelled when the
// gRPC server fails, so that the HTTP server stops too.
func startRLS(ctx context.Context, d *daemon, done chan int) (context.Context, int) {
	logger := d.logger
	load := envoyconf.Options{MergeDomains: d.cfg.envoy.mergeDomains}
	cfg, err := load.Load(d.cfg.envoyConfig)
	if err != nil {
		logger.Error("cannot load the Envoy rate limit configuration", "dir", d.cfg.envoyConfig, "error", err)
		return ctx, exitUsage
	}
	s, err := rls.New(rls.Options{Service: d.svc, Config: cfg, Logger: logger,
		IncrementOverLimit: d.cfg.envoy.incrementOverLimit, DynamicMetadata: d.cfg.envoy.dynamicMetadata})
	if err != nil {
		logger.Error("cannot build the Envoy rate limit service", "error", err)
		return ctx, exitError
	}
	d.svc.SetRules(s) // the admin API's overrides address its rules by name and descriptor key
	ln, err := net.Listen("tcp", d.cfg.grpcListen)
	if err != nil {
		logger.Error("cannot listen for gRPC", "error", err)
		return ctx, exitError
	}
	logger.Info("Envoy rate limit configuration", "dir", d.cfg.envoyConfig, "domains", len(cfg.Domains()), "hash", cfg.Hash)
	g, h := rls.NewGRPCServer(s, append(d.expose.grpcOptions(), d.tracing.GRPC()...)...)
	ctx, cancel := context.WithCancel(ctx)
	<-done
	go func() {
		done <- serveGRPC(ctx, cancel, ln, g, h, logger)
	}()
	go reloadEnvoy(ctx, d.cfg.envoyConfig, load, s, logger, reloadPollInterval)
	return ctx, exitOK
}

// envoyFlags are admit serve's flags of envoyproxy/ratelimit's settings, with --envoy-config.
type envoyFlags struct {
	mergeDomains       bool // --envoy-merge-domains: MERGE_DOMAIN_CONFIG=true
	incrementOverLimit bool // --envoy-increment-over-limit: STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false
	dynamicMetadata    bool // --envoy-dynamic-metadata: RESPONSE_DYNAMIC_METADATA=true
}

// serveGRPC serves g on ln until ctx is done, then stops gracefully: health NOT_SERVING, no new
// streams, in-flight calls finished within shutdownGrace, else cut. A failure of Serve cancels.
func serveGRPC(ctx context.Context, cancel context.CancelFunc, ln net.Listener, g *grpc.Server, h *health.Server, logger *slog.Logger) int {
	served := goServe(ln, g.Serve, logger, "listening for gRPC")
	if stoppedEarly(ctx, cancel, served, logger, "gRPC server stopped") {
		return exitError
	}
	h.Shutdown()
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
		return exitOK
	case <-time.After(shutdownGrace):
		g.Stop()
		logger.Error("gRPC server stopped", "error", "calls still in flight after "+shutdownGrace.String())
		return exitError
	}
}

// reloadEnvoy reloads the directory dir into s until ctx is done: on SIGHUP, and when its files
// change, looked at every poll. A directory with errors is logged, and the loaded configuration
// keeps serving.
func reloadEnvoy(ctx context.Context, dir string, load envoyconf.Options, s *rls.Server, logger *slog.Logger, poll time.Duration) {
	bad := "" // the error of the last bad load, reported once
	onPollOrHUP(ctx, poll, func(force bool) {
		cfg, err := load.Load(dir)
		switch {
		case err != nil:
			if err.Error() != bad || force {
				logger.Error("Envoy rate limit configuration not reloaded; the loaded one keeps serving", "dir", dir, "error", err)
			}
			bad = err.Error()
		case cfg.Hash != s.Config().Hash || force:
			bad = ""
			s.Swap(cfg)
			logger.Info("Envoy rate limit configuration reloaded", "dir", dir, "domains", len(cfg.Domains()), "hash", cfg.Hash)
		}
	})
}
