package main

import (
	"context"
	"crypto/tls"
	"errors"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/admit-dev/admit/internal/clienttoken"
	"github.com/admit-dev/admit/internal/lograte"
	"github.com/admit-dev/admit/internal/tlsconf"
	"github.com/admit-dev/admit/policy"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// openPaths are the paths of admit serve's HTTP listener that ask for no client token: the
// probes and the scrape.
var openPaths = []string{"/healthz", "/readyz", "/metrics", "/healthcheck"}

// An exposure is how admit serve's data plane meets its network: the TLS of its HTTP and gRPC
// listeners, and the client tokens their requests must bear.
type exposure struct {
	tls    *tlsconf.Holder  // nil: plain HTTP and gRPC
	tokens *clienttoken.Set // nil: no token asked for
	// plainHTTP keeps the HTTP listener plain while gRPC has tls (--envoy-env's
	// GRPC_SERVER_USE_TLS, as envoyproxy/ratelimit has it).
	plainHTTP bool
}

// startExposure loads the TLS files and the client tokens that srv names, logs what the data
// plane asks of its clients (warning once when it listens beyond loopback and asks for neither a
// client certificate nor a token, unless server.trust_network), and reloads the files until ctx
// is done. listens are the data plane's addresses. On a file it cannot use it returns exitUsage,
// having logged why.
func startExposure(ctx context.Context, srv policy.Server, listens []string, logger *slog.Logger) (exposure, int) {
	var e exposure
	var err error
	if srv.TLS.Enabled() {
		if e.tls, err = tlsconf.New(tlsFiles(srv.TLS)); err != nil {
			logger.Error("cannot load the TLS files", "error", err)
			return e, exitUsage
		}
		logger.Info("TLS", "state", "on", "client_certificates", e.tls.MutualTLS(), "not_after", e.tls.NotAfter().UTC().Format(time.RFC3339))
	}
	if srv.ClientTokensFile != "" {
		if e.tokens, err = clienttoken.Load(srv.ClientTokensFile); err != nil {
			logger.Error("cannot load the client tokens", "error", err)
			return e, exitUsage
		}
		logger.Info("client tokens", "state", "on", "tokens", e.tokens.Len(), "open", strings.Join(openPaths, ","))
		refusals := lograte.New(logger, lograte.DefaultInterval, lograte.Kind{Level: slog.LevelWarn, Msg: "request refused: no valid client token"})
		e.tokens.OnRefused(func(ctx context.Context, via, client string) {
			refusals.Log(ctx, 0, errors.New("unauthorized"), slog.String("via", via), slog.String("client", client))
		})
	}
	if open := beyondLoopback(listens); len(open) > 0 && !srv.TrustNetwork && e.tokens == nil && (e.tls == nil || !e.tls.MutualTLS()) {
		logger.Warn("the data plane listens beyond loopback and asks its clients for no credential: anyone who reaches it can spend every subject's limits",
			"listen", strings.Join(open, ","),
			"fix", "set server.client_tokens_file or server.tls.client_ca_file, or server.trust_network: true where the network authenticates its clients (docs/security.md)")
	}
	if e.tls != nil || e.tokens != nil {
		go e.watch(ctx, logger, reloadPollInterval)
	}
	return e, exitOK
}

// tlsFiles returns the files of server.tls.
func tlsFiles(t policy.ServerTLS) tlsconf.Files {
	return tlsconf.Files{CertFile: t.CertFile, KeyFile: t.KeyFile, ClientCAFile: t.ClientCAFile}
}

// beyondLoopback returns those of addrs that listen beyond loopback: every interface (":8080",
// "0.0.0.0:8080"), an address not of loopback, or a host name other than localhost.
func beyondLoopback(addrs []string) []string {
	var out []string
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a)
		if ip := net.ParseIP(host); err != nil || host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			out = append(out, a)
		}
	}
	return out
}

// watch reloads e's files until ctx is done: on SIGHUP, and when their modification time or size
// changes, looked at every poll. A file that does not load is logged, once, and the loaded
// certificate or tokens keep serving.
func (e exposure) watch(ctx context.Context, logger *slog.Logger, poll time.Duration) {
	onPollOrHUP(ctx, poll, func(force bool) {
		if e.tls != nil {
			switch changed, err := e.tls.Reload(force); {
			case err != nil:
				logger.Error("TLS files not reloaded; the loaded certificate keeps serving", "error", err)
			case changed:
				logger.Info("TLS files reloaded", "client_certificates", e.tls.MutualTLS(), "not_after", e.tls.NotAfter().UTC().Format(time.RFC3339))
			}
		}
		if e.tokens != nil {
			switch changed, err := e.tokens.Reload(force); {
			case err != nil:
				logger.Error("client tokens not reloaded; the loaded ones keep serving", "error", err)
			case changed:
				logger.Info("client tokens reloaded", "tokens", e.tokens.Len())
			}
		}
	})
}

// handler returns h behind the client tokens, if any.
func (e exposure) handler(h http.Handler) http.Handler {
	if e.tokens == nil {
		return h
	}
	return e.tokens.HTTP(h, openPaths...)
}

// grpcOptions returns the gRPC server's options of e: its TLS credentials and its token check.
func (e exposure) grpcOptions() []grpc.ServerOption {
	var opts []grpc.ServerOption
	if e.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(e.tls.Config())))
	}
	if e.tokens != nil {
		opts = append(opts, e.tokens.GRPC()...)
	}
	return opts
}

// tlsConfig returns the HTTP listener's TLS configuration, or nil for plain HTTP.
func (e exposure) tlsConfig() *tls.Config {
	if e.tls == nil || e.plainHTTP {
		return nil
	}
	return e.tls.Config()
}

// listenAndServe listens on addr and serves srv there, over TLS when tlsConfig is not nil, until
// ctx is done, and returns the exit code.
func listenAndServe(ctx context.Context, addr string, srv *http.Server, tlsConfig *tls.Config, logger *slog.Logger) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		logger.Error("cannot listen", "error", err)
		return exitError
	}
	if tlsConfig != nil {
		srv.TLSConfig = tlsConfig // its NextProtos offer h2: net/http serves HTTP/2 too
		srv.ErrorLog = log.New(newErrorLog(logger), "", 0)
		ln = tls.NewListener(ln, tlsConfig)
	}
	if err := runServer(ctx, ln, srv, shutdownGrace, logger); err != nil {
		logger.Error("server stopped", "error", err)
		return exitError
	}
	return exitOK
}

// An errorLog is the http.Server error log of a TLS listener. Its TLS handshake errors (a TCP
// probe or a scanner that connects and leaves, a client without the right certificate) are
// logged at most once per lograte.DefaultInterval, with the count of the others; every other
// line at WARN, as newServer's log does.
type errorLog struct {
	logger     *slog.Logger
	handshakes *lograte.Limiter
}

// handshakePrefix starts net/http's log line of a failed TLS handshake.
const handshakePrefix = "http: TLS handshake error from "

// newErrorLog returns the errorLog of logger.
func newErrorLog(logger *slog.Logger) errorLog {
	return errorLog{logger: logger, handshakes: lograte.New(logger, lograte.DefaultInterval, lograte.Kind{Level: slog.LevelWarn, Msg: "TLS handshake failed"})}
}

// Write logs one line of net/http's.
func (w errorLog) Write(p []byte) (int, error) {
	line := strings.TrimSuffix(string(p), "\n")
	if rest, ok := strings.CutPrefix(line, handshakePrefix); ok {
		w.handshakes.Log(context.Background(), 0, errors.New(rest))
	} else {
		w.logger.Warn(line)
	}
	return len(p), nil
}
