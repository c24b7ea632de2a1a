package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/admit-dev/admit/metrics"
	"github.com/admit-dev/admit/policy/envoyconf"
	"github.com/admit-dev/admit/transport/rls"
	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"
)

// startRLS starts Envoy's rate limit service of admit serve: it loads the directory of
// --envoy-config, listens on --grpc-listen, and serves there through d's Service until ctx is done, then
// stops gracefully within shutdownGrace and sends the exit code to done, which holds one code to
// replace. It reloads the directory on SIGHUP and when its files change, and follows the backend's
// health as /readyz sees it. It returns api with envoyproxy/ratelimit's HTTP paths beside it:
// GET /healthcheck and POST /json. On a failure to start it returns the exit code, having logged
// why; else exitOK and a context that is cancelled when the gRPC server fails, so that the HTTP
// server stops too.
func startRLS(ctx context.Context, d *daemon, api http.Handler, done chan int) (context.Context, http.Handler, int) {
	logger := d.logger
	load := envoyconf.Options{MergeDomains: d.cfg.envoy.mergeDomains}
	cfg, err := load.Load(d.cfg.envoyConfig)
	if err != nil {
		logger.Error("cannot load the Envoy rate limit configuration", "dir", d.cfg.envoyConfig, "error", err)
		return ctx, nil, exitUsage
	}
	if n, where := cfg.Replicas(); n > 0 {
		if err := checkDurability(ctx, d.backend, n, "the Envoy rule "+where, logger); err != nil {
			logger.Error("cannot serve a replicated Envoy rule", "dir", d.cfg.envoyConfig, "error", err)
			return ctx, nil, exitUsage
		}
	}
	opts := rls.Options{Service: d.svc, Config: cfg, Logger: logger, Ops: d.cfg.ops.rlsOps(d.near.Add),
		IncrementOverLimit: d.cfg.envoy.incrementOverLimit, DynamicMetadata: d.cfg.envoy.dynamicMetadata}
	if d.cfg.envoy.metrics {
		stats, err := metrics.NewEnvoyStats(d.reg)
		if err != nil {
			logger.Error("cannot register the metrics", "error", err)
			return ctx, nil, exitError
		}
		opts.Stats = func(rule, key string, c rls.Counts) { stats.Add(rule, key, metrics.EnvoyCounts(c)) }
	}
	s, err := rls.New(opts)
	if err != nil {
		logger.Error("cannot build the Envoy rate limit service", "error", err)
		return ctx, nil, exitError
	}
	d.svc.SetRules(s) // the admin API's overrides address its rules by name and descriptor key
	ln, err := net.Listen("tcp", d.cfg.grpcListen)
	if err != nil {
		logger.Error("cannot listen for gRPC", "error", err)
		return ctx, nil, exitError
	}
	logger.Info("Envoy rate limit configuration", "dir", d.cfg.envoyConfig, "domains", len(cfg.Domains()), "hash", cfg.Hash,
		"shadow_mode", d.cfg.ops.shadowMode, "response_headers", d.cfg.ops.responseHeaders, "near_limit_ratio", d.cfg.ops.nearLimitRatio)
	g, h := rls.NewGRPCServer(s, append(d.expose.grpcOptions(), d.tracing.GRPC()...)...)
	if d.cfg.ops.reflection {
		reflection.Register(g)
		logger.Info("gRPC server reflection", "state", "on")
	}
	ctx, cancel := context.WithCancel(ctx)
	<-done
	go func() {
		done <- serveGRPC(ctx, cancel, ln, g, h, logger)
	}()
	check := func(cfg *envoyconf.Config) error {
		n, where := cfg.Replicas()
		return checkDurability(ctx, d.backend, n, "the Envoy rule "+where, logger)
	}
	go reloadEnvoy(ctx, d.cfg.envoyConfig, load, check, s, logger, reloadPollInterval)
	go h.Run(ctx, func(ctx context.Context) error { return ready(ctx, d.backend) }, rls.DefaultHealthInterval)
	mux := http.NewServeMux()
	mux.Handle("/", api)
	mux.Handle("GET /healthcheck", h)
	mux.Handle("/json", rls.JSONHandler(s))
	return ctx, mux, exitOK
}

// envoyFlags are admit serve's flags of envoyproxy/ratelimit's settings, with --envoy-config.
type envoyFlags struct {
	mergeDomains       bool // --envoy-merge-domains: MERGE_DOMAIN_CONFIG=true
	incrementOverLimit bool // --envoy-increment-over-limit: STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false
	dynamicMetadata    bool // --envoy-dynamic-metadata: RESPONSE_DYNAMIC_METADATA=true
	metrics            bool // --metrics-mode envoy_compat (--envoy-metrics): envoyproxy/ratelimit's per-rule series, USE_PROMETHEUS=true
}

// The values of --metrics-mode.
const (
	// metricsAdmit is admit's own metrics alone, the default.
	metricsAdmit = "admit"
	// metricsEnvoyCompat adds envoyproxy/ratelimit's per-rule series, as its Prometheus mapping
	// names them (docs/envoy.md, "Metrics"); --envoy-metrics is its other name.
	metricsEnvoyCompat = "envoy_compat"
)

// metricsModeFlag is --metrics-mode, kept in envoyFlags.metrics; --envoy-metrics sets the same.
type metricsModeFlag struct{ on *bool }

// String returns the mode in force.
func (m metricsModeFlag) String() string {
	if m.on != nil && *m.on {
		return metricsEnvoyCompat
	}
	return metricsAdmit
}

// Set sets the mode v, admit or envoy_compat.
func (m metricsModeFlag) Set(v string) error {
	switch v {
	case metricsAdmit, metricsEnvoyCompat:
		*m.on = v == metricsEnvoyCompat
		return nil
	}
	return fmt.Errorf("want %s or %s", metricsAdmit, metricsEnvoyCompat)
}

// envoyServeFlags defines admit serve's flags of Envoy's rate limit service on fs, into cfg:
// --grpc-listen, --envoy-config and the envoyFlags.
func envoyServeFlags(fs *flag.FlagSet, cfg *serveConfig) {
	fs.StringVar(&cfg.grpcListen, "grpc-listen", defaultGRPCListen, "`address` to serve Envoy's rate limit service (gRPC) on, with --envoy-config")
	fs.StringVar(&cfg.envoyConfig, "envoy-config", "", "the `DIR`ectory of envoyproxy/ratelimit's YAML files: serves Envoy's rate limit service (docs/envoy.md)")
	e := &cfg.envoy
	fs.BoolVar(&e.mergeDomains, "envoy-merge-domains", false, "merge the files of one domain, as envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG=true")
	fs.BoolVar(&e.incrementOverLimit, "envoy-increment-over-limit", false, "count the hits of a descriptor over its limit, as envoyproxy/ratelimit does by default (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false)")
	fs.BoolVar(&e.dynamicMetadata, "envoy-dynamic-metadata", false, "answer envoyproxy/ratelimit's dynamic metadata, quota mode's violations in it, as its RESPONSE_DYNAMIC_METADATA=true")
	fs.Var(metricsModeFlag{&e.metrics}, "metrics-mode", "`MODE` of /metrics: admit, or envoy_compat to add envoyproxy/ratelimit's per-rule series (ratelimit_service_rate_limit_*, as its Prometheus mapping names them) beside admit's")
	fs.BoolVar(&e.metrics, "envoy-metrics", false, "the same as --metrics-mode envoy_compat")
}

// serveGRPC serves g on ln until ctx is done, then stops gracefully: health NOT_SERVING, no new
// streams, in-flight calls finished within shutdownGrace, else cut. A failure of Serve cancels.
func serveGRPC(ctx context.Context, cancel context.CancelFunc, ln net.Listener, g *grpc.Server, h *rls.Health, logger *slog.Logger) int {
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
func reloadEnvoy(ctx context.Context, dir string, load envoyconf.Options, check func(*envoyconf.Config) error, s *rls.Server, logger *slog.Logger, poll time.Duration) {
	bad := "" // the error of the last bad load, reported once
	onPollOrHUP(ctx, poll, func(force bool) {
		cfg, err := load.Load(dir)
		if err == nil {
			err = check(cfg) // a replicated rule the backend cannot serve
		}
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
