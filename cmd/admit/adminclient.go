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

// adminTimeout bounds the whole call of an admin command (admit state, admit reset).
const adminTimeout = 10 * time.Second

// An adminClient is what the admin commands share: the admin API's URL and the token, from the
// flags --admin and --admin-token-file (else $ADMIT_ADMIN_TOKEN).
type adminClient struct {
	cmd       string // the command, as badUsage names it: "state"
	base      string // --admin: one URL, or several separated by commas when multi
	multi     bool   // the command asks every instance of a comma-separated --admin (admit top)
	tokenFile string // --admin-token-file
	fs        *flag.FlagSet
	token     []byte // set by ready
}

// newAdminClient returns the adminClient of admit cmd, its flags defined on fs.
func newAdminClient(cmd string, fs *flag.FlagSet) *adminClient {
	c := &adminClient{cmd: cmd, fs: fs}
	fs.StringVar(&c.base, "admin", defaultAdminURL, "the admin API's `URL`")
	fs.StringVar(&c.tokenFile, adminTokenFileFlag, "", "read the admin token from the file at `PATH`; default $"+adminTokenEnv)
	return c
}

// parse parses args, the command line of admit c.cmd, none left over. With --help it prints usage
// and the flags on stdout; a wrong command line it reports on stderr. Either way it returns false and
// the exit code.
func (c *adminClient) parse(args []string, usage string, stdout, stderr io.Writer) (int, bool) {
	c.fs.SetOutput(io.Discard)
	switch err := c.fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		printFlags(stdout, c.fs)
		return exitOK, false
	case err != nil:
		return badUsage(stderr, c.cmd, "%s", flagError(err)), false
	case c.fs.NArg() > 0:
		return badUsage(stderr, c.cmd, "unexpected argument %q", c.fs.Arg(0)), false
	}
	return exitOK, true
}

// ready checks --admin and loads the token, once fs is parsed. Its error is a usage error, which
// never holds the token.
func (c *adminClient) ready() error {
	bases := c.bases()
	if !c.multi && strings.Contains(c.base, ",") {
		return fmt.Errorf("--admin %q: want one URL: admit %s asks one instance", c.base, c.cmd)
	}
	for _, base := range bases {
		if _, err := adminEndpoint(base, "/"); err != nil {
			return fmt.Errorf("--admin %v", err)
		}
	}
	fileSet := false
	c.fs.Visit(func(f *flag.Flag) { fileSet = fileSet || f.Name == adminTokenFileFlag })
	token, _, err := adminToken(c.tokenFile, fileSet)
	switch {
	case err != nil:
		return err
	case token == nil:
		return fmt.Errorf("no admin token: set %s or --%s PATH", adminTokenEnv, adminTokenFileFlag)
	}
	c.token = token
	return nil
}

// bases returns the URLs of --admin: split at commas when the command asks several instances,
// each trimmed of spaces; an empty one stays, for ready to refuse.
func (c *adminClient) bases() []string {
	if !c.multi {
		return []string{c.base}
	}
	bases := strings.Split(c.base, ",")
	for i := range bases {
		bases[i] = strings.TrimSpace(bases[i])
	}
	return bases
}

// call sends method path?query to the admin API with body (nil for none) as JSON, and prints the
// JSON of a 200 answer, indented, on stdout: exitOK. Any other answer, or none, is exitError, with
// the server's message on stderr.
func (c *adminClient) call(ctx context.Context, method, path string, query url.Values, body any, stdout, stderr io.Writer) int {
	endpoint, err := adminEndpoint(c.base, path)
	if err != nil {
		return badUsage(stderr, c.cmd, "--admin %v", err)
	}
	endpoint.RawQuery = query.Encode()
	answer, err := c.do(ctx, method, endpoint.String(), body)
	if err != nil {
		fmt.Fprintf(stderr, "admit %s: %v\n", c.cmd, err)
		return exitError
	}
	var out bytes.Buffer
	if err := json.Indent(&out, answer, "", "  "); err != nil {
		fmt.Fprintf(stderr, "admit %s: the answer is not JSON: %v\n", c.cmd, err)
		return exitError
	}
	fmt.Fprintf(stdout, "%s\n", bytes.TrimSpace(out.Bytes()))
	return exitOK
}

// do sends method endpoint with the bearer token and body as JSON, within adminTimeout, and returns
// the body of a 200 answer; any other status is an error with the server's message.
func (c *adminClient) do(ctx context.Context, method, endpoint string, body any) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	var payload io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		payload = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint, payload)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+string(c.token))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err // the URL and why, never the token: it is in a header
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		var e admin.ErrorResponse
		if json.Unmarshal(answer, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(answer))
		}
		return nil, fmt.Errorf("%s: %s", res.Status, e.Error)
	}
	return answer, nil
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
