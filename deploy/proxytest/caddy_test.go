package proxytest_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/admit-dev/admit/internal/freeport"
)

// TestCaddy runs caddy with the shipped deploy/caddy/Caddyfile, its ports changed, in front of an
// app and admit serve (testProxy). Caddy's data, configuration and home are the test's.
func TestCaddy(t *testing.T) {
	caddy := program(t, "caddy", "caddy")
	testProxy(t, http.StatusBadGateway, func(t *testing.T, admitAddr, appAddr string) (*process, string) {
		return startProxy(t, func(port int) *process {
			dir := t.TempDir()
			conf := render(t, "../caddy/Caddyfile",
				":80 {", ":"+strconv.Itoa(port)+" {",
				"admin localhost:2019", "admin localhost:"+strconv.Itoa(freeport.Port(t)),
				"forward_auth 127.0.0.1:8080 {", "forward_auth "+admitAddr+" {",
				"reverse_proxy 127.0.0.1:3000", "reverse_proxy "+appAddr)
			file := filepath.Join(dir, "Caddyfile")
			if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}
			env := append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
			return start(t, "caddy", dir, env, caddy, "run", "--config", file, "--adapter", "caddyfile")
		})
	})
}
