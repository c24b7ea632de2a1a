// Package systemd_test checks admit.service with systemd's own tools: systemd-analyze verify
// finds nothing, systemd-analyze security rates its exposure at most maxExposure, and its
// ExecStart and ExecReload do what the unit says with a real admit.
package systemd_test

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// installed is where the unit expects the binary.
const installed = "/usr/local/bin/admit"

// maxExposure is the highest overall exposure systemd-analyze security may give the unit; it
// gave 1.1 when the unit was written. Raise it only with a reason in the commit.
const maxExposure = 1.5

// requireEnv names the environment variable that turns a skip for a missing systemd-analyze into
// a failure, as it does for redis-server: make test sets it.
const requireEnv = "ADMIT_REQUIRE_REDIS"

// analyze returns the path of systemd-analyze, skipping t loudly without it (failing it when
// requireEnv is 1).
func analyze(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err == nil {
		return p
	}
	if os.Getenv(requireEnv) == "1" {
		t.Fatalf("systemd-analyze not found on PATH and %s=1: install it with: apt-get install systemd", requireEnv)
	}
	t.Skip("systemd-analyze not found: admit.service was NOT VERIFIED; install it (apt-get install systemd) or run make test")
	return ""
}

// unitWithBinary builds admit and writes a copy of admit.service whose ExecStart runs it, and
// returns the copy's path and the binary's.
func unitWithBinary(t *testing.T) (unit, bin string) {
	t.Helper()
	dir := t.TempDir()
	bin = filepath.Join(dir, "admit")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/admit")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	text, err := os.ReadFile("admit.service")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), "ExecStart="+installed+" ") {
		t.Fatalf("admit.service: no ExecStart=%s", installed)
	}
	unit = filepath.Join(dir, "admit.service")
	if err := os.WriteFile(unit, []byte(strings.ReplaceAll(string(text), installed, bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	return unit, bin
}

// settings returns the unit's KEY=value lines, the values of a key repeated joined by a newline.
func settings(t *testing.T) map[string]string {
	t.Helper()
	text, err := os.ReadFile("admit.service")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for line := range strings.Lines(string(text)) {
		line = strings.TrimSpace(line)
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if old, dup := m[k]; dup {
			v = old + "\n" + v
		}
		m[k] = v
	}
	return m
}

// TestUnitSettings checks that the unit keeps the settings it is installed for.
func TestUnitSettings(t *testing.T) {
	s := settings(t)
	for k, v := range map[string]string{
		"DynamicUser":             "yes",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"NoNewPrivileges":         "yes",
		"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
		"CapabilityBoundingSet":   "",
		"LoadCredential":          "hmac-secret:/etc/admit/hmac-secret",
		"ExecReload":              "/bin/kill -HUP $MAINPID",
		"Restart":                 "on-failure",
		"ExecStart":               installed + " serve --config /etc/admit/admit.yaml --hmac-secret-file %d/hmac-secret",
	} {
		if got, ok := s[k]; !ok || got != v {
			t.Errorf("admit.service: %s=%q (set: %v), want %q", k, got, ok, v)
		}
	}
	if !strings.HasPrefix(s["SystemCallFilter"], "@system-service\n") {
		t.Errorf("admit.service: SystemCallFilter=%q, want @system-service first", s["SystemCallFilter"])
	}
}

// TestVerify runs systemd-analyze verify on the unit, its ExecStart a built admit: any output fails.
func TestVerify(t *testing.T) {
	sa := analyze(t)
	unit, _ := unitWithBinary(t)
	out, err := exec.Command(sa, "verify", unit).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// exposureRE matches the last line of systemd-analyze security.
var exposureRE = regexp.MustCompile(`Overall exposure level for admit\.service: ([0-9.]+) (\w+)`)

// TestSecurityExposure runs systemd-analyze security --offline=yes on the unit and checks its
// overall exposure.
func TestSecurityExposure(t *testing.T) {
	sa := analyze(t)
	unit, _ := unitWithBinary(t)
	out, err := exec.Command(sa, "security", "--offline=yes", unit).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := exposureRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security printed no overall exposure:\n%s", out)
	}
	exposure, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("systemd-analyze security --offline=yes: exposure %.1f %s", exposure, m[2])
	if exposure > maxExposure {
		t.Errorf("exposure %.1f %s, want at most %.1f:\n%s", exposure, m[2], maxExposure, out)
	}
}

// TestExecStartAndReload runs the unit's ExecStart with a built admit, %d a directory holding the
// credential and /etc/admit/admit.yaml a file of the test, checks /healthz, then sends SIGHUP as
// ExecReload does and waits for admit serve to reload the file.
func TestExecStartAndReload(t *testing.T) {
	_, bin := unitWithBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "admit.yaml")
	policy := "server:\n  listen: 127.0.0.1:0\npolicies:\n  - name: api\n    algorithm: fixed_window\n    limit: 10\n    window: 1s\n"
	if err := os.WriteFile(cfg, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hmac-secret"), []byte("0123456789abcdef-unit-test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	argv := strings.Fields(settings(t)["ExecStart"])
	for i, a := range argv {
		a = strings.ReplaceAll(a, "%d", dir)
		argv[i] = strings.ReplaceAll(a, "/etc/admit/admit.yaml", cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, argv[1:]...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines, read := make(chan string, 100), make(chan struct{})
	defer func() { cmd.Process.Kill(); <-read; cmd.Wait() }()
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Log(sc.Text())
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	wait := func(what string, re *regexp.Regexp) []string {
		t.Helper()
		for {
			select {
			case l := <-lines:
				if m := re.FindStringSubmatch(l); m != nil {
					return m
				}
			case <-ctx.Done():
				t.Fatalf("admit serve did not log %s within two minutes", what)
			}
		}
	}
	if m := wait("its secret from the credential", regexp.MustCompile(`msg="HMAC secret" source=(\S+)`)); m[1] == "random" {
		t.Errorf("admit serve used a random secret, not the credential's")
	}
	addr := wait("its address", regexp.MustCompile(`msg=listening addr=(\S+)`))[1]
	res, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("GET /healthz: %d, want 200", res.StatusCode)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	wait("the reload on SIGHUP", regexp.MustCompile(`msg="reloading the configuration".*cause=SIGHUP`))
}
