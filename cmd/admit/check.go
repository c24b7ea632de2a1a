package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/validate"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/httpapi"
)

// Exit codes of admit check.
const (
	checkAllowed     = 0
	checkLimited     = 1
	checkInvalid     = 2 // the command line, the configuration or the request
	checkUnavailable = 3
)

// policyList is a repeatable --policy flag.
type policyList []string

func (p *policyList) String() string     { return strings.Join(*p, ",") }
func (p *policyList) Set(v string) error { *p = append(*p, v); return nil }

const checkUsage = `Usage: admit check --config FILE --policy P [--policy Q …] --key K [--cost N] [--request-id ID] [--redis URL] [--hmac-secret-file PATH]

Decides one request for the subject K under the policies named, all-or-nothing, as POST /v1/check
does, and prints the decision as JSON (the body /v1/check answers) on stdout. Without --redis (or
REDIS_URL, or the file's server.redis) it decides on an empty in-memory store: a way to try a
configuration. With Redis it consumes from the same counters as admit serve, so it needs the same
HMAC secret (--hmac-secret-file, else $ADMIT_HMAC_SECRET, else the file's server.hmac_secret_file).

Exit status:
  0  allowed
  1  limited (over a policy's limit)
  2  invalid: the command line, the configuration file or the request (an unknown policy,
     a cost above a limit, …); the reason on stderr
  3  unavailable: the backend could not decide

Flags:
`

// check runs admit check with args, and returns its exit code.
func check(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("admit check", flag.ContinueOnError)
	var cfg serveConfig
	var policies policyList
	var key, requestID string
	var cost int64
	fs.StringVar(&cfg.configFile, "config", "", "the configuration `FILE` that names the policies (required)")
	fs.Var(&policies, "policy", "a policy's `NAME`; repeat it to check several at once")
	fs.StringVar(&key, "key", "", "the `SUBJECT` to check, such as a user ID (required)")
	fs.Int64Var(&cost, "cost", 1, "the units asked for under each policy; 0 is a peek")
	fs.StringVar(&requestID, "request-id", "", "an `ID` that makes a retry idempotent")
	fs.StringVar(&cfg.redisURL, "redis", "", "Redis `URL`; default $REDIS_URL, else the file's server.redis, else an empty in-memory store")
	fs.StringVar(&cfg.secretFile, secretFileFlag, "", "read the HMAC secret from the file at `PATH`; default $"+secretEnv)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, checkUsage)
			printFlags(stdout, fs)
			return exitOK
		}
		return badUsage(stderr, "check", "%s", flagError(err)) // exitUsage is checkInvalid
	}
	switch {
	case fs.NArg() > 0:
		return badUsage(stderr, "check", "unexpected argument %q", fs.Arg(0))
	case cfg.configFile == "" || len(policies) == 0 || key == "":
		return badUsage(stderr, "check", "--config, --policy and --key are required")
	}
	fs.Visit(func(f *flag.Flag) {
		cfg.secretFileSet = cfg.secretFileSet || f.Name == secretFileFlag
		if f.Name == "redis" && cfg.redisURL == "" {
			cfg.redisURL = "-" // given empty: stays in memory
		}
	})
	if cfg.redisURL == "" {
		cfg.redisURL = os.Getenv("REDIS_URL")
	}
	if cfg.redisURL == "-" {
		cfg.redisURL = ""
	}
	source := "REDIS_URL"
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "redis" {
			source = "--redis"
		}
	})
	if err := checkRedisURL(source, cfg.redisURL); err != nil {
		return badUsage(stderr, "check", "%v", err)
	}
	file, err := loadPolicies(cfg.configFile)
	if err != nil {
		fmt.Fprintf(stderr, "admit check: %v\n", err)
		return checkInvalid
	}
	cfg.applyFile(file.Server)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil)) // stdout is the JSON; nothing else to say
	keys, err := keyBuilder(cfg, logger)
	if err != nil {
		fmt.Fprintf(stderr, "admit check: %v\n", err)
		return checkInvalid
	}
	store, closeStore, err := openStore(cfg, logger)
	if err != nil {
		fmt.Fprintf(stderr, "admit check: %v\n", err)
		return checkInvalid
	}
	defer closeStore()
	if n, which := policyReplicas(file); n > 0 {
		if err := checkDurability(ctx, store, n, which, logger); err != nil { // as admit serve refuses to start
			fmt.Fprintf(stderr, "admit check: %v\n", err)
			return checkInvalid
		}
	}
	svc, err := service.New(store, keys, file)
	if err != nil {
		fmt.Fprintf(stderr, "admit check: %v\n", err)
		return checkInvalid
	}
	res, err := svc.Check(ctx, service.Check{Policies: policies, Subject: admit.Subject{ID: key}, Cost: cost, RequestID: requestID})
	switch {
	case errors.Is(err, admit.ErrInvalidRequest), errors.Is(err, admit.ErrInvalidLimit):
		fmt.Fprintf(stderr, "admit check: %s\n", validate.ClientMessage(err)) // the field and its bound, not the packages
		return checkInvalid
	case err != nil:
		fmt.Fprintf(stderr, "admit check: %v\n", err)
		return checkUnavailable
	}
	out, _ := json.MarshalIndent(httpapi.NewCheckResponse(res), "", "  ")
	fmt.Fprintf(stdout, "%s\n", out)
	if !res.Allowed {
		return checkLimited
	}
	return checkAllowed
}
