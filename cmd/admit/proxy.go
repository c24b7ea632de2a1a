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
	"net/url"

	"github.com/admit-dev/admit/transport/httpproxy"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// defaultProxyListen is the listen address of admit proxy: not admit serve's, so both can run on
// one host with their defaults.
const defaultProxyListen = "127.0.0.1:8000"

// proxyUsage is the usage of admit proxy, before its flags.
const proxyUsage = `Usage: admit proxy --upstream URL --config FILE [--listen ADDR] [--metrics-listen ADDR] [--redis URL] [--hmac-secret-file PATH] [--log-format text|json]

A reverse proxy in front of the app at --upstream (http:// or https://) that applies the routes of
the configuration file (docs/proxy.md): the first route whose method and path prefix match a
request decides it under the route's policies, for its subject (client_ip, header or constant),
at its cost. A request that matches no route is forwarded unlimited. Routes match the decoded
path, case-sensitively; a path that needs cleaning (//x, /./x, /a/../x) is redirected to its
clean path (308, GET and HEAD) or refused (400, other methods), and a path that encodes /, . or
\ (%2F, %2E, %5C), or whose ;parameters or trailing dots could name another route's resource,
is refused (400): neither is ever forwarded.

  admitted     forwarded; the response carries RateLimit-Policy and RateLimit
  limited      429 with Retry-After and the RateLimit fields; never forwarded
  malformed    400 (a bad forwarding header; a subject header missing, or from a
               peer not in server.trusted_proxies); never forwarded
  undecided    503 with Retry-After (fail closed); never forwarded
  unreachable  502 Bad Gateway, when the upstream cannot be reached

Bodies are streamed both ways, and WebSocket upgrades pass through. The leases of concurrency
policies are held until the response is written, or the upgraded connection closes.

It listens on --listen, default ` + defaultProxyListen + ` (the file's server.listen is admit serve's
and is not read), where every path is the app's: the proxy answers none of its own there. With
--metrics-listen ADDR (none by default) it serves its own endpoints on that address alone:

  GET /healthz  200 "ok VERSION" while the process is alive
  GET /readyz   200 when the backend answers, else 503
  GET /metrics  Prometheus metrics: the proxy's answers (admit_proxy_requests_total),
                decisions by policy, the Redis breaker and over-limit cache, configuration
                reloads

The file is reloaded on SIGHUP and when it changes; a file with errors is logged and the loaded
routes keep serving. SIGINT or SIGTERM stop accepting, finish the requests in flight (for at
most {{grace}}) and exit 0. --upstream and --config are required (exit 2).
Settings come from a flag, else the environment, else the file.
` + backendUsage

// proxy runs admit proxy until ctx is done.
func proxy(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var metricsListen string
	cfg, code, done := parseCommand("proxy", defaultProxyListen, proxyUsage, args, stdout, stderr, func(fs *flag.FlagSet, cfg *serveConfig) {
		fs.StringVar(&cfg.upstream, "upstream", "", "the `URL` of the app to forward to (http:// or https://); required")
		fs.StringVar(&metricsListen, "metrics-listen", "", "`address` to serve /healthz, /readyz and /metrics on, never the proxied one (host:port; port 0 picks a free one); default none")
		cfg.ops.localCacheSize = -1 // no --local-cache-size here: server.local_cache_max_age decides, as without the flag
	})
	if done {
		return code
	}
	upstream, err := parseUpstream(cfg.upstream)
	if err != nil {
		return badUsage(stderr, "proxy", "%v", err)
	}
	if cfg.configFile == "" {
		return badUsage(stderr, "proxy", "--config FILE is required: its routes say which requests to limit")
	}
	if _, port, err := net.SplitHostPort(metricsListen); err == nil && port != "0" && metricsListen == cfg.listen {
		fmt.Fprintf(stderr, "admit proxy: --metrics-listen %s is --listen's: the proxied port's paths are the app's; give the endpoints an address of their own\n", metricsListen)
		return exitUsage
	}
	cfg.listenSet = true // the flag or its default: the file's server.listen is admit serve's
	d, code := startDaemon(ctx, cfg, stderr)
	if d == nil {
		return code
	}
	defer d.stop()
	if s := d.svc.Config().Server; s.TLS.Enabled() || s.ClientTokensFile != "" {
		d.logger.Warn("server.tls and server.client_tokens_file are admit serve's: admit proxy serves plain HTTP and asks for no token", "file", cfg.configFile)
	}
	p, err := httpproxy.New(httpproxy.Options{Upstream: upstream, Service: d.svc, Logger: d.logger, Registerer: d.reg})
	if err != nil {
		d.logger.Error("cannot build the proxy", "error", err)
		return exitUsage
	}
	d.logger.Info("proxying", "upstream", upstream.Redacted())
	ctx, stop := context.WithCancel(ctx) // stops the metrics listener too when the proxy fails
	defer stop()
	opsDone := make(chan int, 1)
	opsDone <- exitOK
	if metricsListen != "" {
		if code := startOps(ctx, stop, d, metricsListen, opsDone); code != exitOK {
			return code
		}
	}
	srv := newServer(d.tracing.HTTP(p), d.logger)
	srv.ReadTimeout, srv.WriteTimeout = 0, 0 // streams and WebSockets last as long as they last
	code = listenAndServe(ctx, cfg.listen, srv, nil, d.logger)
	stop()
	return max(code, <-opsDone) // after the metrics listener's shutdown too
}

// startOps listens on addr and serves there, until ctx is done, the proxy's own endpoints
// (/healthz, /readyz, /metrics) over d, then shuts down within shutdownGrace and sends the exit
// code to done, which holds one code to replace. A failure of the server calls cancel, so that the
// proxy stops too. On a failure to listen it returns exitError, having logged why.
func startOps(ctx context.Context, cancel context.CancelFunc, d *daemon, addr string, done chan int) int {
	logger := d.logger
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		logger.Error("cannot listen for metrics", "error", err)
		return exitError
	}
	h := httpproxy.NewOps(httpproxy.OpsOptions{
		Ready:   func(ctx context.Context) error { return ready(ctx, d.backend) },
		Metrics: promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}),
		Logger:  logger,
		Version: moduleVersion(),
	})
	srv := newServer(h, logger)
	<-done
	go func() { done <- serveOps(ctx, cancel, ln, srv, logger) }()
	return exitOK
}

// goServe calls serve(ln) on a goroutine of its own, logs msg with ln's address, and returns the
// channel that receives what serve returns.
func goServe(ln net.Listener, serve func(net.Listener) error, logger *slog.Logger, msg string) <-chan error {
	served := make(chan error, 1)
	go func() { served <- serve(ln) }()
	logger.Info(msg, "addr", ln.Addr().String())
	return served
}

// stoppedEarly waits until ctx is done or served receives, and reports the latter: the server
// stopped on its own, which it logs as msg with the error, and answers by calling cancel.
func stoppedEarly(ctx context.Context, cancel context.CancelFunc, served <-chan error, logger *slog.Logger, msg string) bool {
	select {
	case err := <-served:
		logger.Error(msg, "error", err)
		cancel()
		return true
	case <-ctx.Done():
		return false
	}
}

// serveOps serves srv on ln until ctx is done, then shuts it down gracefully within
// shutdownGrace, and returns the exit code. A failure of Serve calls cancel.
func serveOps(ctx context.Context, cancel context.CancelFunc, ln net.Listener, srv *http.Server, logger *slog.Logger) int {
	served := goServe(ln, srv.Serve, logger, "listening for metrics")
	if stoppedEarly(ctx, cancel, served, logger, "metrics server stopped") {
		return exitError
	}
	sctx, cancelShutdown := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancelShutdown()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		logger.Error("metrics server stopped", "error", err)
		return exitError
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		logger.Error("metrics server stopped", "error", err)
		return exitError
	}
	return exitOK
}

// parseUpstream parses the --upstream URL: http or https, with a host.
func parseUpstream(s string) (*url.URL, error) {
	if s == "" {
		return nil, fmt.Errorf("--upstream URL is required: the app to forward to, such as http://127.0.0.1:3000")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--upstream %q: want an http:// or https:// URL with a host", s)
	}
	return u, nil
}
