package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/admit-dev/admit/transport/admin"
)

const overrideUsage = `Usage:
  admit override set    [--admin URL] [--admin-token-file PATH] --policy P --key K --limit N [--burst N] [--expires-in D] [--reason TEXT]
  admit override delete [--admin URL] [--admin-token-file PATH] --policy P --key K [--reason TEXT]
  admit override list   [--admin URL] [--admin-token-file PATH] --policy P [--cursor C] [--n N]

Asks the admin API of a running admit serve to set (PUT /v1/overrides), delete (DELETE) or list
(GET) the overrides of a subject's numbers under a policy: the subject K is decided under P with
the limit N (and, for gcra, the burst) in place of the policy's and its tier's, on every instance
that shares the Redis, until the override expires (--expires-in, such as 36h or 7d, at most 366d;
none: until deleted) or is deleted. The answer is printed as JSON on stdout; a listing names each
subject by its digest, never itself. Each change is logged as an audit record with --reason. The
token comes from --admin-token-file, else $` + adminTokenEnv + ` (docs/operations.md#raise-one-tenants-limit-for-a-week).

Exit status:
  0  done; the answer on stdout
  1  the server refused (a wrong token, an unknown policy, a limit out of the policy's bounds,
     no such override, the backend down) or could not be reached; its message on stderr
  2  the command line was wrong, or no admin token

Flags:
`

// override runs admit override with args (set, delete or list, then its flags), and returns its
// exit code.
func override(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sub := ""
	if len(args) > 0 {
		sub, args = args[0], args[1:]
	}
	switch sub {
	case "set", "delete", "list":
	case "--help", "-help", "-h", "help":
		fmt.Fprint(stdout, overrideUsage)
		fs := flag.NewFlagSet("admit override", flag.ContinueOnError)
		newAdminClient("override", fs)
		overrideFlags(fs, &admin.OverrideRequest{}, new(string), new(int))
		printFlags(stdout, fs)
		return exitOK
	case "":
		return badUsage(stderr, "override", "want set, delete or list")
	default:
		return badUsage(stderr, "override", "unknown subcommand %q; want set, delete or list", sub)
	}
	fs := flag.NewFlagSet("admit override "+sub, flag.ContinueOnError)
	client := newAdminClient("override "+sub, fs)
	var req admin.OverrideRequest
	var cursor string
	var n int
	overrideFlags(fs, &req, &cursor, &n)
	if code, ok := client.parse(args, overrideUsage, stdout, stderr); !ok {
		return code
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	allowed := map[string][]string{
		"set":    {"key", "limit", "burst", "expires-in", "reason"},
		"delete": {"key", "reason"},
		"list":   {"cursor", "n"},
	}[sub]
	for _, name := range []string{"key", "limit", "burst", "expires-in", "reason", "cursor", "n"} {
		if given[name] && !slices.Contains(allowed, name) {
			return badUsage(stderr, "override "+sub, "--%s is not a flag of admit override %s", name, sub)
		}
	}
	cmd := "override " + sub
	switch {
	case req.Policy == "":
		return badUsage(stderr, cmd, "--policy is required")
	case sub != "list" && req.Key == "":
		return badUsage(stderr, cmd, "--key is required")
	case len(req.Key) > admin.MaxKeyLen:
		return badUsage(stderr, cmd, "--key of %d bytes; want at most %d", len(req.Key), admin.MaxKeyLen)
	case len(req.Reason) > admin.MaxReasonLen:
		return badUsage(stderr, cmd, "--reason of %d bytes; want at most %d", len(req.Reason), admin.MaxReasonLen)
	case sub == "set" && !given["limit"]:
		return badUsage(stderr, cmd, "--limit is required")
	case sub == "set" && req.Limit < 1:
		return badUsage(stderr, cmd, "--limit %d; want 1 or more", req.Limit)
	case req.Burst < 0:
		return badUsage(stderr, cmd, "--burst %d; want 0 or more", req.Burst)
	case given["n"] && (n < 1 || n > admin.MaxOverridePage):
		return badUsage(stderr, cmd, "--n %d; want 1-%d", n, admin.MaxOverridePage)
	}
	if err := client.ready(); err != nil {
		return badUsage(stderr, cmd, "%v", err)
	}
	switch sub {
	case "set":
		return client.call(ctx, http.MethodPut, "/v1/overrides", nil, req, stdout, stderr)
	case "delete":
		return client.call(ctx, http.MethodDelete, "/v1/overrides", nil,
			admin.OverrideDeleteRequest{Policy: req.Policy, Key: req.Key, Reason: req.Reason}, stdout, stderr)
	}
	query := url.Values{"policy": {req.Policy}}
	if cursor != "" {
		query.Set("cursor", cursor)
	}
	if given["n"] {
		query.Set("n", strconv.Itoa(n))
	}
	return client.call(ctx, http.MethodGet, "/v1/overrides", query, nil, stdout, stderr)
}

// overrideFlags defines admit override's flags on fs, into req, cursor and n.
func overrideFlags(fs *flag.FlagSet, req *admin.OverrideRequest, cursor *string, n *int) {
	fs.StringVar(&req.Policy, "policy", "", "the policy's (or the Envoy rule's) `NAME` (required)")
	fs.StringVar(&req.Key, "key", "", "the `SUBJECT`, as /v1/check takes it (set, delete: required)")
	fs.Int64Var(&req.Limit, "limit", 0, "set: the `N` that replaces the policy's limit (required)")
	fs.Int64Var(&req.Burst, "burst", 0, "set: the `N` that replaces a gcra policy's burst; default the policy's")
	fs.StringVar(&req.ExpiresIn, "expires-in", "", "set: how long it lasts, a `DURATION` such as 36h or 7d (at most 366d); default until deleted")
	fs.StringVar(&req.Reason, "reason", "", fmt.Sprintf("set, delete: why, for the audit record: `TEXT` of at most %d bytes", admin.MaxReasonLen))
	fs.StringVar(cursor, "cursor", "", "list: the `CURSOR` of the page, its previous page's next_cursor")
	fs.IntVar(n, "n", admin.DefaultOverridePage, fmt.Sprintf("list: the most overrides of the page, `N` of 1-%d", admin.MaxOverridePage))
}
