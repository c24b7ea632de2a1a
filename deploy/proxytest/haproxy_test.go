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
	return runHAProxy(t, haproxy, "../haproxy/haproxy.cfg", append([]string{
		"lua-load /etc/haproxy/admit.lua", "lua-load " + script,
		"http://127.0.0.1:8080/v1/check", "http://" + admitAddr + "/v1/check",
		"server app 127.0.0.1:3000", "server app " + appAddr}, edits...)...)
}

// runHAProxy starts haproxy with the shipped configuration file, its bind :80 moved to a free
// loopback port and each of replace ("old", "new", ...) made, and returns it with its base URL
// once it listens. An alert in its log fails the test.
func runHAProxy(t *testing.T, haproxy, file string, replace ...string) (*process, string) {
	t.Helper()
	p, base := startProxy(t, func(port int) *process {
		dir := t.TempDir()
		conf := render(t, file, append([]string{"bind :80", "bind 127.0.0.1:" + strconv.Itoa(port)}, replace...)...)
		cfg := filepath.Join(dir, "haproxy.cfg")
		if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		return start(t, "haproxy", dir, nil, haproxy, "-f", cfg, "-db")
	})
	t.Cleanup(func() {
		if strings.Contains(p.out.String(), "[ALERT]") {
			t.Errorf("haproxy logged an alert:\n%s", p.out)
		}
	})
	return p, base
}

// hopAddr is the loopback address HAProxy connects to admit proxy from in TestHAProxyAdmitProxy:
// the one admit proxy trusts, which none of the test's clients (127.0.0.1 to .4) has.
const hopAddr = "127.0.0.10"

// shippedPolicies is the policy of deploy/haproxy/admit-proxy.yaml, which the test replaces with
// admitConfig's, 3 an hour, so that no request of the test is let through by a refill.
const shippedPolicies = `policies:
  - name: per-ip
    algorithm: gcra
    limit: 10
    window: 1s
    burst: 20
`

// TestHAProxyAdmitProxy runs the no-script way: haproxy with the shipped haproxy-proxy.cfg in
// front of admit proxy with the shipped admit-proxy.yaml (their addresses changed, and the
// policy admitConfig's), in front of an app. It passes checkProxy (with admit proxy stopped,
// HAProxy's own 503); admit proxy's Redis down is its 503; the app down is admit proxy's 502.
// An admit proxy that accepts and never answers is, to HAProxy, a slow app: its timeout server
// (30 s) answers 504, which this test does not wait for.
func TestHAProxyAdmitProxy(t *testing.T) {
	haproxy := program(t, "haproxy", "haproxy")
	client(t, hopAddr) // skips where hopAddr is not a loopback address
	run := func(t *testing.T, upstream string, args ...string) (*process, *process, string) {
		config := render(t, "../haproxy/admit-proxy.yaml",
			"trusted_proxies: [127.0.0.1/32]", "trusted_proxies: ["+hopAddr+"/32]",
			shippedPolicies, admitConfig)
		adm, admitAddr := runAdmit(t, "proxy", config, append([]string{"--upstream", "http://" + upstream}, args...)...)
		p, base := runHAProxy(t, haproxy, "../haproxy/haproxy-proxy.cfg",
			"server admit 127.0.0.1:8000", "server admit "+admitAddr+" source "+hopAddr)
		return adm, p, base
	}
	t.Run("decisions", func(t *testing.T) {
		a := startApp(t)
		adm, p, base := run(t, a.addr())
		checkProxy(t, base, a, adm)
		select {
		case <-p.exited:
			t.Errorf("haproxy exited during the test; its log:\n%s", p.out)
		default:
		}
	})
	t.Run("admit_undecided", func(t *testing.T) {
		a := startApp(t)
		_, _, base := run(t, a.addr(), "--redis", "redis://"+closedPort(t))
		got := get(t, client(t, "127.0.0.1"), base+"/")
		if got.status != http.StatusServiceUnavailable || !strings.Contains(got.body, unavailableBody) {
			t.Errorf("with admit proxy's Redis down: %d %q, want 503 saying %q", got.status, got.body, unavailableBody)
		}
		wantRetryAfter(t, "with admit proxy's Redis down (503)", got, 60)
		if n := a.hits.Load(); n != 0 {
			t.Errorf("with admit proxy's Redis down the app received %d requests, want none (fail closed)", n)
		}
	})
	t.Run("app_down", func(t *testing.T) {
		_, _, base := run(t, closedPort(t))
		if got := get(t, client(t, "127.0.0.1"), base+"/"); got.status != http.StatusBadGateway || strings.Contains(got.body, unavailableBody) {
			t.Errorf("with the app down: %d %q, want admit proxy's 502, not saying %q: the app is down, not admit", got.status, got.body, unavailableBody)
		}
	})
}
