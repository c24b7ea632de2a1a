package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/transport/admin"
)

// resetCmd runs "admit reset args…" in this process and returns its exit code, stdout and stderr.
func resetCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), append([]string{"reset"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// adminChanges returns admit_admin_changes_total{action="reset"} from base's /metrics, "missing" when
// there is no such series.
func adminChanges(t *testing.T, base string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^admit_admin_changes_total\{action="reset"\} (\S+)$`).FindStringSubmatch(get(t, base+"/metrics").body)
	if m == nil {
		return "missing"
	}
	return m[1]
}

// TestServeAdminReset runs admit serve with an admin token and admit reset against it: the demo
// account spent, reset, admitted again; the audit record with the subject's digest and never the
// subject; the refusals' exit codes; and admit_admin_changes_total counting the one reset made.
func TestServeAdminReset(t *testing.T) {
	useSecret(t)
	t.Setenv(adminTokenEnv, testAdminToken)
	base, logs, stop := serveInProcess(t, "--admin-listen", "127.0.0.1:0")
	adminURL := "http://" + logs.waitAdminAddr(t)
	checkDemo(t, base, 200, 200, 200, 429)
	if n := adminChanges(t, base); n != "0" {
		t.Errorf("admit_admin_changes_total{action=reset} before any reset: %s; want 0", n)
	}

	code, out, errs := resetCmd(t, "--admin", adminURL, "--policy", "demo", "--key", "demo-account", "--reason", "ticket 12")
	var res admin.ResetResponse
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != exitOK || errs != "" || res != (admin.ResetResponse{Reset: true, Policy: "demo", Keys: 1}) {
		t.Fatalf("admit reset: exit %d, %s (%v), stderr %q; want 0 and the demo policy's one key reset", code, out, err, errs)
	}
	if !strings.Contains(out, "\n  \"reset\": true") {
		t.Errorf("admit reset printed %q; want indented JSON", out)
	}
	checkDemo(t, base, 200, 200, 200, 429) // the whole allowance back
	for _, c := range []struct {
		args []string
		env  string // ADMIT_ADMIN_TOKEN
		code int
		err  string
	}{
		{[]string{"--policy", "nope", "--key", "k"}, testAdminToken, exitError, `admit reset: 404 Not Found: invalid request: unknown policy "nope"`},
		{[]string{"--key", "k"}, "wrong-token-5e1f9c2b7a3d0e84", exitError, "admit reset: 401 Unauthorized: unauthorized"},
		{[]string{"--key", "k"}, "", exitUsage, "no admin token: set ADMIT_ADMIN_TOKEN or --admin-token-file PATH"},
	} {
		t.Setenv(adminTokenEnv, c.env)
		code, out, errs := resetCmd(t, append([]string{"--admin", adminURL}, c.args...)...)
		if code != c.code || out != "" || !strings.Contains(errs, c.err) {
			t.Errorf("admit reset %q with token %q: exit %d, stdout %q, stderr %q; want %d saying %q", c.args, c.env, code, out, errs, c.code, c.err)
		}
	}
	checkDemo(t, base, 429) // the refused resets reset nothing
	if n := adminChanges(t, base); n != "1" {
		t.Errorf("admit_admin_changes_total{action=reset} after one reset and refusals: %s; want 1", n)
	}
	stop()
	digest := strings.TrimSuffix(readmeDemoKey[strings.Index(readmeDemoKey, "{")+1:], "}")
	for _, want := range []string{
		`msg="admin change" action=reset policy=demo subject_digest=` + digest + ` reason="ticket 12" client=127.0.0.1 result=ok`,
		`msg="admin change" action=reset policy=nope subject_digest=`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs.String(), "demo-account") {
		t.Errorf("the log holds the subject:\n%s", logs)
	}
}

// TestResetCommandLine checks admit reset's refusals of its command line (exit 2), an admin API it
// cannot reach (exit 1), and its help.
func TestResetCommandLine(t *testing.T) {
	t.Setenv(adminTokenEnv, testAdminToken)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{nil, "--key is required"},
		{[]string{"--policy", "demo"}, "--key is required"},
		{[]string{"--key", "k", "extra"}, `unexpected argument "extra"`},
		{[]string{"--key", "k", "--tier", "pro"}, "flag provided but not defined: --tier"},
		{[]string{"--key", strings.Repeat("k", admin.MaxKeyLen+1)}, "--key of 8193 bytes; want at most 8192"},
		{[]string{"--key", "k", "--reason", strings.Repeat("r", admin.MaxReasonLen+1)}, "--reason of 201 bytes; want at most 200"},
		{[]string{"--key", "k", "--admin", "127.0.0.1:8082"}, `--admin "127.0.0.1:8082": want http://host:port`},
		{[]string{"--key", "k", "--admin", "http://h:1/?x=1"}, "want no user, query or fragment"},
		{[]string{"--key", "k", "--admin-token-file", "/nonexistent/token"}, "--admin-token-file: open /nonexistent/token"},
	} {
		code, out, errs := resetCmd(t, c.args...)
		if code != exitUsage || out != "" || !strings.Contains(errs, c.msg) || !strings.Contains(errs, "Run 'admit reset --help'") {
			t.Errorf("admit reset %.60q: exit %d, stdout %q, stderr %.200q; want 2 saying %q", c.args, code, out, errs, c.msg)
		}
	}
	if code, out, errs := resetCmd(t, "--admin", "http://"+redistest.ClosedPort(t), "--key", "k"); code != exitError || out != "" || !strings.Contains(errs, "connection refused") {
		t.Errorf("an unreachable admin API: exit %d, stdout %q, stderr %q; want 1", code, out, errs)
	}
	for _, args := range [][]string{{"reset", "--help"}, {"help", "reset"}} {
		var stdout bytes.Buffer
		if code := run(t.Context(), args, &stdout, &bytes.Buffer{}); code != exitOK || !strings.Contains(stdout.String(), "Exit status") ||
			!strings.Contains(stdout.String(), "--reason TEXT") || !strings.Contains(stdout.String(), "Usage: admit reset") {
			t.Errorf("admit %q: exit %d:\n%s", args, code, &stdout)
		}
	}
}
