package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"

	"github.com/admit-dev/admit/transport/httpproxy"
)

// defaultProxyListen is the listen address of admit proxy: not admit serve's, so both can run on
// one host with their defaults.
const defaultProxyListen = "127.0.0.1:8000"

// proxyUsage is the usage of admit proxy, before its flags.
const proxyUsage = `Usage: admit proxy --upstream URL --config FILE [--listen ADDR] [--redis URL] [--hmac-secret-file PATH] [--log-format text|json]

A reverse proxy in front of the app at --upstream (http:// or https://) that applies the routes of
the configuration file (docs/proxy.md): the first route whose method and path prefix match a
request decides it under the route's policies, for its subject (client_ip, header or constant),
at its cost. A request that matches no route is forwarded unlimited.

  admitted     forwarded; the response carries RateLimit-Policy and RateLimit
  limited      429 with Retry-After and the RateLimit fields; never forwarded
  malformed    400 (a bad forwarding header; a subject header missing, or from a
               peer not in server.trusted_proxies); never forwarded
  undecided    503 with Retry-After (fail closed); never forwarded
  unreachable  502 Bad Gateway, when the upstream cannot be reached

Bodies are streamed both ways, and WebSocket upgrades pass through. The leases of concurrency
policies are held until the response is written, or the upgraded connection closes.

It listens on --listen, default ` + defaultProxyListen + ` (the file's server.listen is admit serve's
and is not read). The file is reloaded on SIGHUP and when it changes; a file with errors is
logged and the loaded routes keep serving. SIGINT or SIGTERM stop accepting, finish the requests
in flight (for at most {{grace}}) and exit 0. --upstream and --config are required (exit 2).
Settings come from a flag, else the environment, else the file.
` + backendUsage

// proxy runs admit proxy until ctx is done.
func proxy(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, code, done := parseCommand("proxy", defaultProxyListen, proxyUsage, args, stdout, stderr, func(fs *flag.FlagSet, cfg *serveConfig) {
		fs.StringVar(&cfg.upstream, "upstream", "", "the `URL` of the app to forward to (http:// or https://); required")
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
	cfg.listenSet = true // the flag or its default: the file's server.listen is admit serve's
	d, code := startDaemon(ctx, cfg, stderr)
	if d == nil {
		return code
	}
	defer d.stop()
	p, err := httpproxy.New(httpproxy.Options{Upstream: upstream, Service: d.svc, Logger: d.logger})
	if err != nil {
		d.logger.Error("cannot build the proxy", "error", err)
		return exitUsage
	}
	d.logger.Info("proxying", "upstream", upstream.Redacted())
	srv := newServer(p, d.logger)
	srv.ReadTimeout, srv.WriteTimeout = 0, 0 // streams and WebSockets last as long as they last
	return listenAndServe(ctx, cfg.listen, srv, d.logger)
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
