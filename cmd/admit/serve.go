package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/httplimit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/logrelay"
	"github.com/admit-dev/admit/internal/tracing"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/metrics"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/httpapi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// serveConfig is the parsed command line of admit serve, with the environment and the server
// settings of its configuration file applied: flag, then environment, then file. It never holds the
// secret itself.
type serveConfig struct {
	listen         string
	listenSet      bool            // --listen (or, for serve, ADMIT_LISTEN) was given: it wins over the file's server.listen
	redisURL       string          // "" = in-memory backend
	secretFile     string          // the HMAC secret's file, if secretFileSet
	secretFileSet  bool            // --hmac-secret-file was given: it wins over ADMIT_HMAC_SECRET
	configFile     string          // --config: the configuration file, or "" for the built-in demo policy
	logFormat      string          // --log-format: text or json
	fileSecretFile string          // the configuration file's server.hmac_secret_file, the last resort
	upstream       string          // --upstream of admit proxy: the app's URL
	grpcListen     string          // --grpc-listen of admit serve: the Envoy rate limit service's address
	grpcListenSet  bool            // --grpc-listen was given
	redisTLS       policy.RedisTLS // the file's server.redis_tls
	sentinelUser   string          // REDIS_SENTINEL_AUTH's user, under --envoy-env
	sentinelPass   string          // REDIS_SENTINEL_AUTH's password, under --envoy-env; never logged
	commandTimeout time.Duration   // the file's server.redis_command_timeout; 0: redisstore's default
	breaker        policy.Breaker  // the file's server.breaker; zero: guard's defaults
	rlqsListen     string          // --rlqs-listen of admit serve: the rate limit quota service's address, or ""
	envoyConfig    string          // --envoy-config of admit serve: the directory of envoyproxy/ratelimit's files, or ""
	envoy          envoyFlags      // the other --envoy-* flags of admit serve
	admin          adminConfig     // the admin API's flags of admit serve
	ops            opsConfig       // envoyproxy/ratelimit's operations surface of admit serve
	given          map[string]bool // the flags given
}

// applyFile applies the server settings of the configuration file to cfg, where no flag or
// environment variable has set them.
func (cfg *serveConfig) applyFile(s policy.Server) {
	if !cfg.listenSet {
		cfg.listen = s.Listen
	}
	if cfg.redisURL == "" {
		cfg.redisURL = s.Redis
	}
	cfg.fileSecretFile = s.HMACSecretFile
	cfg.commandTimeout, cfg.breaker = s.RedisCommandTimeout, s.Breaker
	if cfg.ops.commandTimeout > 0 {
		cfg.commandTimeout = cfg.ops.commandTimeout // REDIS_TIMEOUT, under --envoy-env
	}
	if !cfg.ops.redisTLSSet {
		cfg.redisTLS = s.RedisTLS
	}
}

// parseServe parses the flags of admit serve. On --help it writes the usage to stdout and returns
// done; on a bad command line it writes the error and a hint to stderr and returns exitUsage.
func parseServe(args []string, stdout, stderr io.Writer) (cfg serveConfig, code int, done bool) {
	cfg, code, done = parseCommand("serve", defaultListen, serveUsage, args, stdout, stderr, func(fs *flag.FlagSet, cfg *serveConfig) {
		envoyServeFlags(fs, cfg)
		fs.StringVar(&cfg.rlqsListen, "rlqs-listen", "", "`address` to serve Envoy's rate limit quota service (gRPC) on; off by default (docs/rlqs.md)")
		adminFlags(fs, cfg)
		opsFlags(fs, cfg)
	})
	if done {
		return cfg, code, done
	}
	if cfg.given["envoy-metrics"] && cfg.given["metrics-mode"] {
		return cfg, badUsage(stderr, "serve", "--envoy-metrics is --metrics-mode %s: give one of them", metricsEnvoyCompat), true
	}
	if cfg.ops.envoyEnv {
		if err := cfg.applyEnvoyEnv(os.Environ()); err != nil {
			return cfg, badUsage(stderr, "serve", "%v", err), true
		}
		if err := checkRedisURL("REDIS_URL (envoyproxy/ratelimit's)", cfg.redisURL); err != nil {
			return cfg, badUsage(stderr, "serve", "--envoy-env: %v", err), true
		}
	}
	if env := os.Getenv(listenEnv); !cfg.listenSet && env != "" {
		cfg.listen, cfg.listenSet = env, true // flag, then environment, then file
	}
	if err := cfg.ops.check(); err != nil {
		return cfg, badUsage(stderr, "serve", "%v", err), true
	}
	if cfg.grpcListen != defaultGRPCListen && cfg.envoyConfig == "" {
		return cfg, badUsage(stderr, "serve", "--grpc-listen needs --envoy-config DIR, the configuration of Envoy's rate limit service"), true
	}
	if cfg.envoy != (envoyFlags{}) && cfg.envoyConfig == "" {
		return cfg, badUsage(stderr, "serve", "--envoy-merge-domains, --envoy-increment-over-limit, --envoy-dynamic-metadata and --metrics-mode envoy_compat (--envoy-metrics) need --envoy-config DIR"), true
	}
	if cfg.admin.listenSet && !cfg.admin.tokenFileSet && os.Getenv(adminTokenEnv) == "" {
		return cfg, badUsage(stderr, "serve", "--admin-listen needs an admin token: --%s PATH or %s", adminTokenFileFlag, adminTokenEnv), true
	}
	return cfg, exitOK, false
}

// listenEnv names the environment variable of admit serve's HTTP address, read where --listen is
// not given; it wins over the file's server.listen. The container image sets it to ":8080".
const listenEnv = "ADMIT_LISTEN"

// defaultGRPCListen is the default address of Envoy's rate limit service (docs/envoy.md).
const defaultGRPCListen = "127.0.0.1:8081"

// serveUsage is the usage of admit serve, before its flags.
const serveUsage = `Usage: admit serve [--config FILE] [--listen ADDR] [--envoy-config DIR [--grpc-listen ADDR]] [--envoy-env] [--rlqs-listen ADDR] [--admin-token-file PATH [--admin-listen ADDR]] [--redis URL] [--hmac-secret-file PATH] [--log-format text|json]

Serves the admit HTTP API until SIGINT or SIGTERM, then finishes the requests in flight (for at
most ` + "{{grace}}" + `) and exits 0.

  POST /v1/check    {"policy":"per-day","key":"alice","cost":1,"request_id":"…"}, or
                    "policies":[…] for several at once: 200 allowed, 429 limited,
                    400 invalid, 503 undecided; the decision as JSON
  GET /v1/policies  the policies loaded
  GET /demo         the demo: one account, 3 requests per 10s; 200, then 429 with
                    Retry-After, or 503 when the limiter cannot decide
  GET /healthz      200 "ok VERSION" while the process is alive
  GET /readyz       200 when the backend answers, else 503
  GET /metrics      Prometheus metrics

With --envoy-config DIR, it also serves Envoy's rate limit service, gRPC
envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit and grpc.health.v1, on
--grpc-listen (default ` + defaultGRPCListen + `), configured by the envoyproxy/ratelimit YAML
files (*.yaml, *.yml) of DIR and its subdirectories (docs/envoy.md); DIR is reloaded on SIGHUP
and when it changes. --envoy-merge-domains, --envoy-increment-over-limit and
--envoy-dynamic-metadata are envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG=true,
STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false and RESPONSE_DYNAMIC_METADATA=true;
--metrics-mode envoy_compat (or --envoy-metrics) adds envoyproxy/ratelimit's per-rule series to
/metrics, as its USE_PROMETHEUS=true names them.
The health service answers for "", ratelimit and the service's name, NOT_SERVING while the backend
does not answer and from SIGTERM on; the HTTP listener adds envoyproxy/ratelimit's
GET /healthcheck (200 "OK", else 500) and POST /json (ShouldRateLimit in JSON: 200, or 429 when
OVER_LIMIT). --envoy-env reads envoyproxy/ratelimit's environment variables (RUNTIME_ROOT, PORT,
GRPC_PORT, REDIS_URL, SHADOW_MODE, ...) where no flag is given, and names in one warning those set
that admit does not honour.

` + rlqsUsage + `With an admin token (--admin-token-file PATH, else $` + adminTokenEnv + `; at least 16 bytes, never
logged), it also serves the admin API on a listener of its own, --admin-listen (default
` + defaultAdminListen + `): GET /v1/state, with Authorization: Bearer TOKEN (docs/operations.md);
its GET /ui is the operator console, a page for a browser.

The file's server.tls serves both listeners over TLS (client_ca_file: client certificates
required), and its server.client_tokens_file makes every path but /healthz, /readyz and /metrics
want Authorization: Bearer TOKEN (docs/security.md); their files are reloaded when they change.

--config FILE names the policies (docs/configuration.md; check it with admit config validate).
Without it, the one policy is the demo's, "demo". The file is reloaded on SIGHUP and when it
changes; a file with errors is logged and counted, and the loaded policies keep serving.
Settings come from a flag, else the environment, else the file: the HTTP address from --listen,
else $ADMIT_LISTEN, else the file's server.listen.
` + backendUsage

// backendUsage is the part of the usage of admit serve and admit proxy about the backend and the
// HMAC secret.
const backendUsage = `
Without --redis, REDIS_URL or the file's server.redis, limits are kept in this process's memory
and not shared.

The HMAC secret turns subjects into keys, so that no client can name its own counter and no
personal data reaches Redis: --hmac-secret-file PATH, else $` + secretEnv + `, else the file's
server.hmac_secret_file, at least {{minsecret}} bytes, never logged. With --redis or REDIS_URL it is required, and every instance on one Redis
must have the same one, or they do not share limits: without it the command refuses to start
(exit 2). In memory, without one, it uses a random secret of its own.

Flags:
`

// parseCommand parses the flags of admit name (serve or proxy), whose default listen address is
// listen and whose usage, before the flags, is usage; more, if not nil, defines the command's own
// flags. On --help it writes the usage to stdout and returns done; on a bad command line it writes
// the error and a hint to stderr and returns exitUsage.
func parseCommand(name, listen, usage string, args []string, stdout, stderr io.Writer, more func(*flag.FlagSet, *serveConfig)) (cfg serveConfig, code int, done bool) {
	fs := flag.NewFlagSet("admit "+name, flag.ContinueOnError)
	fs.StringVar(&cfg.listen, "listen", listen, "`address` to serve HTTP on (host:port; port 0 picks a free one)")
	fs.StringVar(&cfg.redisURL, "redis", "", "Redis `URL` (redis://, rediss:// or unix://); default $REDIS_URL, else the in-memory backend")
	fs.StringVar(&cfg.secretFile, secretFileFlag, "", "read the HMAC secret from the file at `PATH` (one trailing newline is dropped); default $"+secretEnv)
	fs.StringVar(&cfg.configFile, "config", "", "the configuration `FILE`: policies, routes and server settings (docs/configuration.md)")
	fs.StringVar(&cfg.logFormat, "log-format", "text", "the log's `FORMAT` on stderr: text (logfmt) or json")
	if more != nil {
		more(fs, &cfg)
	}
	usage = strings.NewReplacer("{{grace}}", shutdownGrace.String(), "{{minsecret}}", fmt.Sprint(bound.MinSecretLen)).Replace(usage)
	fs.SetOutput(io.Discard) // errors and usage are printed below, each to its stream
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			printFlags(stdout, fs)
			return cfg, exitOK, true
		}
		return cfg, badUsage(stderr, name, "%s", flagError(err)), true
	}
	if fs.NArg() > 0 {
		return cfg, badUsage(stderr, name, "unexpected argument %q", fs.Arg(0)), true
	}
	if cfg.logFormat != "text" && cfg.logFormat != "json" {
		return cfg, badUsage(stderr, name, "--log-format %q: want text or json", cfg.logFormat), true
	}
	redisSet := false
	cfg.given = map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		cfg.given[f.Name] = true
		redisSet = redisSet || f.Name == "redis"
		cfg.listenSet = cfg.listenSet || f.Name == "listen"
		cfg.secretFileSet = cfg.secretFileSet || f.Name == secretFileFlag
		cfg.admin.visit(f)
	})
	source := "--redis"
	if !redisSet && !cfg.ops.envoyEnv { // under --envoy-env, REDIS_URL is envoyproxy/ratelimit's
		cfg.redisURL, source = os.Getenv("REDIS_URL"), "REDIS_URL"
	}
	if err := checkRedisURL(source, cfg.redisURL); err != nil {
		return cfg, badUsage(stderr, name, "%v", err), true
	}
	return cfg, exitOK, false
}

// checkRedisURL reports what is wrong with the Redis URL raw, given by source (--redis or
// REDIS_URL), before anything starts: an address without a scheme, such as 127.0.0.1:6379, or
// a URL redisstore refuses. Its errors never show a password.
func checkRedisURL(source, raw string) error {
	if raw == "" {
		return nil
	}
	if !strings.Contains(raw, "://") {
		shown := raw
		if i := strings.LastIndexByte(raw, '@'); i >= 0 {
			shown = "…" + raw[i:] // what precedes an @ may be a password
		}
		return fmt.Errorf("%s %s: want redis://host:port (or rediss://host:port for TLS, or unix:///path/to/redis.sock)", source, shown)
	}
	s, err := redisstore.New(redisstore.Config{URL: raw}) // parses the URL; connects to nothing
	if err != nil {
		return fmt.Errorf("%s: %w", source, err) // redisstore redacts the URL's password
	}
	s.Close()
	return nil
}

// A daemon is what admit serve and admit proxy run on: the log, the loaded configuration in a
// Service, the backend and the metrics.
type daemon struct {
	cfg     serveConfig // with the file's server settings applied
	logger  *slog.Logger
	backend admit.Store // the backend itself
	store   admit.Store // metrics → guard's decorators (guardStack) → backend: what the Service and the demo decide on
	keys    *admit.KeyBuilder
	svc     *service.Service
	reg     *prometheus.Registry
	near    *metrics.NearLimit // admit_rls_near_limit_total, at 0 without --envoy-config
	expose  exposure           // admit serve's TLS and client tokens
	relay   *logrelay.Relay    // the log's queue to stderr, whose drops admit_log_lines_dropped_total counts
	tracing *tracing.Tracing   // nil: tracing off
	closers []func()           // run by stop, last first
}

// stop closes what d opened: the backend, then the log.
func (d *daemon) stop() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}

// startDaemon starts the log on stderr, loads the configuration, opens the backend and registers
// the metrics that cfg names, and reloads the configuration file until ctx is done. On failure it
// logs why, stops what it started and returns nil and the exit code; else call d.stop when done.
func startDaemon(ctx context.Context, cfg serveConfig, stderr io.Writer) (*daemon, int) {
	// The log goes to stderr through a queue, so a stalled stderr (a full pipe nobody reads) costs
	// log lines, counted and reported once it drains, but never holds up a request or the exit.
	relay := logrelay.New(stderr, logrelay.Options{DroppedLine: func(n int64) []byte { return droppedLine(cfg.logFormat, n) }})
	d := &daemon{relay: relay, closers: []func(){func() {
		ctx, cancel := context.WithTimeout(context.Background(), logFlushTimeout)
		defer cancel()
		relay.Close(ctx) // on error, stderr is stalled: there is nowhere left to say so
	}}}
	var handler slog.Handler = slog.NewTextHandler(relay, nil)
	if cfg.logFormat == "json" {
		handler = newJSONHandler(relay)
	}
	d.logger = slog.New(handler)
	cfg.ops.warnIgnored(d.logger) // first, whatever fails next
	code, err := d.start(ctx, cfg)
	if err != nil {
		d.stop()
		return nil, code
	}
	return d, exitOK
}

// start does the work of startDaemon after the log; its error has been logged.
func (d *daemon) start(ctx context.Context, cfg serveConfig) (int, error) {
	logger := d.logger
	policies, err := loadPolicies(cfg.configFile)
	if err != nil {
		logger.Error("cannot load the configuration", "file", cfg.configFile, "error", err)
		return exitUsage, err
	}
	cfg.applyFile(policies.Server)
	d.cfg = cfg
	if d.keys, err = keyBuilder(cfg, logger); err != nil {
		logger.Error("no usable HMAC secret", "error", err)
		return exitUsage, err
	}
	backend, closeStore, err := openStore(cfg, logger)
	if err != nil {
		logger.Error("cannot open the backend", "error", err)
		return exitUsage, err
	}
	if cfg.redisURL != "" {
		tuneGC(os.Getenv, logger) // a service on Redis (serve, proxy); not the one-shot commands
	}
	d.backend = backend
	d.closers = append(d.closers, closeStore)
	if rs, ok := backend.(*redisstore.Store); ok {
		if err := preflight(ctx, rs, logger); err != nil {
			return exitUsage, err // refuse to start: the ACL user cannot do what admit needs
		}
	}
	if n, which := policyReplicas(policies); n > 0 {
		if err := checkDurability(ctx, backend, n, which, logger); err != nil {
			logger.Error("cannot serve a replicated policy", "file", cfg.configFile, "error", err)
			return exitUsage, err
		}
	}

	d.reg = prometheus.NewRegistry()
	entries, maxAge := cfg.ops.overLimitCache(policies.Server.LocalCacheMaxAge)
	guarded, err := guardStack(d.reg, backend, cfg.redisURL != "", entries, maxAge, cfg.breaker)
	if err != nil {
		logger.Error("cannot register the metrics", "error", err)
		return exitError, err
	}
	d.closers = append(d.closers, guarded.close)
	guarded.failOpen.SetLocalLimits(service.LocalLimits(policies)) // and the reloader each reloaded configuration's
	store, configMetrics, err := registerMetrics(d.reg, guarded.top)
	if err != nil {
		logger.Error("cannot register the metrics", "error", err)
		return exitError, err
	}
	d.store = store
	if d.svc, err = service.New(store, d.keys, policies); err == nil {
		err = metrics.RegisterOverrides(d.reg, overrideCounter(d.svc))
	}
	if err != nil {
		logger.Error("cannot build the service", "error", err)
		return exitError, err
	}
	if d.near, err = metrics.NewNearLimit(d.reg); err == nil {
		err = errors.Join(metrics.RegisterTopSubjects(d.reg, d.svc), metrics.RegisterLogDropped(d.reg, d.relay))
	}
	if err != nil {
		logger.Error("cannot register the metrics", "error", err)
		return exitError, err
	}
	if code, err := d.startTracing(ctx); err != nil {
		return code, err
	}
	configMetrics.Loaded(policies.Hash, false)
	logger.Info("configuration", "file", cfg.configFile, "policies", len(policies.Policies), "routes", len(policies.Routes), "hash", policies.Hash)
	if cfg.configFile != "" {
		r := &reloader{file: cfg.configFile, svc: d.svc, backend: backend, failOpen: guarded.failOpen, metrics: configMetrics, logger: logger, server: policies.Server}
		go r.run(ctx, reloadPollInterval)
	}
	return exitOK, nil
}

// serve runs admit serve until ctx is done.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, code, done := parseServe(args, stdout, stderr)
	if done {
		return code
	}
	d, code := startDaemon(ctx, cfg, stderr)
	if d == nil {
		return code
	}
	defer d.stop()
	logger := d.logger
	srv := d.svc.Config().Server
	clientIP, err := httplimit.ConfigureClientIP(srv.TrustedProxies, srv.ForwardedHeader, srv.IPv6Prefix)
	if err != nil {
		logger.Error("cannot resolve client addresses", "error", err)
		return exitUsage
	}
	demo, err := policy.Parse("built-in", []byte(demoConfig)) // the policy of GET /demo, whatever the loaded configuration
	if err != nil {
		logger.Error("cannot build the demo", "error", err)
		return exitError
	}
	api, err := httpapi.New(httpapi.Options{
		Demo:     demo,
		Logger:   logger,
		Service:  d.svc,
		ClientIP: clientIP,
		Ready:    func(ctx context.Context) error { return ready(ctx, d.backend) },
		Metrics:  promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}),
		Version:  moduleVersion(),
	})
	if err != nil {
		logger.Error("cannot build the HTTP API", "error", err)
		return exitError
	}
	ctx, stop := context.WithCancel(ctx) // stops the gRPC server too when the HTTP server fails
	defer stop()
	listens := []string{d.cfg.listen}
	if d.cfg.envoyConfig != "" {
		listens = append(listens, d.cfg.grpcListen)
	}
	if d.cfg.rlqsListen != "" {
		listens = append(listens, d.cfg.rlqsListen)
	}
	grpcOnlyTLS, err := d.cfg.ops.useGRPCTLS(&srv)
	if err != nil {
		logger.Error("cannot serve gRPC over TLS", "error", err)
		return exitUsage
	}
	if d.expose, code = startExposure(ctx, srv, listens, logger); code != exitOK {
		return code
	}
	d.expose.plainHTTP = grpcOnlyTLS
	grpcDone, adminDone, rlqsDone := make(chan int, 1), make(chan int, 1), make(chan int, 1)
	grpcDone <- exitOK
	adminDone <- exitOK
	rlqsDone <- exitOK
	if ctx, code = startAdmin(ctx, d, adminDone); code != exitOK {
		return code
	}
	handler := http.Handler(api)
	if d.cfg.envoyConfig != "" {
		if ctx, handler, code = startRLS(ctx, d, api, grpcDone); code != exitOK {
			return code
		}
	}
	if d.cfg.rlqsListen != "" {
		if ctx, code = startRLQS(ctx, d, rlqsDone); code != exitOK {
			return code
		}
	}
	code = listenAndServe(ctx, d.cfg.listen, newServer(d.tracing.HTTP(d.expose.handler(handler)), logger), d.expose.tlsConfig(), logger)
	stop()
	return max(code, <-grpcDone, <-adminDone, <-rlqsDone) // after the gRPC and admin servers' graceful stops too
}

// loadPolicies loads the configuration file, or, for "", returns the built-in one: the demo
// policy alone.
func loadPolicies(file string) (*policy.Config, error) {
	if file == "" {
		return policy.Parse("built-in", []byte(demoConfig))
	}
	return policy.Load(file)
}

// demoConfig is the configuration of admit serve without --config: the demo's policy.
const demoConfig = `
policies:
  - name: demo
    algorithm: fixed_window
    limit: 3
    window: 10s
`

// registerMetrics registers admit's metrics, Go's and the process's into reg, and returns backend
// wrapped in the metrics Store, and the configuration's metrics.
func registerMetrics(reg *prometheus.Registry, backend admit.Store) (admit.Store, *metrics.Config, error) {
	store, err := metrics.NewStore(backend, reg)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := metrics.NewConfig(reg)
	if err != nil {
		return nil, nil, err
	}
	err = errors.Join(
		metrics.RegisterBuildInfo(reg, moduleVersion()),
		reg.Register(collectors.NewGoCollector()),
		reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})),
	)
	return store, cfg, err
}

// readyLimit is the Limit of the key GET /readyz peeks: a peek writes nothing.
var readyLimit = admit.Limit{Name: "readyz", Algorithm: admit.FixedWindow, Rate: 1, Period: time.Second}

// ready reports whether backend can decide: it peeks one key, writing nothing.
func ready(ctx context.Context, backend admit.Store) error {
	_, err := backend.Take(ctx, admit.Request{Key: "rl:readyz", Limit: readyLimit, Cost: 0})
	return err
}

// openStore opens the backend that cfg names and logs which one it is.
func openStore(cfg serveConfig, logger *slog.Logger) (admit.Store, func(), error) {
	if cfg.redisURL == "" {
		s := memstore.New(memstore.Options{})
		logger.Info("backend", "backend", "memory", "note", "limits are not shared with other processes")
		return s, func() { s.Close() }, nil
	}
	s, err := redisstore.New(redisConfig(cfg))
	if err != nil {
		return nil, nil, err // redisstore redacts the URL's password from its errors
	}
	logger.Info("backend", "backend", "redis", "url", redisstore.RedactURL(cfg.redisURL))
	return s, func() { s.Close() }, nil
}

// redisConfig returns the redisstore.Config of cfg's Redis: its URL, the file's
// server.redis_command_timeout (or REDIS_TIMEOUT) and server.redis_tls, and REDIS_SENTINEL_AUTH.
func redisConfig(cfg serveConfig) redisstore.Config {
	t := cfg.redisTLS
	return redisstore.Config{URL: cfg.redisURL, CommandTimeout: cfg.commandTimeout, CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, ServerName: t.ServerName,
		SentinelUser: cfg.sentinelUser, SentinelPassword: cfg.sentinelPass}
}

// serveHTTP serves h on ln until ctx is done, then shuts down gracefully: it stops accepting,
// lets requests in flight finish for at most grace, and returns nil if they all did.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration, logger *slog.Logger) error {
	return runServer(ctx, ln, newServer(h, logger), grace, logger)
}

// newServer returns the HTTP server of h, with admit serve's timeouts and limits.
func newServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// runServer serves srv on ln until ctx is done, then shuts down gracefully, as serveHTTP does.
func runServer(ctx context.Context, ln net.Listener, srv *http.Server, grace time.Duration, logger *slog.Logger) error {
	served := goServe(ln, srv.Serve, logger, "listening")

	select {
	case err := <-served:
		return err // Serve failed before any shutdown
	case <-ctx.Done():
	}
	logger.Info("shutting down", "grace", grace)
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		return fmt.Errorf("requests still in flight after %v: %w", grace, err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	logger.Info("stopped")
	return nil
}
