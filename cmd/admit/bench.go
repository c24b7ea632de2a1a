package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/benchrun"
	"github.com/admit-dev/admit/internal/loadgen"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/service"
)

// Exit codes of admit bench, besides exitOK and exitUsage.
const (
	benchUnreachable = 3 // the target did not answer the probe
	benchInterrupted = 1 // SIGINT or SIGTERM: the report covers the part that ran
)

// Defaults of admit bench.
const (
	defaultBenchTarget      = "http://" + defaultListen
	defaultBenchConcurrency = 16
	defaultBenchDuration    = 10 * time.Second
	defaultBenchKeys        = 1000
	defaultBenchTimeout     = 5 * time.Second
)

const benchUsage = `Usage: admit bench [--target URL|memory] [--rate N/s | --concurrency N] [--duration D]
                   [--keys N | --hot-key] [--policy P …] [--config FILE]
                   [--domain D --descriptor K=V,K={key}] [--json]
                   [--client-token-file PATH] [--ca-file PATH] [--cert-file PATH --key-file PATH]

A load generator for admit: it sends decisions to a running admit serve, or makes them on a
store directly, for --duration, and reports decisions/s, the counts of allowed, limited, errors
and dropped requests, and the latency quantiles (p50/p90/p99/p99.9/max).

Targets (--target):
  http://HOST:PORT    admit serve's POST /v1/check, {"policy":P,"key":K}: 200 is allowed,
                      429 limited, anything else an error; https:// over TLS
  grpc://HOST:PORT    admit serve --envoy-config's ShouldRateLimit (Envoy RLS v3), in --domain,
                      one descriptor of --descriptor's entries, where {key} in a value is the key;
                      grpcs:// over TLS
  redis://… rediss:// a Redis (or unix://), through redisstore, with the policies of --config (else
                      demo's, and bench: 10^15 an hour, which admits every request)
  memory              an in-memory store in this process (memstore), likewise

Policies: --policy P (repeatable) names them. The default is demo (3 per 10s, the one policy of an
admit serve without --config) for an http target, and bench for a store target without --config.
A run whose decisions are mostly rejections measures rejections: on Redis, admit serve answers a
full key's rejections from its over-limit cache, without Redis, for up to
server.local_cache_max_age; the report counts them (cache_hits, read from the target's /metrics)
and says so in a note. Give a policy that admits the load to measure decisions on the backend.
The store targets use a random HMAC secret: each run's keys are new. --redis URL is --target URL.

Load: --rate N (or N/s) is an open loop: N requests a second on a fixed schedule, whatever the
answers' latency, each latency measured from the time the request was due (no coordinated
omission); a request due while --max-outstanding are in flight is dropped, and counted.
--concurrency N is a closed loop: N workers, each sending its next request when its last one is
answered. Without either: --concurrency ` + "{{concurrency}}" + `.

A secured admit serve (docs/security.md): --client-token-file PATH sends its token (one trailing
newline dropped) as Authorization: Bearer; an https:// or grpcs:// target trusts the CAs of
--ca-file PATH (else the system's), and presents --cert-file and --key-file to one that asks for
a client certificate.

Keys: --keys N spreads the requests over N keys in turn; --hot-key sends every one on one key.
The keys are the --key-prefix (random for each run by default) and a number, or "hot".

Progress goes to stderr: a line rewritten in place on a terminal, else a line every ` + "{{plain}}" + `.
The report goes to stdout, as text or, with --json, as one JSON object.

Exit status:
  0  the run is done
  1  interrupted (SIGINT, SIGTERM): the report covers the part that ran
  2  a bad command line, or a policy the target does not know
  3  the target is unreachable, or cannot decide

Flags:
`

// benchConfig is the parsed command line of admit bench: the run, and what the command does with
// it.
type benchConfig struct {
	benchrun.Config
	configFile string // store targets: the policies' configuration
	json       bool   // write the report as JSON
	tokenFile  string // --client-token-file
	caFile     string // --ca-file
	certFile   string // --cert-file
	keyFile    string // --key-file
}

// parseBench parses the flags of admit bench. On --help it writes the usage to stdout and returns
// done; on a bad command line it writes the error to stderr and returns exitUsage.
func parseBench(args []string, stdout, stderr io.Writer) (cfg benchConfig, code int, done bool) {
	fs := flag.NewFlagSet("admit bench", flag.ContinueOnError)
	var redisURL, rate, descriptor string
	var policies policyList
	fs.StringVar(&cfg.Target, "target", defaultBenchTarget, "what to load: `URL` http(s)://HOST:PORT, grpc(s)://HOST:PORT, redis://…, rediss://… or unix://…, or memory")
	fs.StringVar(&redisURL, "redis", "", "Redis `URL`: the same as --target URL")
	fs.StringVar(&rate, "rate", "", "open loop: `N` requests a second (N or N/s), on a fixed schedule")
	fs.IntVar(&cfg.Concurrency, "concurrency", 0, "closed loop: `N` workers, each waiting for its answer before its next request (default "+strconv.Itoa(defaultBenchConcurrency)+" without --rate)")
	fs.IntVar(&cfg.MaxOutstanding, "max-outstanding", 0, "open loop: at most `N` requests in flight; a request due beyond is dropped (default "+strconv.Itoa(loadgen.DefaultMaxOutstanding)+")")
	fs.DurationVar(&cfg.Duration, "duration", defaultBenchDuration, "how long to send requests for")
	fs.IntVar(&cfg.Keys, "keys", defaultBenchKeys, "spread the requests over `N` keys, in turn")
	fs.BoolVar(&cfg.HotKey, "hot-key", false, "send every request on one key")
	fs.StringVar(&cfg.KeyPrefix, "key-prefix", "", "the keys' `PREFIX` (default bench-, 6 random hex digits, and -)")
	fs.Var(&policies, "policy", "the policy's `NAME` (http and store targets); repeat it to check several at once (default demo for http, bench for a store target without --config)")
	fs.StringVar(&cfg.configFile, "config", "", "store targets: the configuration `FILE` of the policies (and server.redis_tls); default the demo's policy")
	fs.StringVar(&cfg.Domain, "domain", "", "grpc target: the rate limit `DOMAIN` (required)")
	fs.StringVar(&descriptor, "descriptor", "", "grpc target: the descriptor's `ENTRIES`, KEY=VALUE,KEY=VALUE…, where {key} in a value is the key (required)")
	fs.DurationVar(&cfg.Timeout, "timeout", defaultBenchTimeout, "give up on one request after this long, and count an error (a Redis target's command timeout too)")
	fs.BoolVar(&cfg.json, "json", false, "write the report as JSON")
	fs.StringVar(&cfg.tokenFile, "client-token-file", "", "http and grpc targets: send the client token in the file at `PATH` as Authorization: Bearer")
	fs.StringVar(&cfg.caFile, "ca-file", "", "https and grpcs targets: trust the CAs of the PEM file at `PATH` (default the system's)")
	fs.StringVar(&cfg.certFile, "cert-file", "", "https and grpcs targets: present the client certificate of the PEM file at `PATH`, with --key-file")
	fs.StringVar(&cfg.keyFile, "key-file", "", "https and grpcs targets: the client certificate's key, a PEM file at `PATH`")
	usage := strings.NewReplacer("{{concurrency}}", strconv.Itoa(defaultBenchConcurrency), "{{plain}}", benchrun.ProgressPlainInterval.String()).Replace(benchUsage)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			printFlags(stdout, fs)
			return cfg, exitOK, true
		}
		return cfg, badUsage(stderr, "bench", "%s", flagError(err)), true
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg.Policies = policies
	if err := cfg.check(fs, set, redisURL, rate, descriptor); err != nil {
		return cfg, badUsage(stderr, "bench", "%v", err), true
	}
	return cfg, exitOK, false
}

// check completes and checks cfg, parsed by fs, whose flags given are set; redisURL, rate and
// descriptor are the flags of those names.
func (cfg *benchConfig) check(fs *flag.FlagSet, set map[string]bool, redisURL, rate, descriptor string) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if set["redis"] {
		if set["target"] {
			return errors.New("--redis URL is --target URL: give one of them")
		}
		cfg.Target = redisURL
	}
	kind, err := targetKind(cfg.Target)
	if err != nil {
		return err
	}
	cfg.Kind = kind
	scheme, host := "", ""
	if u, err := url.Parse(cfg.Target); err == nil { // targetKind parsed it
		scheme, host = u.Scheme, u.Host
	}
	if kind == "grpc" {
		cfg.GRPCAddr = host
	}
	if err := cfg.secure(scheme == "https" || scheme == "grpcs"); err != nil {
		return err
	}
	switch {
	case set["rate"] && set["concurrency"]:
		return errors.New("--rate (open loop) and --concurrency (closed loop) exclude each other")
	case set["rate"]:
		r, err := strconv.ParseFloat(strings.TrimSuffix(rate, "/s"), 64)
		if err != nil || !(r > 0) || r > 1e9 {
			return fmt.Errorf("--rate %q: want a number of requests a second above 0, such as 1000 or 1000/s", rate)
		}
		cfg.Rate = r
	case set["concurrency"]:
		if cfg.Concurrency <= 0 {
			return fmt.Errorf("--concurrency %d: want at least 1 worker", cfg.Concurrency)
		}
	default:
		cfg.Concurrency = defaultBenchConcurrency
	}
	switch {
	case set["max-outstanding"] && cfg.Rate == 0:
		return errors.New("--max-outstanding bounds an open loop: it goes with --rate")
	case cfg.MaxOutstanding < 0:
		return fmt.Errorf("--max-outstanding %d: want at least 1", cfg.MaxOutstanding)
	case cfg.Duration <= 0:
		return fmt.Errorf("--duration %v: want more than 0", cfg.Duration)
	case cfg.Timeout <= 0:
		return fmt.Errorf("--timeout %v: want more than 0", cfg.Timeout)
	case set["keys"] && cfg.HotKey:
		return errors.New("--keys N and --hot-key exclude each other")
	case cfg.Keys <= 0:
		return fmt.Errorf("--keys %d: want at least 1", cfg.Keys)
	}
	if cfg.HotKey {
		cfg.Keys = 1
	}
	if !set["key-prefix"] {
		b := make([]byte, 3)
		rand.Read(b) // never fails
		cfg.KeyPrefix = "bench-" + hex.EncodeToString(b) + "-"
	}
	if cfg.Kind == "grpc" {
		return cfg.checkGRPC(set, descriptor)
	}
	switch {
	case set["domain"] || set["descriptor"]:
		return errors.New("--domain and --descriptor are for a grpc:// target; the others take --policy")
	case set["config"] && cfg.Kind == "http":
		return errors.New("--config is for a store target (redis:// or memory); the service has its own configuration")
	}
	if len(cfg.Policies) == 0 {
		cfg.Policies = []string{demoLimit().Name} // the one policy of an admit serve without --config
		if cfg.Kind != "http" && cfg.configFile == "" {
			cfg.Policies = []string{benchPolicy}
		}
	}
	return nil
}

// benchPolicy is the default policy of a store target without --config: a limit no run reaches,
// so that every decision admits and writes, rather than the rejections of a full key.
const benchPolicy = "bench"

// benchStoreConfig is the configuration of a store target without --config: the demo's policy, and
// benchPolicy.
const benchStoreConfig = demoConfig + `  - name: ` + benchPolicy + `
    algorithm: fixed_window
    limit: 1000000000000000
    window: 1h
`

// checkGRPC checks the flags of a grpc target.
func (cfg *benchConfig) checkGRPC(set map[string]bool, descriptor string) error {
	switch {
	case set["policy"] || set["config"]:
		return errors.New("--policy and --config are for the http and store targets; a grpc:// target takes --domain and --descriptor")
	case cfg.Domain == "" || descriptor == "":
		return errors.New("a grpc:// target needs --domain D and --descriptor KEY=VALUE[,KEY=VALUE...]")
	}
	hasKey := false
	for part := range strings.SplitSeq(descriptor, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || k == "" || v == "" {
			return fmt.Errorf("--descriptor %q: want KEY=VALUE entries separated by commas, such as user={key}", descriptor)
		}
		hasKey = hasKey || strings.Contains(v, benchrun.KeyPlaceholder)
		cfg.Descriptor = append(cfg.Descriptor, benchrun.Entry{Key: k, Value: v})
	}
	if !hasKey && !cfg.HotKey {
		return fmt.Errorf("--descriptor %q has no %s in a value, so every request is on one key: put %s in a value, or give --hot-key", descriptor, benchrun.KeyPlaceholder, benchrun.KeyPlaceholder)
	}
	return nil
}

// targetKind returns the kind of the target t: http, grpc, redis or memory.
func targetKind(t string) (string, error) {
	if t == "memory" {
		return "memory", nil
	}
	want := fmt.Errorf("--target %q: want http://HOST:PORT, grpc://HOST:PORT, redis://..., rediss://..., unix://... or memory (https://, grpcs:// over TLS)", showTarget(t))
	if !strings.Contains(t, "://") {
		return "", want
	}
	u, err := url.Parse(t)
	if err != nil {
		return "", fmt.Errorf("--target: %v", redactErr(err, t))
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return "", fmt.Errorf("--target %q: no host", showTarget(t))
		}
		return "http", nil
	case "grpc", "grpcs":
		if u.Host == "" || (u.Path != "" && u.Path != "/") {
			return "", fmt.Errorf("--target %q: want %s://HOST:PORT", t, u.Scheme)
		}
		return "grpc", nil
	case "redis", "rediss", "unix":
		return "redis", nil
	}
	return "", want
}

// showTarget returns the target t to show: without its password, if it has one.
func showTarget(t string) string {
	if !strings.Contains(t, "@") {
		return t
	}
	return redisstore.RedactURL(t)
}

// redactErr returns err, with the URL t's password hidden.
func redactErr(err error, t string) string {
	return strings.ReplaceAll(err.Error(), t, redisstore.RedactURL(t))
}

// bench runs admit bench with args, and returns its exit code.
func bench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, code, done := parseBench(args, stdout, stderr)
	if done {
		return code
	}
	target, err := newBenchTarget(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "admit bench: %v\n", err)
		return exitUsage
	}
	defer target.Close()
	probeCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	err = target.Probe(probeCtx)
	cancel()
	var usage benchrun.UsageError
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "admit bench: interrupted before the load")
		return benchInterrupted
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "admit bench: %v\n", err)
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "admit bench: %s unreachable: %v\n", redisstore.RedactURL(cfg.Target), err)
		return benchUnreachable
	}

	report, err := benchrun.Run(ctx, cfg.Config, target, stderr)
	if err != nil { // a config parseBench let through
		fmt.Fprintf(stderr, "admit bench: %v\n", err)
		return exitUsage
	}
	if cfg.json {
		out, _ := json.MarshalIndent(report, "", "  ")
		fmt.Fprintf(stdout, "%s\n", out)
	} else {
		fmt.Fprint(stdout, report.Text())
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "admit bench: interrupted; the report covers the part that ran")
		return benchInterrupted
	}
	return exitOK
}

// newBenchTarget returns the target of cfg.
func newBenchTarget(cfg benchConfig) (benchrun.Target, error) {
	switch cfg.Kind {
	case "http":
		return benchrun.NewHTTP(cfg.Config), nil
	case "grpc":
		return benchrun.NewGRPC(cfg.Config)
	}
	return newStoreTarget(cfg)
}

// newStoreTarget returns the store target of cfg: a service in this process, with the policies of
// cfg.configFile (or the built-in ones), on the Redis of cfg.Target or in memory.
func newStoreTarget(cfg benchConfig) (benchrun.Target, error) {
	file, err := loadPolicies(cfg.configFile)
	if cfg.configFile == "" {
		file, err = policy.Parse("built-in", []byte(benchStoreConfig))
	}
	if err != nil {
		return nil, err
	}
	secret := make([]byte, randomSecretLen)
	rand.Read(secret) // never fails
	keys, err := admit.NewKeyBuilder(secret)
	if err != nil {
		return nil, err
	}
	var store admit.Store
	var closeStore func()
	if cfg.Kind == "redis" {
		// As openStore, but a decision may take --timeout, as a request to a service may: the
		// default command timeout of 200ms would count a loaded machine's slow answers as errors.
		tls := file.Server.RedisTLS
		s, err := redisstore.New(redisstore.Config{URL: cfg.Target, CommandTimeout: cfg.Timeout,
			CAFile: tls.CAFile, CertFile: tls.CertFile, KeyFile: tls.KeyFile, ServerName: tls.ServerName})
		if err != nil {
			return nil, err
		}
		store, closeStore = s, func() { s.Close() }
	} else {
		store, closeStore, _ = openStore(serveConfig{}, slog.New(slog.NewTextHandler(io.Discard, nil))) // in memory: never fails
	}
	svc, err := service.New(store, keys, file)
	if err != nil {
		closeStore()
		return nil, err
	}
	return benchrun.NewService(svc, cfg.Policies, cfg.Timeout, closeStore), nil
}
