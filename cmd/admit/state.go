package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/admit-dev/admit/transport/admin"
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

// stateTimeout bounds the whole call of admit state.
const stateTimeout = 10 * time.Second

// state runs admit state with args, and returns its exit code.
func state(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("admit state", flag.ContinueOnError)
	var base, tokenFile, policyName, key, tier string
	fs.StringVar(&base, "admin", defaultAdminURL, "the admin API's `URL`")
	fs.StringVar(&tokenFile, adminTokenFileFlag, "", "read the admin token from the file at `PATH`; default $"+adminTokenEnv)
	fs.StringVar(&policyName, "policy", "", "the policy's `NAME`; default every policy")
	fs.StringVar(&key, "key", "", "the `SUBJECT`, as /v1/check takes it (required)")
	fs.StringVar(&tier, "tier", "", "the `TIER` of --policy whose numbers to read")
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, stateUsage)
			printFlags(stdout, fs)
			return exitOK
		}
		return badUsage(stderr, "state", "%s", flagError(err))
	}
	fileSet := false
	fs.Visit(func(f *flag.Flag) { fileSet = fileSet || f.Name == adminTokenFileFlag })
	switch {
	case fs.NArg() > 0:
		return badUsage(stderr, "state", "unexpected argument %q", fs.Arg(0))
	case key == "":
		return badUsage(stderr, "state", "--key is required")
	case tier != "" && policyName == "":
		return badUsage(stderr, "state", "--tier needs --policy: a tier is a policy's")
	}
	endpoint, err := adminEndpoint(base, "/v1/state")
	if err != nil {
		return badUsage(stderr, "state", "--admin %v", err)
	}
	token, _, err := adminToken(tokenFile, fileSet)
	switch {
	case err != nil:
		return badUsage(stderr, "state", "%v", err)
	case token == nil:
		return badUsage(stderr, "state", "no admin token: set %s or --%s PATH", adminTokenEnv, adminTokenFileFlag)
	}
	query := url.Values{"key": {key}}
	if policyName != "" {
		query.Set("policy", policyName)
	}
	if tier != "" {
		query.Set("tier", tier)
	}
	endpoint.RawQuery = query.Encode()
	body, err := adminGet(ctx, endpoint.String(), token)
	if err != nil {
		fmt.Fprintf(stderr, "admit state: %v\n", err)
		return exitError
	}
	var out bytes.Buffer
	if err := json.Indent(&out, body, "", "  "); err != nil {
		fmt.Fprintf(stderr, "admit state: the answer is not JSON: %v\n", err)
		return exitError
	}
	fmt.Fprintf(stdout, "%s\n", bytes.TrimSpace(out.Bytes()))
	return exitOK
}

// adminEndpoint returns the URL of the admin API's path below base, an http or https URL.
func adminEndpoint(base, path string) (*url.URL, error) {
	u, err := url.Parse(base)
	switch {
	case err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return nil, fmt.Errorf("%q: want http://host:port or https://host:port", base)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("%q: want no user, query or fragment: the token goes in --%s", base, adminTokenFileFlag)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawPath = ""
	return u, nil
}

// adminGet sends GET endpoint with the bearer token, within stateTimeout, and returns the body of
// a 200 answer; any other status is an error with the server's message.
func adminGet(ctx context.Context, endpoint string, token []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, stateTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+string(token))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err // the URL and why, never the token: it is in a header
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		var e admin.ErrorResponse
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(body))
		}
		return nil, fmt.Errorf("%s: %s", res.Status, e.Error)
	}
	return body, nil
}
