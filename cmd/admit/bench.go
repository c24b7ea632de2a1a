package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/loadgen"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/httpapi"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
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
	// keyPlaceholder, in a value of --descriptor, stands for the bench's key.
	keyPlaceholder = "{key}"
)

// How often the progress line is written: rewritten in place on a terminal, a line at a time
// otherwise (a log, CI).
const (
	progressTTYInterval   = 500 * time.Millisecond
	progressPlainInterval = 5 * time.Second
)

// The outcomes of one request to the target, as loadgen counts them; anything else is an error,
// named "error: " and its kind.
const (
	outcomeAllowed = "allowed"
	outcomeLimited = "limited"
)

const benchUsage = `Usage: admit bench [--target URL|memory] [--rate N/s | --concurrency N] [--duration D]
                   [--keys N | --hot-key] [--policy P …] [--config FILE]
                   [--domain D --descriptor K=V,K={key}] [--json]

A load generator for admit: it sends decisions to a running admit serve, or makes them on a
store directly, for --duration, and reports decisions/s, the counts of allowed, limited, errors
and dropped requests, and the latency quantiles (p50/p90/p99/p99.9/max).

Targets (--target):
  http://HOST:PORT    admit serve's POST /v1/check, {"policy":P,"key":K}: 200 is allowed,
                      429 limited, anything else an error
  grpc://HOST:PORT    admit serve --envoy-config's ShouldRateLimit (Envoy RLS v3), in --domain,
                      one descriptor of --descriptor's entries, where {key} in a value is the key
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

// benchConfig is the parsed command line of admit bench.
type benchConfig struct {
	target         string // as given
	kind           string // http, grpc, redis or memory
	grpcAddr       string // HOST:PORT of a grpc target
	rate           float64
	concurrency    int
	maxOutstanding int
	duration       time.Duration
	keys           int
	hotKey         bool
	keyPrefix      string
	policies       []string
	configFile     string
	domain         string
	descriptor     []benchEntry
	timeout        time.Duration
	json           bool
}

// A benchEntry is one entry of --descriptor; {key} in Value stands for the key.
type benchEntry struct{ Key, Value string }

// parseBench parses the flags of admit bench. On --help it writes the usage to stdout and returns
// done; on a bad command line it writes the error to stderr and returns exitUsage.
func parseBench(args []string, stdout, stderr io.Writer) (cfg benchConfig, code int, done bool) {
	fs := flag.NewFlagSet("admit bench", flag.ContinueOnError)
	var redisURL, rate, descriptor string
	var policies policyList
	fs.StringVar(&cfg.target, "target", defaultBenchTarget, "what to load: `URL` http://HOST:PORT, grpc://HOST:PORT, redis://…, rediss://… or unix://…, or memory")
	fs.StringVar(&redisURL, "redis", "", "Redis `URL`: the same as --target URL")
	fs.StringVar(&rate, "rate", "", "open loop: `N` requests a second (N or N/s), on a fixed schedule")
	fs.IntVar(&cfg.concurrency, "concurrency", 0, "closed loop: `N` workers, each waiting for its answer before its next request (default "+strconv.Itoa(defaultBenchConcurrency)+" without --rate)")
	fs.IntVar(&cfg.maxOutstanding, "max-outstanding", 0, "open loop: at most `N` requests in flight; a request due beyond is dropped (default "+strconv.Itoa(loadgen.DefaultMaxOutstanding)+")")
	fs.DurationVar(&cfg.duration, "duration", defaultBenchDuration, "how long to send requests for")
	fs.IntVar(&cfg.keys, "keys", defaultBenchKeys, "spread the requests over `N` keys, in turn")
	fs.BoolVar(&cfg.hotKey, "hot-key", false, "send every request on one key")
	fs.StringVar(&cfg.keyPrefix, "key-prefix", "", "the keys' `PREFIX` (default bench-, 6 random hex digits, and -)")
	fs.Var(&policies, "policy", "the policy's `NAME` (http and store targets); repeat it to check several at once (default demo for http, bench for a store target without --config)")
	fs.StringVar(&cfg.configFile, "config", "", "store targets: the configuration `FILE` of the policies (and server.redis_tls); default the demo's policy")
	fs.StringVar(&cfg.domain, "domain", "", "grpc target: the rate limit `DOMAIN` (required)")
	fs.StringVar(&descriptor, "descriptor", "", "grpc target: the descriptor's `ENTRIES`, KEY=VALUE,KEY=VALUE…, where {key} in a value is the key (required)")
	fs.DurationVar(&cfg.timeout, "timeout", defaultBenchTimeout, "give up on one request after this long, and count an error (a Redis target's command timeout too)")
	fs.BoolVar(&cfg.json, "json", false, "write the report as JSON")
	usage := strings.NewReplacer("{{concurrency}}", strconv.Itoa(defaultBenchConcurrency), "{{plain}}", progressPlainInterval.String()).Replace(benchUsage)
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
	cfg.policies = policies
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
		cfg.target = redisURL
	}
	kind, err := targetKind(cfg.target)
	if err != nil {
		return err
	}
	cfg.kind = kind
	if kind == "grpc" {
		u, _ := url.Parse(cfg.target) // targetKind parsed it
		cfg.grpcAddr = u.Host
	}
	switch {
	case set["rate"] && set["concurrency"]:
		return errors.New("--rate (open loop) and --concurrency (closed loop) exclude each other")
	case set["rate"]:
		r, err := strconv.ParseFloat(strings.TrimSuffix(rate, "/s"), 64)
		if err != nil || !(r > 0) || r > 1e9 {
			return fmt.Errorf("--rate %q: want a number of requests a second above 0, such as 1000 or 1000/s", rate)
		}
		cfg.rate = r
	case set["concurrency"]:
		if cfg.concurrency <= 0 {
			return fmt.Errorf("--concurrency %d: want at least 1 worker", cfg.concurrency)
		}
	default:
		cfg.concurrency = defaultBenchConcurrency
	}
	switch {
	case set["max-outstanding"] && cfg.rate == 0:
		return errors.New("--max-outstanding bounds an open loop: it goes with --rate")
	case cfg.maxOutstanding < 0:
		return fmt.Errorf("--max-outstanding %d: want at least 1", cfg.maxOutstanding)
	case cfg.duration <= 0:
		return fmt.Errorf("--duration %v: want more than 0", cfg.duration)
	case cfg.timeout <= 0:
		return fmt.Errorf("--timeout %v: want more than 0", cfg.timeout)
	case set["keys"] && cfg.hotKey:
		return errors.New("--keys N and --hot-key exclude each other")
	case cfg.keys <= 0:
		return fmt.Errorf("--keys %d: want at least 1", cfg.keys)
	}
	if cfg.hotKey {
		cfg.keys = 1
	}
	if !set["key-prefix"] {
		b := make([]byte, 3)
		rand.Read(b) // never fails
		cfg.keyPrefix = "bench-" + hex.EncodeToString(b) + "-"
	}
	if cfg.kind == "grpc" {
		return cfg.checkGRPC(set, descriptor)
	}
	switch {
	case set["domain"] || set["descriptor"]:
		return errors.New("--domain and --descriptor are for a grpc:// target; the others take --policy")
	case set["config"] && cfg.kind == "http":
		return errors.New("--config is for a store target (redis:// or memory); the service has its own configuration")
	}
	if len(cfg.policies) == 0 {
		cfg.policies = []string{demoLimit().Name} // the one policy of an admit serve without --config
		if cfg.kind != "http" && cfg.configFile == "" {
			cfg.policies = []string{benchPolicy}
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
	case cfg.domain == "" || descriptor == "":
		return errors.New("a grpc:// target needs --domain D and --descriptor KEY=VALUE[,KEY=VALUE…]")
	}
	hasKey := false
	for part := range strings.SplitSeq(descriptor, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || k == "" || v == "" {
			return fmt.Errorf("--descriptor %q: want KEY=VALUE entries separated by commas, such as user={key}", descriptor)
		}
		hasKey = hasKey || strings.Contains(v, keyPlaceholder)
		cfg.descriptor = append(cfg.descriptor, benchEntry{k, v})
	}
	if !hasKey && !cfg.hotKey {
		return fmt.Errorf("--descriptor %q has no %s in a value, so every request is on one key: put %s in a value, or give --hot-key", descriptor, keyPlaceholder, keyPlaceholder)
	}
	return nil
}

// targetKind returns the kind of the target t: http, grpc, redis or memory.
func targetKind(t string) (string, error) {
	if t == "memory" {
		return "memory", nil
	}
	want := fmt.Errorf("--target %q: want http://HOST:PORT, grpc://HOST:PORT, redis://…, rediss://…, unix://… or memory", showTarget(t))
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
	case "grpc":
		if u.Host == "" || (u.Path != "" && u.Path != "/") {
			return "", fmt.Errorf("--target %q: want grpc://HOST:PORT", t)
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

// A benchTarget is what admit bench loads.
type benchTarget interface {
	// probe checks that the target answers, without consuming anything where it can: nil, or a
	// usageError, or an error that makes it unreachable.
	probe(ctx context.Context) error
	// do makes one decision on key, and names its outcome: outcomeAllowed, outcomeLimited or an
	// error ("error: …").
	do(ctx context.Context, key string) string
	// close releases the target's connections.
	close()
}

// A cacheCounter is a target that tells how many decisions its over-limit cache has answered.
type cacheCounter interface {
	// cacheHits returns the hits of the target's over-limit caches so far, and whether it has one;
	// an error if it cannot tell.
	cacheHits(ctx context.Context) (uint64, bool, error)
}

// cacheHits returns the hits of target's over-limit caches so far, and whether it has one; an
// error if it cannot tell.
func cacheHits(ctx context.Context, target benchTarget) (uint64, bool, error) {
	c, ok := target.(cacheCounter)
	if !ok {
		return 0, false, errors.New("the target does not tell")
	}
	ctx, cancel := context.WithTimeout(ctx, defaultBenchTimeout)
	defer cancel()
	return c.cacheHits(ctx)
}

// A usageError is a probe's answer that the command line is wrong, such as an unknown policy.
type usageError struct{ error }

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
	defer target.close()
	probeCtx, cancel := context.WithTimeout(ctx, cfg.timeout)
	err = target.probe(probeCtx)
	cancel()
	var usage usageError
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "admit bench: interrupted before the load")
		return benchInterrupted
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "admit bench: %v\n", err)
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "admit bench: %s unreachable: %v\n", redisstore.RedactURL(cfg.target), err)
		return benchUnreachable
	}

	hitsBefore, cached, hitsErr := cacheHits(ctx, target)
	var next atomic.Uint64 // the requests so far: request i is on key i mod cfg.keys
	do := func(ctx context.Context) string {
		return target.do(ctx, cfg.keyPrefix+strconv.FormatUint((next.Add(1)-1)%uint64(cfg.keys), 10))
	}
	if cfg.hotKey {
		hot := cfg.keyPrefix + "hot"
		do = func(ctx context.Context) string { return target.do(ctx, hot) }
	}
	run := loadgen.Config{Rate: cfg.rate, Workers: cfg.concurrency, MaxOutstanding: cfg.maxOutstanding, Duration: cfg.duration}
	p := &progressLine{}
	tty := isTerminal(stderr)
	run.ProgressInterval = progressPlainInterval
	if tty {
		run.ProgressInterval = progressTTYInterval
	}
	run.Progress = func(elapsed time.Duration, sofar *loadgen.Stats) {
		line := p.format(elapsed, sofar)
		if tty {
			fmt.Fprintf(stderr, "\r\033[K%s", line)
		} else {
			fmt.Fprintln(stderr, line)
		}
	}
	res, err := loadgen.Run(ctx, run, do)
	if err != nil { // a config parseBench let through
		fmt.Fprintf(stderr, "admit bench: %v\n", err)
		return exitUsage
	}
	if tty && p.lines > 0 {
		fmt.Fprint(stderr, "\r\033[K")
	}
	report := newBenchReport(cfg, res)
	hitsAfter, cachedAfter, errAfter := cacheHits(context.WithoutCancel(ctx), target)
	switch {
	case hitsErr != nil || errAfter != nil || cached != cachedAfter || hitsAfter < hitsBefore:
		cached = cfg.kind == "http" || cfg.kind == "grpc" // unknown: a service may have one
	case cached:
		hits := hitsAfter - hitsBefore
		report.CacheHits = &hits
	}
	report.Note = report.note(cached)
	if cfg.json {
		out, _ := json.MarshalIndent(report, "", "  ")
		fmt.Fprintf(stdout, "%s\n", out)
	} else {
		fmt.Fprint(stdout, report.text())
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "admit bench: interrupted; the report covers the part that ran")
		return benchInterrupted
	}
	return exitOK
}

// newBenchTarget returns the target of cfg.
func newBenchTarget(cfg benchConfig) (benchTarget, error) {
	switch cfg.kind {
	case "http":
		return newHTTPTarget(cfg), nil
	case "grpc":
		return newGRPCTarget(cfg)
	}
	return newStoreTarget(cfg)
}

// httpTarget is admit serve's POST /v1/check.
type httpTarget struct {
	client   *http.Client
	url      string
	policies []string
}

func newHTTPTarget(cfg benchConfig) *httpTarget {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// Enough idle connections for every request in flight to find one, up to a bound.
	inFlight := cfg.concurrency
	if cfg.rate > 0 {
		inFlight = cmp.Or(cfg.maxOutstanding, loadgen.DefaultMaxOutstanding)
	}
	t.MaxIdleConnsPerHost = min(max(inFlight, 256), 4096)
	return &httpTarget{
		client:   &http.Client{Timeout: cfg.timeout, Transport: t},
		url:      strings.TrimSuffix(cfg.target, "/") + "/v1/check",
		policies: cfg.policies,
	}
}

// body returns the JSON of a check of key that costs cost, or of 1 if cost is nil.
func (t *httpTarget) body(key string, cost *int64) []byte {
	req := httpapi.CheckRequest{Key: key, Cost: cost}
	if len(t.policies) == 1 {
		req.Policy = t.policies[0]
	} else {
		req.Policies = t.policies
	}
	b, _ := json.Marshal(req) // never fails
	return b
}

// probe peeks (cost 0) at a key no run uses.
func (t *httpTarget) probe(ctx context.Context) error {
	zero := int64(0)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(t.body("bench-probe", &zero)))
	if err != nil {
		return usageError{err}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return errors.New(loadgen.ErrorKind(err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var answer httpapi.ErrorResponse
	json.Unmarshal(body, &answer)
	switch {
	case resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode == http.StatusBadRequest:
		return usageError{fmt.Errorf("%s answers 400: %s", t.url, answer.Error)}
	case resp.StatusCode == http.StatusServiceUnavailable:
		return fmt.Errorf("%s answers 503: its backend cannot decide", t.url)
	}
	return fmt.Errorf("%s answers %s to a peek: is it admit serve?", t.url, resp.Status)
}

func (t *httpTarget) do(ctx context.Context, key string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(t.body(key, nil)))
	if err != nil {
		return "error: " + err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return "error: " + loadgen.ErrorKind(err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case err != nil:
		return "error: body: " + loadgen.ErrorKind(err)
	case resp.StatusCode == http.StatusOK:
		return outcomeAllowed
	case resp.StatusCode == http.StatusTooManyRequests:
		return outcomeLimited
	}
	return "error: HTTP " + strconv.Itoa(resp.StatusCode)
}

func (t *httpTarget) close() { t.client.CloseIdleConnections() }

// cacheHitsRE matches a series of admit_overlimit_cache_hits_total in a /metrics page.
var cacheHitsRE = regexp.MustCompile(`(?m)^admit_overlimit_cache_hits_total(?:\{[^}]*\})? ([0-9.e+]+)$`)

// cacheHits reads the over-limit cache hits from the service's /metrics: the sum of its series, if
// it has any (admit serve has none in memory, or with server.local_cache_max_age 0).
func (t *httpTarget) cacheHits(ctx context.Context) (uint64, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(t.url, "/v1/check")+"/metrics", nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	switch {
	case err != nil:
		return 0, false, err
	case resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("admit_decisions_total")):
		return 0, false, fmt.Errorf("/metrics: %s, not admit serve's", resp.Status)
	}
	var sum uint64
	found := false
	for _, m := range cacheHitsRE.FindAllSubmatch(body, -1) {
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil || v < 0 {
			return 0, false, fmt.Errorf("/metrics: %q", m[0])
		}
		sum += uint64(v)
		found = true
	}
	return sum, found, nil
}

// grpcTarget is Envoy's rate limit service, ShouldRateLimit.
type grpcTarget struct {
	conn    *grpc.ClientConn
	client  rlsv3.RateLimitServiceClient
	timeout time.Duration
	domain  string
	entries []benchEntry
}

func newGRPCTarget(cfg benchConfig) (*grpcTarget, error) {
	conn, err := grpc.NewClient(cfg.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &grpcTarget{conn: conn, client: rlsv3.NewRateLimitServiceClient(conn), timeout: cfg.timeout, domain: cfg.domain, entries: cfg.descriptor}, nil
}

// probe asks the standard health service, which admit serve answers: it consumes nothing.
func (t *grpcTarget) probe(ctx context.Context) error {
	resp, err := healthpb.NewHealthClient(t.conn).Check(ctx, &healthpb.HealthCheckRequest{})
	switch {
	case err != nil:
		return fmt.Errorf("health check: %v", status.Code(err))
	case resp.Status != healthpb.HealthCheckResponse_SERVING:
		return fmt.Errorf("health check: %v", resp.Status)
	}
	return nil
}

func (t *grpcTarget) do(ctx context.Context, key string) string {
	entries := make([]*ratelimitv3.RateLimitDescriptor_Entry, len(t.entries))
	for i, e := range t.entries {
		entries[i] = &ratelimitv3.RateLimitDescriptor_Entry{Key: e.Key, Value: strings.ReplaceAll(e.Value, keyPlaceholder, key)}
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	resp, err := t.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: t.domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: entries}}})
	switch {
	case err != nil:
		return "error: " + status.Code(err).String()
	case resp.OverallCode == rlsv3.RateLimitResponse_OK:
		return outcomeAllowed
	case resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT:
		return outcomeLimited
	}
	return "error: code " + resp.OverallCode.String()
}

func (t *grpcTarget) close() { t.conn.Close() }

// storeTarget makes decisions in this process, on a Redis or in memory, as admit serve's
// /v1/check does.
type storeTarget struct {
	svc        *service.Service
	policies   []string
	closeStore func()
	timeout    time.Duration
}

func newStoreTarget(cfg benchConfig) (*storeTarget, error) {
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
	if cfg.kind == "redis" {
		// As openStore, but a decision may take --timeout, as a request to a service may: the
		// default command timeout of 200ms would count a loaded machine's slow answers as errors.
		tls := file.Server.RedisTLS
		s, err := redisstore.New(redisstore.Config{URL: cfg.target, CommandTimeout: cfg.timeout,
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
	return &storeTarget{svc: svc, policies: cfg.policies, closeStore: closeStore, timeout: cfg.timeout}, nil
}

// probe peeks (cost 0) at a key no run uses.
func (t *storeTarget) probe(ctx context.Context) error {
	_, err := t.svc.Check(ctx, service.Check{Policies: t.policies, Subject: admit.Subject{ID: "bench-probe"}, Cost: 0})
	if errors.Is(err, admit.ErrInvalidRequest) || errors.Is(err, admit.ErrInvalidLimit) {
		return usageError{err}
	}
	return err
}

func (t *storeTarget) do(ctx context.Context, key string) string {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	res, err := t.svc.Check(ctx, service.Check{Policies: t.policies, Subject: admit.Subject{ID: key}, Cost: 1})
	switch {
	case errors.Is(err, admit.ErrUnavailable):
		return "error: unavailable"
	case err != nil:
		return "error: " + err.Error()
	case res.Allowed:
		return outcomeAllowed
	}
	return outcomeLimited
}

func (t *storeTarget) close() { t.closeStore() }

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressLine formats the progress of a run, one line per call.
type progressLine struct {
	lines   int           // lines formatted
	ended   uint64        // requests ended at the last line
	elapsed time.Duration // at the last line
}

// format returns the line of the results so far, sofar, after elapsed: the requests a second
// since the last line, the counts so far, and the p99 so far.
func (p *progressLine) format(elapsed time.Duration, sofar *loadgen.Stats) string {
	ended := sofar.Latency.Count()
	perSecond := 0.0
	if span := elapsed - p.elapsed; span > 0 {
		perSecond = float64(ended-p.ended) / span.Seconds()
	}
	p.lines++
	p.ended, p.elapsed = ended, elapsed
	c := countOutcomes(sofar)
	return fmt.Sprintf("%6.1fs  %9.0f req/s  allowed %d  limited %d  errors %d  dropped %d  p99 %v",
		elapsed.Seconds(), perSecond, c.allowed, c.limited, c.errors, sofar.Dropped, roundLatency(sofar.Latency.Quantile(0.99)))
}

// outcomeCounts are a run's requests by outcome.
type outcomeCounts struct {
	allowed, limited, errors int
	errorKinds               map[string]int // the errors by kind
}

func countOutcomes(s *loadgen.Stats) outcomeCounts {
	c := outcomeCounts{errorKinds: map[string]int{}}
	for o, n := range s.Outcomes {
		switch o {
		case outcomeAllowed:
			c.allowed += n
		case outcomeLimited:
			c.limited += n
		default:
			c.errors += n
			c.errorKinds[o] += n
		}
	}
	return c
}

// roundLatency rounds d for display: to 3 significant digits, at least 1ns.
func roundLatency(d time.Duration) time.Duration {
	for unit := time.Duration(1000); unit <= time.Hour; unit *= 10 {
		if d < unit {
			return d.Round(unit / 1000)
		}
	}
	return d.Round(time.Second)
}

// benchReport is admit bench's report; its JSON is the output of --json.
type benchReport struct {
	Target      string  `json:"target"`
	Mode        string  `json:"mode"` // open or closed
	Rate        float64 `json:"rate,omitempty"`
	Concurrency int     `json:"concurrency,omitempty"`
	// Policies, or Domain and Descriptor for a grpc target.
	Policies   []string `json:"policies,omitempty"`
	Domain     string   `json:"domain,omitempty"`
	Descriptor string   `json:"descriptor,omitempty"`
	Keys       int      `json:"keys"`
	HotKey     bool     `json:"hot_key"`
	KeyPrefix  string   `json:"key_prefix"`
	DurationS  float64  `json:"duration_s"`
	ElapsedS   float64  `json:"elapsed_s"`
	// Scheduled = Allowed + Limited + Errors + Dropped.
	Scheduled          int            `json:"scheduled"`
	Allowed            int            `json:"allowed"`
	Limited            int            `json:"limited"`
	Errors             int            `json:"errors"`
	Dropped            int            `json:"dropped"`
	ErrorKinds         map[string]int `json:"error_kinds"`
	DecisionsPerSecond float64        `json:"decisions_per_second"`
	LatencyUS          benchLatency   `json:"latency_us"`
	// CacheHits is how many of the Limited the target answered from its over-limit cache, without
	// its backend (an http target on Redis, read from its /metrics); absent when not known.
	CacheHits *uint64 `json:"cache_hits,omitempty"`
	// Note says what the figures measure when that is not what they seem: a run of mostly
	// rejections.
	Note string `json:"note,omitempty"`
}

// note returns the report's Note, cached telling whether the target may have an over-limit cache:
// empty unless most decisions were rejections.
func (r *benchReport) note(cached bool) string {
	decided := r.Allowed + r.Limited
	if decided == 0 || r.Limited <= r.Allowed {
		return ""
	}
	share := 100 * float64(r.Limited) / float64(decided)
	switch {
	case r.CacheHits != nil && *r.CacheHits > 0:
		much := "partly"
		if *r.CacheHits*2 > uint64(decided) {
			much = "mostly"
		}
		return fmt.Sprintf("%.0f%% of the decisions were rejections, and %d of them (%.0f%% of the decisions) were answered by the target's over-limit cache, without its backend: "+
			"these figures are %s the cache's, not the backend's; give --policy one that admits the load to measure the backend",
			share, *r.CacheHits, 100*float64(*r.CacheHits)/float64(decided), much)
	case cached && r.CacheHits == nil:
		return fmt.Sprintf("%.0f%% of the decisions were rejections: admit serve on Redis answers a full key's rejections from its over-limit cache, without Redis, for up to server.local_cache_max_age, "+
			"so these figures may be mostly the cache's; give a policy that admits the load to measure the backend", share)
	}
	return fmt.Sprintf("%.0f%% of the decisions were rejections, which write nothing: give --policy one that admits the load to measure admissions", share)
}

// benchLatency is the latency quantiles of a report, in microseconds.
type benchLatency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

func newBenchReport(cfg benchConfig, res *loadgen.Result) *benchReport {
	c := countOutcomes(&res.Total)
	r := &benchReport{
		Target: redisstore.RedactURL(cfg.target), Mode: "closed", Concurrency: cfg.concurrency,
		Keys: cfg.keys, HotKey: cfg.hotKey, KeyPrefix: cfg.keyPrefix,
		DurationS: cfg.duration.Seconds(), ElapsedS: res.Elapsed.Seconds(),
		Scheduled: res.Total.Scheduled, Allowed: c.allowed, Limited: c.limited, Errors: c.errors,
		Dropped: res.Total.Dropped, ErrorKinds: c.errorKinds,
	}
	if cfg.rate > 0 {
		r.Mode, r.Rate, r.Concurrency = "open", cfg.rate, 0
	}
	if cfg.kind == "grpc" {
		r.Domain = cfg.domain
		var parts []string
		for _, e := range cfg.descriptor {
			parts = append(parts, e.Key+"="+e.Value)
		}
		r.Descriptor = strings.Join(parts, ",")
	} else {
		r.Policies = cfg.policies
	}
	if res.Elapsed > 0 {
		r.DecisionsPerSecond = float64(c.allowed+c.limited) / res.Elapsed.Seconds()
	}
	h := &res.Total.Latency
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	r.LatencyUS = benchLatency{P50: us(h.Quantile(0.5)), P90: us(h.Quantile(0.9)), P99: us(h.Quantile(0.99)), P999: us(h.Quantile(0.999)), Max: us(h.Max())}
	return r
}

// text returns r as the text admit bench writes without --json.
func (r *benchReport) text() string {
	var b strings.Builder
	what := "policy " + strings.Join(r.Policies, ",")
	if r.Domain != "" {
		what = "domain " + r.Domain + ", descriptor " + r.Descriptor
	}
	keys := fmt.Sprintf("%d keys", r.Keys)
	if r.HotKey {
		keys = "one hot key"
	}
	load := fmt.Sprintf("closed loop, %d workers", r.Concurrency)
	if r.Mode == "open" {
		load = fmt.Sprintf("open loop, %g/s", r.Rate)
	}
	fmt.Fprintf(&b, "admit bench %s: %s, %s (%s…), %s, for %v\n\n", r.Target, what, keys, r.KeyPrefix, load, time.Duration(r.DurationS*float64(time.Second)))
	fmt.Fprintf(&b, "  decisions/s  %.1f  (allowed + limited, over %.2fs)\n\n", r.DecisionsPerSecond, r.ElapsedS)
	fmt.Fprintf(&b, "  scheduled    %d\n", r.Scheduled)
	fmt.Fprintf(&b, "  allowed      %d\n", r.Allowed)
	fmt.Fprintf(&b, "  limited      %d\n", r.Limited)
	if r.CacheHits != nil {
		fmt.Fprintf(&b, "    %-10d answered by the over-limit cache, without the backend\n", *r.CacheHits)
	}
	fmt.Fprintf(&b, "  errors       %d\n", r.Errors)
	for _, k := range slices.Sorted(maps.Keys(r.ErrorKinds)) {
		fmt.Fprintf(&b, "    %-10d %s\n", r.ErrorKinds[k], k)
	}
	fmt.Fprintf(&b, "  dropped      %d\n\n", r.Dropped)
	d := func(us float64) time.Duration { return roundLatency(time.Duration(us * float64(time.Microsecond))) }
	l := r.LatencyUS
	fmt.Fprintf(&b, "  latency      p50 %v  p90 %v  p99 %v  p99.9 %v  max %v\n", d(l.P50), d(l.P90), d(l.P99), d(l.P999), d(l.Max))
	if r.Note != "" {
		fmt.Fprintf(&b, "\n  note: %s\n", r.Note)
	}
	return b.String()
}
