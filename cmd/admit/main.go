// Command admit serves the admit rate limiter over HTTP.
//
// Usage:
//
//	admit serve [--listen ADDR] [--redis URL] [--hmac-secret-file PATH]
//	admit config validate FILE
//	admit version
//	admit help
//
// Run "admit help" for details.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/logrelay"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/transport/httpapi"
)

// demoLimit returns the policy of GET /demo, the origin design's: 3 requests per 10 seconds, in a
// fixed window. Its keys are in version admit.DefaultVersion.
func demoLimit() admit.Limit {
	return admit.Limit{Name: "demo", Algorithm: admit.FixedWindow, Rate: 3, Period: 10 * time.Second}
}

// Where admit serve finds its HMAC secret, and how long a random one is.
const (
	secretEnv       = "ADMIT_HMAC_SECRET"
	secretFileFlag  = "hmac-secret-file"
	randomSecretLen = 32
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command failed
	exitUsage = 2 // the command line was wrong
)

// Defaults of admit serve.
const (
	defaultListen = "127.0.0.1:8080"
	// shutdownGrace bounds how long a stopping server waits for requests in flight.
	shutdownGrace = 10 * time.Second
	// logFlushTimeout bounds how long a stopping server waits for its log to reach stderr, which
	// may have stalled.
	logFlushTimeout = 2 * time.Second
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, restore the default handling: a second one kills at once.
		<-ctx.Done()
		stop()
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `admit is a rate limiter on Redis, served over HTTP.

Usage:

	admit <command> [arguments]

Commands:

	serve     serve the HTTP API (GET /demo, GET /healthz)
	config    check a configuration file: admit config validate FILE
	version   print the version
	help      print this help

Run "admit <command> --help" for a command's flags.
`

// run runs the admit command line args (without the program name) and returns the exit code.
// It stops serving when ctx is done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		return serve(ctx, rest, stdout, stderr)
	case "config":
		return config(rest, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, versionString())
		return exitOK
	case "help", "--help", "-help", "-h":
		if len(rest) > 0 && rest[0] == "serve" {
			return serve(ctx, []string{"--help"}, stdout, stderr)
		}
		if len(rest) > 0 && rest[0] == "config" {
			return config([]string{"--help"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "admit: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
}

// versionString reports the module version and the Go version the binary was built with.
func versionString() string {
	v := "(devel)"
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		v = info.Main.Version
	}
	return fmt.Sprintf("admit %s %s %s/%s", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// serveConfig is the parsed command line of admit serve. It never holds the secret itself.
type serveConfig struct {
	listen        string
	redisURL      string // "" = in-memory backend
	secretFile    string // the HMAC secret's file, if secretFileSet
	secretFileSet bool   // --hmac-secret-file was given: it wins over ADMIT_HMAC_SECRET
}

// parseServe parses the flags of admit serve. On --help it writes the usage to stdout and returns
// done; on a bad command line it writes the error and the usage to stderr and returns exitUsage.
func parseServe(args []string, stdout, stderr io.Writer) (cfg serveConfig, code int, done bool) {
	fs := flag.NewFlagSet("admit serve", flag.ContinueOnError)
	fs.StringVar(&cfg.listen, "listen", defaultListen, "`address` to serve HTTP on (host:port; port 0 picks a free one)")
	fs.StringVar(&cfg.redisURL, "redis", "", "Redis `URL` (redis:// or rediss://); default $REDIS_URL, else the in-memory backend")
	fs.StringVar(&cfg.secretFile, secretFileFlag, "", "read the HMAC secret from the file at `PATH` (one trailing newline is dropped); default $"+secretEnv)
	printUsage := func(w io.Writer) {
		fmt.Fprint(w, `Usage: admit serve [--listen ADDR] [--redis URL] [--hmac-secret-file PATH]

Serves the admit HTTP API until SIGINT or SIGTERM, then finishes the requests in flight (for at
most `+shutdownGrace.String()+`) and exits 0.

  GET /demo     the demo: one account, 3 requests per 10s; 200, then 429 with Retry-After,
                or 503 when the limiter cannot decide
  GET /healthz  200 while the process is alive

Without --redis or REDIS_URL, limits are kept in this process's memory and not shared.

The HMAC secret turns subjects into keys, so that no client can name its own counter and no
personal data reaches Redis: --hmac-secret-file PATH, else $`+secretEnv+`, at least `+fmt.Sprint(admit.MinSecretLen)+`
bytes, never logged. With --redis or REDIS_URL it is required, and every instance on one Redis
must have the same one, or they do not share limits: without it admit serve refuses to start
(exit 2). In memory, without one, it uses a random secret of its own.

Flags:
`)
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	fs.SetOutput(io.Discard) // errors and usage are printed below, each to its stream
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout)
			return cfg, exitOK, true
		}
		fmt.Fprintf(stderr, "admit serve: %v\n", err)
		printUsage(stderr)
		return cfg, exitUsage, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "admit serve: unexpected argument %q\n", fs.Arg(0))
		printUsage(stderr)
		return cfg, exitUsage, true
	}
	redisSet := false
	fs.Visit(func(f *flag.Flag) {
		redisSet = redisSet || f.Name == "redis"
		cfg.secretFileSet = cfg.secretFileSet || f.Name == secretFileFlag
	})
	if !redisSet {
		cfg.redisURL = os.Getenv("REDIS_URL")
	}
	return cfg, exitOK, false
}

// hmacSecret returns the HMAC secret that cfg and the environment name, and where it came from:
// the file of --hmac-secret-file, less one trailing newline; else $ADMIT_HMAC_SECRET; else nil.
// Its errors never hold the secret.
func hmacSecret(cfg serveConfig) (secret []byte, source string, err error) {
	switch {
	case cfg.secretFileSet:
		source = "--" + secretFileFlag
		if cfg.secretFile == "" {
			return nil, "", fmt.Errorf("%s: empty path", source)
		}
		if secret, err = os.ReadFile(cfg.secretFile); err != nil {
			return nil, "", fmt.Errorf("%s: %w", source, err) // the path, never the contents
		}
		if s, ok := bytes.CutSuffix(secret, []byte("\n")); ok {
			secret = bytes.TrimSuffix(s, []byte("\r")) // a CRLF too
		}
	case os.Getenv(secretEnv) != "":
		secret, source = []byte(os.Getenv(secretEnv)), secretEnv
	default:
		return nil, "", nil
	}
	if len(secret) < admit.MinSecretLen {
		return nil, "", fmt.Errorf("the HMAC secret from %s is %d bytes; want at least %d", source, len(secret), admit.MinSecretLen)
	}
	return secret, source, nil
}

// keyBuilder returns the KeyBuilder of the HMAC secret that cfg names, and logs where the secret came
// from, never the secret. Without a secret it refuses a Redis backend, and uses a random one for
// the in-memory backend.
func keyBuilder(cfg serveConfig, logger *slog.Logger) (*admit.KeyBuilder, error) {
	secret, source, err := hmacSecret(cfg)
	switch {
	case err != nil:
		return nil, err
	case secret == nil && cfg.redisURL != "":
		return nil, fmt.Errorf("no HMAC secret: with --redis or REDIS_URL, set %s or --%s PATH "+
			"to a secret of at least %d bytes that every instance on the Redis shares; "+
			"instances with different secrets make different keys and do not share limits",
			secretEnv, secretFileFlag, admit.MinSecretLen)
	case secret == nil:
		secret = make([]byte, randomSecretLen)
		rand.Read(secret) // never fails
		logger.Info("HMAC secret", "source", "random",
			"note", "a random secret of this process only; set "+secretEnv+" or --"+secretFileFlag+" to choose one")
	default:
		logger.Info("HMAC secret", "source", source)
	}
	return admit.NewKeyBuilder(secret)
}

// serve runs admit serve until ctx is done.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, code, done := parseServe(args, stdout, stderr)
	if done {
		return code
	}
	// The log goes to stderr through a queue, so a stalled stderr (a full pipe nobody reads) costs
	// log lines, counted and reported once it drains, but never holds up a request or the exit.
	relay := logrelay.New(stderr, logrelay.Options{DroppedLine: droppedLine})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), logFlushTimeout)
		defer cancel()
		relay.Close(ctx) // on error, stderr is stalled: there is nowhere left to say so
	}()
	logger := slog.New(slog.NewTextHandler(relay, nil))

	keys, err := keyBuilder(cfg, logger)
	if err != nil {
		logger.Error("no usable HMAC secret", "error", err)
		return exitUsage
	}
	store, closeStore, err := openStore(cfg, logger)
	if err != nil {
		logger.Error("cannot open the backend", "error", err)
		return exitUsage
	}
	defer closeStore()

	api, err := httpapi.New(httpapi.Options{Demo: admit.NewLimiter(store, keys, demoLimit()), Logger: logger})
	if err != nil {
		logger.Error("cannot build the HTTP API", "error", err)
		return exitError
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		logger.Error("cannot listen", "error", err)
		return exitError
	}
	if err := serveHTTP(ctx, ln, api, shutdownGrace, logger); err != nil {
		logger.Error("server stopped", "error", err)
		return exitError
	}
	return exitOK
}

// droppedLine is the log line that reports n lines dropped because stderr did not keep up.
func droppedLine(n int64) []byte {
	var b bytes.Buffer
	slog.New(slog.NewTextHandler(&b, nil)).Warn("log lines dropped", "dropped", n, "reason", "stderr did not keep up")
	return b.Bytes()
}

// openStore opens the backend that cfg names and logs which one it is.
func openStore(cfg serveConfig, logger *slog.Logger) (admit.Store, func(), error) {
	if cfg.redisURL == "" {
		s := memstore.New(memstore.Options{})
		logger.Info("backend", "backend", "memory", "note", "limits are not shared with other processes")
		return s, func() { s.Close() }, nil
	}
	s, err := redisstore.New(redisstore.Config{URL: cfg.redisURL})
	if err != nil {
		return nil, nil, err // redisstore redacts the URL's password from its errors
	}
	logger.Info("backend", "backend", "redis", "url", redisstore.RedactURL(cfg.redisURL))
	return s, func() { s.Close() }, nil
}

// serveHTTP serves h on ln until ctx is done, then shuts down gracefully: it stops accepting,
// lets requests in flight finish for at most grace, and returns nil if they all did.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration, logger *slog.Logger) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.Info("listening", "addr", ln.Addr().String())

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
