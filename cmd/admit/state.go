package main

import (
	"context"
	"flag"
	"io"
	"net/http"
	"net/url"
)

const stateUsage = `Usage: admit state [--admin URL] [--admin-token-file PATH] [--policy P [--tier T]] --key K

Asks the admin API of a running admit serve (GET /v1/state) for the state of the subject K under
each policy, or under P (with T, under its tier T's numbers), and prints the answer as JSON on
stdout: for each policy the numbers in force and where they come from (source: policy or tier),
remaining, limited, reset_after_ms and retry_after_ms. It reads, by peeks: nothing is consumed.
The token comes from --admin-token-file, else $` + adminTokenEnv + ` (docs/operations.md#the-admin-api).

Exit status:
  0  the state, on stdout
  1  the server refused (a wrong token, an unknown policy or tier, the backend down) or could not
     be reached; its message on stderr
  2  the command line was wrong, or no admin token

Flags:
`

// state runs admit state with args, and returns its exit code.
func state(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("admit state", flag.ContinueOnError)
	client := newAdminClient("state", fs)
	var policyName, key, tier string
	fs.StringVar(&policyName, "policy", "", "the policy's `NAME`; default every policy")
	fs.StringVar(&key, "key", "", "the `SUBJECT`, as /v1/check takes it (required)")
	fs.StringVar(&tier, "tier", "", "the `TIER` of --policy whose numbers to read")
	if code, ok := client.parse(args, stateUsage, stdout, stderr); !ok {
		return code
	}
	switch {
	case key == "":
		return badUsage(stderr, "state", "--key is required")
	case tier != "" && policyName == "":
		return badUsage(stderr, "state", "--tier needs --policy: a tier is a policy's")
	}
	if err := client.ready(); err != nil {
		return badUsage(stderr, "state", "%v", err)
	}
	query := url.Values{"key": {key}}
	if policyName != "" {
		query.Set("policy", policyName)
	}
	if tier != "" {
		query.Set("tier", tier)
	}
	return client.call(ctx, http.MethodGet, "/v1/state", query, nil, stdout, stderr)
}
