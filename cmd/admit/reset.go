package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"

	"github.com/admit-dev/admit/transport/admin"
)

const resetUsage = `Usage: admit reset [--admin URL] [--admin-token-file PATH] [--policy P] [--reason TEXT] --key K

Asks the admin API of a running admit serve (POST /v1/reset) to delete the state of the subject K
under each policy, or under P (the policy's own key and each of its tiers'), and prints the answer
as JSON on stdout. The subject's next request finds its whole allowance, on every instance that
shares the Redis. The reset is logged as an audit record with --reason, and the subject's digest.
The token comes from --admin-token-file, else $` + adminTokenEnv + ` (docs/operations.md#unblock-a-customer).

Exit status:
  0  reset; the answer on stdout
  1  the server refused (a wrong token, an unknown policy, the backend down) or could not be
     reached; its message on stderr
  2  the command line was wrong, or no admin token

Flags:
`

// reset runs admit reset with args, and returns its exit code.
func reset(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("admit reset", flag.ContinueOnError)
	client := newAdminClient("reset", fs)
	var req admin.ResetRequest
	fs.StringVar(&req.Policy, "policy", "", "the policy's `NAME`; default every policy")
	fs.StringVar(&req.Key, "key", "", "the `SUBJECT`, as /v1/check takes it (required)")
	fs.StringVar(&req.Reason, "reason", "", fmt.Sprintf("why, for the audit record: `TEXT` of at most %d bytes", admin.MaxReasonLen))
	if code, ok := client.parse(args, resetUsage, stdout, stderr); !ok {
		return code
	}
	switch {
	case req.Key == "":
		return badUsage(stderr, "reset", "--key is required")
	case len(req.Key) > admin.MaxKeyLen:
		return badUsage(stderr, "reset", "--key of %d bytes; want at most %d", len(req.Key), admin.MaxKeyLen)
	case len(req.Reason) > admin.MaxReasonLen:
		return badUsage(stderr, "reset", "--reason of %d bytes; want at most %d", len(req.Reason), admin.MaxReasonLen)
	}
	if err := client.ready(); err != nil {
		return badUsage(stderr, "reset", "%v", err)
	}
	return client.call(ctx, http.MethodPost, "/v1/reset", nil, req, stdout, stderr)
}
