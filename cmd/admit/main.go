// Command admit serves the admit rate limiter over HTTP and gRPC.
//
// Usage:
//
//	admit serve [--config FILE] [--listen ADDR] [--envoy-config DIR [--grpc-listen ADDR]] [--admin-token-file PATH [--admin-listen ADDR]] [--redis URL] [--hmac-secret-file PATH] [--log-format text|json]
//	admit proxy --upstream URL --config FILE [--listen ADDR] [--redis URL] [--hmac-secret-file PATH]
//	admit config validate FILE
//	admit check --config FILE --policy P [--policy Q] --key K [--cost N] [--request-id ID] [--redis URL]
//	admit state [--admin URL] [--admin-token-file PATH] [--policy P [--tier T]] --key K
//	admit reset [--admin URL] [--admin-token-file PATH] [--policy P] [--reason TEXT] --key K
//	admit top [--admin URL[,URL...]] [--admin-token-file PATH] [--policy P] [-n N]
//	admit override set|delete|list [--admin URL] [--admin-token-file PATH] --policy P [--key K] [--limit N] [--burst N] [--expires-in D] [--reason TEXT] [--cursor C] [--n N]
//	admit bench [--target URL|memory] [--rate N/s | --concurrency N] [--duration D] [--keys N | --hot-key] [--json]
//	admit version
//	admit help
//
// Run "admit help" for details.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/admit-dev/admit"
)

// demoLimit returns the policy of GET /demo, the origin design's: 3 requests per 10 seconds, in a
// fixed window. Its keys are in version bound.DefaultVersion.
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

const usage = `admit is a rate limiter on Redis, served over HTTP and gRPC.

Usage:

	admit <command> [arguments]

Commands:

	serve     serve the limiter over HTTP on --listen (default ` + defaultListen + `):
	            POST /v1/check    decide a request under one or several policies, as JSON
	            GET /v1/policies  the policies loaded
	            GET /demo         the demo policy: 3 requests per 10s
	            GET /healthz      200 "ok VERSION" while the process is alive
	            GET /readyz       200 when the backend answers
	            GET /metrics      Prometheus metrics
	          and, with --envoy-config DIR, Envoy's rate limit service (RLS v3) and
	          grpc.health.v1 over gRPC on --grpc-listen (default ` + defaultGRPCListen + `); with an
	          admin token, the admin API on --admin-listen (default ` + defaultAdminListen + `)
	proxy     a reverse proxy that limits the routes of a configuration in front of any app
	check     decide one request under a configuration's policies, and print it as JSON
	config    check a configuration file: admit config validate FILE
	state     ask a running admit serve's admin API for a subject's state under its policies
	reset     ask a running admit serve's admin API to reset a subject's state under its policies
	top       ask the admin API of one or several admit serve for the subjects a policy rejected most
	override  set, delete or list, through the admin API, a subject's numbers in place of a policy's
	bench     a load generator: decisions/s and latency of admit serve (HTTP, gRPC) or of a store
	version   print the version
	help      print this help

Run "admit <command> --help" (or "admit help <command>") for a command's flags.
`

// badUsage reports a wrong command line of admit cmd ("serve", "config validate"): one line
// of what is wrong, and one naming the help. It returns exitUsage.
func badUsage(stderr io.Writer, cmd, format string, args ...any) int {
	fmt.Fprintf(stderr, "admit %s: %s\n", cmd, fmt.Sprintf(format, args...))
	name, _, _ := strings.Cut(cmd, " ")
	fmt.Fprintf(stderr, "Run 'admit %s --help' for its usage.\n", name)
	return exitUsage
}

// flagError returns the message of an error of flag.FlagSet.Parse with its flags spelt --name,
// as the usage spells them: "flag provided but not defined: --bogus".
func flagError(err error) string {
	return flagNameRE.ReplaceAllString(err.Error(), "$1--$2")
}

// flagNameRE matches a flag's name as package flag spells it in its errors, "-name".
var flagNameRE = regexp.MustCompile(`(^|[ :])-([A-Za-z0-9][-A-Za-z0-9]*)`)

// printFlags writes the flags of fs to w as flag.PrintDefaults does, but spelt --name, as the
// usage texts spell them.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		var b strings.Builder
		fmt.Fprintf(&b, "  --%s", f.Name)
		name, use := flag.UnquoteUsage(f)
		if name != "" {
			b.WriteString(" " + name)
		}
		b.WriteString("\n    \t")
		b.WriteString(strings.ReplaceAll(use, "\n", "\n    \t"))
		if def, ok := flagDefault(f); ok {
			fmt.Fprintf(&b, " (default %s)", def)
		}
		fmt.Fprintln(w, b.String())
	})
}

// flagDefault returns f's default as flag.PrintDefaults shows it (a string quoted), and false
// for a zero default, which it does not show.
func flagDefault(f *flag.Flag) (string, bool) {
	switch f.DefValue {
	case "", "0", "false", "0s", "[]":
		return "", false
	}
	if g, ok := f.Value.(flag.Getter); ok {
		if _, isString := g.Get().(string); isString {
			return strconv.Quote(f.DefValue), true
		}
	}
	return f.DefValue, true
}

// newJSONHandler returns the handler of the JSON log on w: slog's, but with durations as strings
// ("10s"), as the text log writes them, rather than integers of nanoseconds.
func newJSONHandler(w io.Writer) slog.Handler {
	return slog.NewJSONHandler(w, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Value.Kind() == slog.KindDuration {
			a.Value = slog.StringValue(a.Value.Duration().String())
		}
		return a
	}})
}

// A command is one of admit's subcommands, run with its arguments (after its name).
type command func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// commands are admit's subcommands by name: run runs them, and `admit help <name>` runs one with
// --help.
var commands = map[string]command{
	"serve": serve,
	"proxy": proxy,
	"config": func(_ context.Context, args []string, stdout, stderr io.Writer) int {
		return config(args, stdout, stderr)
	},
	"check":    check,
	"bench":    bench,
	"state":    state,
	"reset":    reset,
	"top":      top,
	"override": override,
}

// run runs the admit command line args (without the program name) and returns the exit code.
// It stops serving when ctx is done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	if c, ok := commands[cmd]; ok {
		return c(ctx, rest, stdout, stderr)
	}
	switch cmd {
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, versionString())
		return exitOK
	case "help", "--help", "-help", "-h":
		if len(rest) > 0 {
			if c, ok := commands[rest[0]]; ok {
				return c(ctx, []string{"--help"}, stdout, stderr)
			}
		}
		if len(rest) > 0 && rest[0] != "help" && rest[0] != "version" {
			fmt.Fprintf(stderr, "admit help: unknown command %q\n", rest[0])
			fmt.Fprintln(stderr, "Run 'admit help' for the commands.")
			return exitUsage
		}
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "admit: unknown command %q\n", cmd)
		fmt.Fprintln(stderr, "Run 'admit help' for the commands.")
		return exitUsage
	}
}

// droppedLine is the log line, in the log's format (text or json), that reports n lines dropped
// because stderr did not keep up.
func droppedLine(format string, n int64) []byte {
	var b bytes.Buffer
	var h slog.Handler = slog.NewTextHandler(&b, nil)
	if format == "json" {
		h = newJSONHandler(&b)
	}
	slog.New(h).Warn("log lines dropped", "dropped", n, "reason", "stderr did not keep up")
	return b.Bytes()
}
