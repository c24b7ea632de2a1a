package proxytest_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHAProxy runs haproxy with the shipped deploy/haproxy/haproxy.cfg and admit.lua, the file's
// ports and the script's path changed, in front of an app and admit serve (testProxy); then with
// its balancer line uncommented (checkBalancer). HAProxy answers 503 when it cannot reach the app;
// its body is not the configuration's.
func TestHAProxy(t *testing.T) {
	haproxy := program(t, "haproxy", "haproxy")
	script, err := filepath.Abs("../haproxy/admit.lua")
	if err != nil {
		t.Fatal(err)
	}
	run := func(edits ...string) startFunc {
		return func(t *testing.T, admitAddr, appAddr string) (*process, string) {
			return startHAProxy(t, haproxy, script, admitAddr, appAddr, edits)
		}
	}
	testProxy(t, http.StatusServiceUnavailable, run())
	t.Run("behind_balancer", func(t *testing.T) {
		checkBalancer(t, run("# http-request set-var(txn.admit_key) req.hdr_ip(x-forwarded-for,-1) if { src 10.0.0.0/8 }",
			"http-request set-var(txn.admit_key) req.hdr_ip(x-forwarded-for,-1) if { src 127.0.0.1/32 }"))
	})
}

// startHAProxy starts haproxy with the shipped haproxy.cfg and the script admit.lua at script,
// asking admit at admitAddr, in front of the app at appAddr, the file's edits ("old", "new", ...)
// made too.
func startHAProxy(t *testing.T, haproxy, script, admitAddr, appAddr string, edits []string) (*process, string) {
	t.Helper()
	p, base := startProxy(t, func(port int) *process {
		dir := t.TempDir()
		conf := render(t, "../haproxy/haproxy.cfg", append([]string{
			"bind :80", "bind 127.0.0.1:" + strconv.Itoa(port),
			"lua-load /etc/haproxy/admit.lua", "lua-load " + script,
			"http://127.0.0.1:8080/v1/check", "http://" + admitAddr + "/v1/check",
			"server app 127.0.0.1:3000", "server app " + appAddr}, edits...)...)
		file := filepath.Join(dir, "haproxy.cfg")
		if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		return start(t, "haproxy", dir, nil, haproxy, "-f", file, "-db")
	})
	t.Cleanup(func() {
		if strings.Contains(p.out.String(), "[ALERT]") {
			t.Errorf("haproxy logged an alert:\n%s", p.out)
		}
	})
	return p, base
}
