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

// overrideCmd runs "admit override args…" in this process and returns its exit code, stdout and
// stderr.
func overrideCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), append([]string{"override"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestServeAdminOverride runs admit serve with an admin token and admit override against it: the
// demo account spent, raised, listed by its digest, deleted; the refusals' exit codes; the audit
// records without the subject; admit_admin_changes_total and admit_overrides.
func TestServeAdminOverride(t *testing.T) {
	useSecret(t)
	t.Setenv(adminTokenEnv, testAdminToken)
	base, logs, stop := serveInProcess(t, "--admin-listen", "127.0.0.1:0")
	adminURL := "http://" + logs.waitAdminAddr(t)
	checkDemo(t, base, 200, 200, 200, 429)
	digest := strings.TrimSuffix(readmeDemoKey[strings.Index(readmeDemoKey, "{")+1:], "}")

	code, out, errs := overrideCmd(t, "set", "--admin", adminURL, "--policy", "demo", "--key", "demo-account", "--limit", "50", "--expires-in", "7d", "--reason", "ticket 12")
	var got admin.OverrideResponse
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != exitOK || errs != "" || got.Policy != "demo" || got.Digest != digest || got.Limit != 50 || got.ExpiresAt == "" {
		t.Fatalf("admit override set: exit %d, %s (%v), stderr %q; want 0 and the override of the demo account", code, out, err, errs)
	}
	checkDemo(t, base, 200) // the spent account is admitted again, under 50
	code, out, _ = stateCmd(t, "--admin", adminURL, "--key", "demo-account")
	if code != exitOK || !strings.Contains(out, `"source": "override"`) || !strings.Contains(out, `"reason": "ticket 12"`) || !strings.Contains(out, `"limit": 50`) {
		t.Errorf("admit state under the override: exit %d, %s; want source override, 50, the reason", code, out)
	}
	code, out, errs = overrideCmd(t, "list", "--admin", adminURL, "--policy", "demo")
	var list admin.OverridesResponse
	if err := json.Unmarshal([]byte(out), &list); err != nil || code != exitOK || len(list.Overrides) != 1 || list.Overrides[0].Digest != digest || strings.Contains(out, "demo-account") {
		t.Errorf("admit override list: exit %d, %s (%v), stderr %q; want the one override, by digest", code, out, err, errs)
	}
	if m := regexp.MustCompile(`(?m)^admit_overrides\{policy="demo"\} (\S+)$`).FindStringSubmatch(get(t, base+"/metrics").body); m == nil || m[1] != "1" {
		t.Errorf("admit_overrides{policy=demo}: %v; want 1", m)
	}
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"set", "--policy", "nope", "--key", "k", "--limit", "5"}, `admit override set: 400 Bad Request: invalid request: unknown policy "nope"`},
		{[]string{"set", "--policy", "demo", "--key", "k", "--limit", "5", "--burst", "2"}, `has no burst`},
		{[]string{"delete", "--policy", "demo", "--key", "nobody"}, `admit override delete: 404 Not Found: no override`},
	} {
		code, out, errs := overrideCmd(t, append(c.args[:1:1], append([]string{"--admin", adminURL}, c.args[1:]...)...)...)
		if code != exitError || out != "" || !strings.Contains(errs, c.err) {
			t.Errorf("admit override %q: exit %d, stdout %q, stderr %q; want 1 saying %q", c.args, code, out, errs, c.err)
		}
	}
	code, out, errs = overrideCmd(t, "delete", "--admin", adminURL, "--policy", "demo", "--key", "demo-account", "--reason", "done")
	if code != exitOK || !strings.Contains(out, `"deleted": true`) {
		t.Errorf("admit override delete: exit %d, %s, stderr %q; want 0, deleted", code, out, errs)
	}
	code, out, _ = stateCmd(t, "--admin", adminURL, "--key", "demo-account")
	if code != exitOK || !strings.Contains(out, `"source": "policy"`) || !strings.Contains(out, `"limit": 3`) {
		t.Errorf("admit state after the delete: exit %d, %s; want the policy's 3", code, out)
	}
	metrics := get(t, base+"/metrics").body
	for _, want := range []string{`admit_admin_changes_total{action="override_set"} 1`, `admit_admin_changes_total{action="override_delete"} 1`, `admit_overrides{policy="demo"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	stop()
	for _, want := range []string{
		`msg="admin change" action=override_set policy=demo subject_digest=` + digest + ` reason="ticket 12" client=127.0.0.1 result=ok`,
		`msg="admin change" action=override_delete policy=demo subject_digest=` + digest + ` reason=done client=127.0.0.1 result=ok`,
		`msg="admin change" action=override_set policy=nope subject_digest=`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs.String(), "demo-account") {
		t.Errorf("the log holds the subject:\n%s", logs)
	}
}

// TestOverrideCommandLine checks admit override's refusals of its command line (exit 2), an admin
// API it cannot reach (exit 1), and its help.
func TestOverrideCommandLine(t *testing.T) {
	t.Setenv(adminTokenEnv, testAdminToken)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{nil, "want set, delete or list"},
		{[]string{"raise"}, `unknown subcommand "raise"`},
		{[]string{"set", "--key", "k", "--limit", "5"}, "--policy is required"},
		{[]string{"set", "--policy", "p", "--limit", "5"}, "--key is required"},
		{[]string{"set", "--policy", "p", "--key", "k"}, "--limit is required"},
		{[]string{"set", "--policy", "p", "--key", "k", "--limit", "0"}, "--limit 0; want 1 or more"},
		{[]string{"set", "--policy", "p", "--key", "k", "--limit", "x"}, `invalid value "x" for flag --limit`},
		{[]string{"set", "--policy", "p", "--key", "k", "--limit", "5", "--burst", "-1"}, "--burst -1; want 0 or more"},
		{[]string{"set", "--policy", "p", "--key", "k", "--limit", "5", "--cursor", "c"}, "--cursor is not a flag of admit override set"},
		{[]string{"set", "--policy", "p", "--key", strings.Repeat("k", admin.MaxKeyLen+1), "--limit", "5"}, "--key of 8193 bytes; want at most 8192"},
		{[]string{"set", "--policy", "p", "--key", "k", "--limit", "5", "--reason", strings.Repeat("r", admin.MaxReasonLen+1)}, "--reason of 201 bytes; want at most 200"},
		{[]string{"delete", "--policy", "p", "--key", "k", "--limit", "5"}, "--limit is not a flag of admit override delete"},
		{[]string{"delete", "--policy", "p"}, "--key is required"},
		{[]string{"list", "--policy", "p", "--key", "k"}, "--key is not a flag of admit override list"},
		{[]string{"list", "--policy", "p", "--n", "1001"}, "--n 1001; want 1-1000"},
		{[]string{"list", "--policy", "p", "extra"}, `unexpected argument "extra"`},
		{[]string{"list", "--policy", "p", "--admin", "127.0.0.1:8082"}, `--admin "127.0.0.1:8082": want http://host:port`},
		{[]string{"list", "--policy", "p", "--admin-token-file", "/nonexistent/token"}, "--admin-token-file: open /nonexistent/token"},
	} {
		code, out, errs := overrideCmd(t, c.args...)
		if code != exitUsage || out != "" || !strings.Contains(errs, c.msg) || !strings.Contains(errs, "Run 'admit override --help'") {
			t.Errorf("admit override %.80q: exit %d, stdout %q, stderr %.200q; want 2 saying %q", c.args, code, out, errs, c.msg)
		}
	}
	t.Setenv(adminTokenEnv, "")
	if code, _, errs := overrideCmd(t, "list", "--policy", "p"); code != exitUsage || !strings.Contains(errs, "no admin token") {
		t.Errorf("no token: exit %d, stderr %q; want 2", code, errs)
	}
	t.Setenv(adminTokenEnv, testAdminToken)
	if code, out, errs := overrideCmd(t, "list", "--admin", "http://"+redistest.ClosedPort(t), "--policy", "p"); code != exitError || out != "" || !strings.Contains(errs, "connection refused") {
		t.Errorf("an unreachable admin API: exit %d, stdout %q, stderr %q; want 1", code, out, errs)
	}
	for _, args := range [][]string{{"override", "--help"}, {"help", "override"}, {"override", "set", "--help"}} {
		var stdout bytes.Buffer
		if code := run(t.Context(), args, &stdout, &bytes.Buffer{}); code != exitOK || !strings.Contains(stdout.String(), "Exit status") ||
			!strings.Contains(stdout.String(), "--expires-in DURATION") || !strings.Contains(stdout.String(), "admit override set") {
			t.Errorf("admit %q: exit %d:\n%s", args, code, &stdout)
		}
	}
}

// TestServeAdminCorruptOverride runs admit serve on a real Redis with the admin API, sets an
// override of the demo account, then writes bytes no admit writes at its key: the demo answers
// 503 and leaves the key as it was, admit state prints the policy marked corrupt (exit 0), admit
// override list fails saying the override is corrupt (exit 1), and deleting the override mends it.
func TestServeAdminCorruptOverride(t *testing.T) {
	useSecret(t)
	t.Setenv(adminTokenEnv, testAdminToken)
	srv := redistest.Start(t)
	base, logs, stop := serveInProcess(t, "--redis", srv.URL(), "--admin-listen", "127.0.0.1:0")
	defer stop()
	adminURL := "http://" + logs.waitAdminAddr(t)
	if code, out, errs := overrideCmd(t, "set", "--admin", adminURL, "--policy", "demo", "--key", "demo-account", "--limit", "50"); code != exitOK {
		t.Fatalf("admit override set: exit %d, %s, stderr %q", code, out, errs)
	}
	keys, err := srv.Do(t, "KEYS", "rl:demo:o:{*").AsStrSlice()
	if err != nil || len(keys) != 1 {
		t.Fatalf("KEYS of the override = %q, %v; want one", keys, err)
	}
	const garbage = "fifty"
	srv.Do(t, "SET", keys[0], garbage)

	checkDemo(t, base, 503)
	code, out, errs := stateCmd(t, "--admin", adminURL, "--key", "demo-account")
	var st admin.StateResponse
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != exitOK || errs != "" || len(st.Decisions) != 1 || !st.Decisions[0].Corrupt ||
		!strings.Contains(st.Decisions[0].Error, keys[0]) || !strings.Contains(out, `"corrupt": true`) {
		t.Errorf("admit state under a corrupt override: exit %d, %s (%v), stderr %q; want 0 and demo marked corrupt, naming %s", code, out, err, errs, keys[0])
	}
	code, out, errs = overrideCmd(t, "list", "--admin", adminURL, "--policy", "demo")
	if code != exitError || out != "" || !strings.Contains(errs, "503 Service Unavailable: override state is corrupt") || !strings.Contains(errs, keys[0]) {
		t.Errorf("admit override list of a corrupt override: exit %d, stdout %q, stderr %q; want 1 saying it is corrupt, naming %s", code, out, errs, keys[0])
	}
	if v, err := srv.Do(t, "GET", keys[0]).ToString(); err != nil || v != garbage {
		t.Errorf("the corrupt override is now %q, %v; want it unchanged", v, err)
	}
	if code, out, errs := overrideCmd(t, "delete", "--admin", adminURL, "--policy", "demo", "--key", "demo-account"); code != exitOK {
		t.Fatalf("admit override delete of the corrupt override: exit %d, %s, stderr %q; want 0", code, out, errs)
	}
	checkDemo(t, base, 200)
}
