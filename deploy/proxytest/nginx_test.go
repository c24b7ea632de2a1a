package proxytest_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// nginxMain is the main configuration the test runs deploy/nginx/admit.conf in: nginx in the
// foreground as one process (no master, so killing it leaves no worker behind), everything it
// writes in the test's directory DIR, its errors on stderr.
const nginxMain = `daemon off;
master_process off;
pid DIR/nginx.pid;
error_log stderr notice;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path DIR/client_body;
    proxy_temp_path DIR/proxy;
    fastcgi_temp_path DIR/fastcgi;
    uwsgi_temp_path DIR/uwsgi;
    scgi_temp_path DIR/scgi;
    include DIR/admit.conf;
}
`

// nginxBalancer are the edits deploy/nginx/README.md asks for behind a load balancer: the realip
// lines uncommented, the balancer's addresses 127.0.0.1 (the test's client plays it).
var nginxBalancer = []string{
	"# set_real_ip_from 10.0.0.0/8;", "set_real_ip_from 127.0.0.1/32;",
	"# real_ip_header X-Forwarded-For;", "real_ip_header X-Forwarded-For;",
	"# real_ip_recursive on;", "real_ip_recursive on;",
}

// TestNginx runs nginx with the shipped deploy/nginx/admit.conf, its ports changed, in front of an
// app and admit serve (testProxy); then with its realip lines uncommented (checkBalancer).
func TestNginx(t *testing.T) {
	nginx := program(t, "nginx", "nginx")
	run := func(edits ...string) startFunc {
		return func(t *testing.T, admitAddr, appAddr string) (*process, string) {
			return startProxy(t, func(port int) *process {
				dir := t.TempDir()
				conf := render(t, "../nginx/admit.conf", append([]string{
					"listen 80;", "listen 127.0.0.1:" + strconv.Itoa(port) + ";",
					"server 127.0.0.1:8080;", "server " + admitAddr + ";",
					"server 127.0.0.1:3000;", "server " + appAddr + ";"}, edits...)...)
				main := filepath.Join(dir, "nginx.conf")
				for name, text := range map[string]string{"admit.conf": conf, "nginx.conf": replaceDir(nginxMain, dir)} {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return start(t, "nginx", dir, nil, nginx, "-p", dir, "-c", main, "-e", "stderr")
			})
		}
	}
	testProxy(t, http.StatusBadGateway, run())
	t.Run("behind_balancer", func(t *testing.T) { checkBalancer(t, run(nginxBalancer...)) })
}
