package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/transport/admin"
)

// testAdminToken is the admin token the tests give admit serve.
const testAdminToken = "admin-token-5e1f9c2b7a3d0e84"

var adminListeningRE = regexp.MustCompile(`msg=listening server=admin addr=(\S+)`)

// waitAdminAddr returns the admin listener's address from the log, failing t if it does not
// appear within 10s.
func (w *logWatch) waitAdminAddr(t *testing.T) string {
	t.Helper()
	w.waitLine(t, "msg=listening server=admin addr=")
	return adminListeningRE.FindStringSubmatch(w.String())[1]
}

// stateCmd runs "admit state args…" in this process and returns its exit code, stdout and stderr.
func stateCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), append([]string{"state"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// adminGetStatus sends GET url with the Authorization field auth (none for "") and returns the status.
func adminGetStatus(t *testing.T, url, auth string) int {
	t.Helper()
	return adminStatus(t, http.MethodGet, url, auth, "")
}

// adminStatus sends method url with the Authorization field auth (none for "") and body (none for
// "", else as JSON), and returns the status.
func adminStatus(t *testing.T, method, url, auth, body string) int {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestServeAdmin runs admit serve with an admin token and admit state against it: the state of the
// demo account after two requests, each exit code, and the data plane's 404 for every admin path,
// with the token or without.
func TestServeAdmin(t *testing.T) {
	useSecret(t)
	t.Setenv(adminTokenEnv, testAdminToken)
	base, logs, stop := serveInProcess(t, "--admin-listen", "127.0.0.1:0")
	adminURL := "http://" + logs.waitAdminAddr(t)
	checkDemo(t, base, 200, 200)

	code, out, errs := stateCmd(t, "--admin", adminURL, "--key", "demo-account")
	var st admin.StateResponse
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != exitOK || errs != "" || len(st.Decisions) != 1 ||
		st.Decisions[0].Policy != "demo" || st.Decisions[0].Source != "policy" || st.Decisions[0].Remaining != 1 {
		t.Fatalf("admit state: exit %d, %s (%v), stderr %q; want 0 and demo with 1 remaining", code, out, err, errs)
	}
	if !strings.Contains(out, "\n  \"decisions\": [") {
		t.Errorf("admit state printed %q; want indented JSON", out)
	}
	checkDemo(t, base, 200) // the read consumed nothing: the third request is admitted
	for _, c := range []struct {
		args []string
		env  string // ADMIT_ADMIN_TOKEN
		code int
		err  string
	}{
		{[]string{"--policy", "nope", "--key", "k"}, testAdminToken, exitError, `admit state: 404 Not Found: invalid request: unknown policy "nope"`},
		{[]string{"--policy", "demo", "--tier", "pro", "--key", "k"}, testAdminToken, exitError, `unknown tier "pro" for policy "demo"`},
		{[]string{"--key", "k"}, "wrong-token-5e1f9c2b7a3d0e84", exitError, "admit state: 401 Unauthorized: unauthorized"},
		{[]string{"--key", "k"}, "short", exitUsage, "the admin token from ADMIT_ADMIN_TOKEN is 5 bytes; want at least 16"},
		{[]string{"--key", "k"}, "", exitUsage, "no admin token: set ADMIT_ADMIN_TOKEN or --admin-token-file PATH"},
	} {
		t.Setenv(adminTokenEnv, c.env)
		code, out, errs := stateCmd(t, append([]string{"--admin", adminURL}, c.args...)...)
		if code != c.code || out != "" || !strings.Contains(errs, c.err) {
			t.Errorf("admit state %q with token %q: exit %d, stdout %q, stderr %q; want %d saying %q", c.args, c.env, code, out, errs, c.code, c.err)
		}
	}
	// Every admin path and method, with the body the admin API would take: the data plane knows none.
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/state?key=demo-account", ""},
		{http.MethodGet, "/v1/overrides?policy=demo", ""},
		{http.MethodPut, "/v1/overrides", `{"policy":"demo","key":"demo-account","limit":50}`},
		{http.MethodDelete, "/v1/overrides", `{"policy":"demo","key":"demo-account"}`},
		{http.MethodPost, "/v1/overrides", `{"policy":"demo","key":"demo-account","limit":50}`},
		{http.MethodPost, "/v1/reset", `{"policy":"demo","key":"demo-account"}`},
		{http.MethodGet, "/v1/reset", ""},
		{http.MethodPut, "/v1/reset", `{"policy":"demo","key":"demo-account"}`},
		{http.MethodDelete, "/v1/reset", ""},
		{http.MethodGet, "/v1/top?policy=demo", ""},
		{http.MethodGet, "/v1/stats", ""},
		{http.MethodPost, "/v1/state?key=demo-account", "{}"},
		{http.MethodGet, "/ui", ""},
	} {
		for _, auth := range []string{"", "Bearer " + testAdminToken} {
			if got := adminStatus(t, c.method, base+c.path, auth, c.body); got != http.StatusNotFound {
				t.Errorf("%s %s on the data plane with %q = %d; want 404", c.method, c.path, auth, got)
			}
		}
	}
	checkDemo(t, base, 429) // nothing above reset or raised the demo account: its 4th request is refused
	if code := stop(); code != exitOK {
		t.Errorf("run = %d; want 0", code)
	}
	if s := `msg="admin API" state=on addr=` + strings.TrimPrefix(adminURL, "http://") + " token=ADMIT_ADMIN_TOKEN"; !strings.Contains(logs.String(), s) {
		t.Errorf("the log lacks %q:\n%s", s, logs)
	}
	if strings.Contains(logs.String(), testAdminToken) {
		t.Errorf("the log holds the admin token:\n%s", logs)
	}
}

// TestServeAdminToken checks where admit serve finds the admin token, and its refusals to start:
// the file, less one trailing newline, over the environment; a token too short, from either, or a
// file it cannot read, is exit 2 naming the source and never the token; no token, no listener.
func TestServeAdminToken(t *testing.T) {
	useSecret(t)
	t.Setenv(adminTokenEnv, "env-admin-token-3c9a7f1e")
	file := secretFile(t, testAdminToken+"\n")
	base, logs, stop := serveInProcess(t, "--admin-listen", "127.0.0.1:0", "--"+adminTokenFileFlag, file)
	adminURL := "http://" + logs.waitAdminAddr(t)
	if got := adminGetStatus(t, adminURL+"/v1/state?key=k", "Bearer "+testAdminToken); got != http.StatusOK {
		t.Errorf("the file's token = %d; want 200", got)
	}
	if got := adminGetStatus(t, adminURL+"/v1/state?key=k", "Bearer env-admin-token-3c9a7f1e"); got != http.StatusUnauthorized {
		t.Errorf("the environment's token beside a file = %d; want 401", got)
	}
	// admit state reads the file alike.
	if code, _, errs := stateCmd(t, "--admin", adminURL, "--"+adminTokenFileFlag, file, "--key", "k"); code != exitOK {
		t.Errorf("admit state --admin-token-file: exit %d, %s", code, errs)
	}
	checkDemo(t, base, 200)
	stop()
	if !strings.Contains(logs.String(), "token=--admin-token-file") {
		t.Errorf("the log does not name the token's source:\n%s", logs)
	}

	const short = "short-tok-15byt"
	for _, c := range []struct {
		name, env string
		args      []string
		msg       string
	}{
		{"short file", "", []string{"--" + adminTokenFileFlag, secretFile(t, short+"\n")}, "the admin token from --admin-token-file is 15 bytes; want at least 16"},
		{"short environment", short, nil, "the admin token from ADMIT_ADMIN_TOKEN is 15 bytes; want at least 16"},
		{"missing file", "", []string{"--" + adminTokenFileFlag, "/nonexistent/admin-token"}, "--admin-token-file: open /nonexistent/admin-token"},
		{"empty path", testAdminToken, []string{"--" + adminTokenFileFlag, ""}, "--admin-token-file: empty path"},
	} {
		t.Setenv(adminTokenEnv, c.env)
		var stderr bytes.Buffer
		code := run(t.Context(), append([]string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, c.args...), &bytes.Buffer{}, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), `msg="no usable admin token"`) || !strings.Contains(stderr.String(), c.msg) ||
			strings.Contains(stderr.String(), short) || strings.Contains(stderr.String(), "msg=listening") {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant 2, before listening, saying %q and not the token", c.name, code, stderr.String(), c.msg)
		}
	}

	t.Setenv(adminTokenEnv, "")
	_, logs, stop = serveInProcess(t)
	logs.waitLine(t, `msg="admin API" state=off`)
	stop()
	if strings.Contains(logs.String(), "server=admin") {
		t.Errorf("an admin listener started without a token:\n%s", logs)
	}
	var stderr bytes.Buffer
	for _, addr := range []string{"127.0.0.1:0", defaultAdminListen} { // the default too, when given
		stderr.Reset()
		if code := run(t.Context(), []string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", addr}, &bytes.Buffer{}, &stderr); code != exitUsage ||
			!strings.Contains(stderr.String(), "admit serve: --admin-listen needs an admin token: --admin-token-file PATH or ADMIT_ADMIN_TOKEN") {
			t.Errorf("--admin-listen %s without a token: exit %d, stderr %q; want 2 saying so", addr, code, stderr.String())
		}
	}
	stderr.Reset()
	if code := run(t.Context(), []string{"proxy", "--upstream", "http://127.0.0.1:1", "--admin-listen", "127.0.0.1:0"}, &bytes.Buffer{}, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "flag provided but not defined: --admin-listen") {
		t.Errorf("admit proxy --admin-listen: exit %d, stderr %q; want 2: the proxy has no admin API", code, stderr.String())
	}
	t.Setenv(adminTokenEnv, testAdminToken)
	stderr.Reset()
	if code := run(t.Context(), []string{"serve", "--listen", "127.0.0.1:18099", "--admin-listen", "127.0.0.1:18099"}, &bytes.Buffer{}, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "the admin API needs a listener of its own") {
		t.Errorf("--admin-listen on the data plane's address: exit %d, stderr %q; want 2 saying so", code, stderr.String())
	}
}

// TestStateCommandLine checks admit state's refusals of its command line (exit 2), an admin API it
// cannot reach (exit 1), and its help.
func TestStateCommandLine(t *testing.T) {
	t.Setenv(adminTokenEnv, testAdminToken)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{nil, "--key is required"},
		{[]string{"--key", "k", "--tier", "pro"}, "--tier needs --policy"},
		{[]string{"--key", "k", "extra"}, `unexpected argument "extra"`},
		{[]string{"--key", "k", "--bogus"}, "flag provided but not defined: --bogus"},
		{[]string{"--key", "k", "--admin", "127.0.0.1:8082"}, `--admin "127.0.0.1:8082": want http://host:port`},
		{[]string{"--key", "k", "--admin", "ftp://h:1"}, "want http://host:port"},
		{[]string{"--key", "k", "--admin", "http://u:p@h:1"}, "want no user, query or fragment"},
		{[]string{"--key", "k", "--admin-token-file", "/nonexistent/token"}, "--admin-token-file: open /nonexistent/token"},
	} {
		code, out, errs := stateCmd(t, c.args...)
		if code != exitUsage || out != "" || !strings.Contains(errs, c.msg) || !strings.Contains(errs, "Run 'admit state --help'") {
			t.Errorf("admit state %q: exit %d, stdout %q, stderr %q; want 2 saying %q", c.args, code, out, errs, c.msg)
		}
	}
	if code, out, errs := stateCmd(t, "--admin", "http://"+redistest.ClosedPort(t), "--key", "k"); code != exitError || out != "" || !strings.Contains(errs, "connection refused") {
		t.Errorf("an unreachable admin API: exit %d, stdout %q, stderr %q; want 1", code, out, errs)
	}
	if code, out, _ := stateCmd(t, "--help"); code != exitOK || !strings.Contains(out, "Exit status") || !strings.Contains(out, "--admin URL") {
		t.Errorf("--help: exit %d:\n%s", code, out)
	}
}

// TestE2EAdminState runs the admit binary as admit serve on Redis with an admin token, and as
// admit state against it: the state of a subject /v1/check counted, read twice, unchanged.
func TestE2EAdminState(t *testing.T) {
	redis := redistest.Start(t)
	env := admitEnv(secretEnv+"="+testSecret, adminTokenEnv+"="+testAdminToken)
	p := startAdmitEnv(t, env, "--redis", redis.URL(), "--admin-listen", "127.0.0.1:0")
	adminURL := "http://" + p.logs.waitAdminAddr(t)
	for range 2 {
		if res := postCheck(t, p, `{"policy":"demo","key":"alice"}`); res.status != http.StatusOK {
			t.Fatalf("POST /v1/check = %+v; want 200", res)
		}
	}
	for range 2 {
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		cmd := exec.CommandContext(ctx, admitBinary(t), "state", "--admin", adminURL, "--policy", "demo", "--key", "alice")
		cmd.Env = env
		out, err := cmd.Output()
		cancel()
		var st admin.StateResponse
		if err != nil || json.Unmarshal(out, &st) != nil || len(st.Decisions) != 1 || st.Decisions[0].Remaining != 1 || st.Decisions[0].Limited {
			t.Fatalf("admit state: %v, %s; want demo with 1 remaining", err, out)
		}
	}
	cmd := exec.Command(admitBinary(t), "state", "--admin", adminURL, "--key", "alice")
	cmd.Env = admitEnv(adminTokenEnv + "=wrong-token-5e1f9c2b7a3d0e84")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	var exit *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &exit) || exit.ExitCode() != exitError || !strings.Contains(stderr.String(), "401 Unauthorized") {
		t.Errorf("admit state with a wrong token: %v, stderr %q; want exit 1, 401", err, stderr.String())
	}
}
