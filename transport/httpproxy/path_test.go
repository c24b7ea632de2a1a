package httpproxy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// pathConfig limits the resources under /ip/ to 2 an hour per client, and everything else to
// 1,000: a path that escaped the first route would be limited by the second, under another
// route's budget. Without its last route (pathConfigNoCatchAll), it would be unlimited.
const pathConfig = pathConfigNoCatchAll + `
  - path_prefix: /
    policies: [rest]
`

// pathConfigNoCatchAll is pathConfig without its route of /: only /ip/ is limited.
const pathConfigNoCatchAll = `
policies:
  - name: ip
    algorithm: fixed_window
    limit: 2
    window: 1h
  - name: rest
    algorithm: fixed_window
    limit: 1000
    window: 1h
routes:
  - path_prefix: /ip/
    policies: [ip]`

// lenientResource returns the resource that the most lenient of servers serves for the escaped
// path it is sent: it decodes the path three times over (a double-decoding app), reads a
// backslash as a slash (Windows), drops the ;parameters of each segment (Tomcat, Jetty, Spring),
// drops the trailing dots and spaces of each segment (Windows, IIS), and cleans the result
// (nginx's merge_slashes, every framework's dot-segment removal). Paths stay case-sensitive.
func lenientResource(escaped string) string {
	p := escaped
	for range 3 {
		if u, err := url.PathUnescape(p); err == nil {
			p = u
		}
	}
	p = strings.ReplaceAll(p, `\`, "/")
	segs := strings.Split(p, "/")
	for i, s := range segs {
		s, _, _ = strings.Cut(s, ";")
		if s != "." && s != ".." {
			s = strings.TrimRight(s, ". ")
		}
		segs[i] = s
	}
	return path.Clean("/" + strings.Join(segs, "/"))
}

// rawGet sends "METHOD target HTTP/1.1" to the server at base exactly as written, as
// `curl --path-as-is` does, and returns the answer.
func rawGet(t *testing.T, base, method, target string) result {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, method+" "+target+" HTTP/1.1\r\nHost: "+u.Host+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return result{resp.StatusCode, resp.Header, string(body)}
}

// The outcomes a path form may have.
const (
	limited  = "limited"  // decided by the /ip/ route: 429 once its budget is spent
	refused  = "refused"  // answered 400 and never forwarded
	redirect = "redirect" // answered 308 to the canonical path, and never forwarded
	other    = "other"    // forwarded as a resource outside /ip/, under the / route if any
)

// TestPathForms sends traversal and encoding forms of the path /ip/x through the proxy to a real
// upstream that serves, for each, the resource the most lenient of servers would
// (lenientResource). After the /ip/ route's budget of 2 is spent on /ip/x, every form must be
// limited by that route, refused, redirected to its canonical path, or be a resource outside
// /ip/ even for the lenient upstream; the upstream never serves a resource under /ip/ more than
// twice. It runs once with a catch-all route of / after /ip/'s, and once without, where a path
// that escaped /ip/ would be forwarded unlimited.
func TestPathForms(t *testing.T) {
	t.Run("catch-all", func(t *testing.T) { testPathForms(t, pathConfig, `"rest";q=1000;w=3600`) })
	t.Run("no catch-all", func(t *testing.T) { testPathForms(t, pathConfigNoCatchAll+"\n", "") })
}

// testPathForms is TestPathForms under config, where a path outside /ip/ is answered with the
// RateLimit-Policy rest.
func testPathForms(t *testing.T, config, rest string) {
	for _, tc := range []struct {
		method, target string
		want           string
		location       string // the Location of a redirect
	}{
		{"GET", "/ip/x", limited, ""},
		{"GET", "/%69p/x", limited, ""}, // an encoded letter: the decoded path is /ip/x
		{"GET", "/ip/x?a=b", limited, ""},
		{"GET", "/ip/x;jsessionid=1", limited, ""}, // the same route with and without the parameter
		{"GET", "//ip/x", redirect, "/ip/x"},
		{"HEAD", "//ip/x", redirect, "/ip/x"},
		{"GET", "//ip/x?a=b", redirect, "/ip/x?a=b"},
		{"GET", "http://example.com//ip/x", redirect, "/ip/x"}, // the absolute form
		{"GET", "/./ip/x", redirect, "/ip/x"},
		{"GET", "/ip/./x", redirect, "/ip/x"},
		{"GET", "/ip//x", redirect, "/ip/x"},
		{"GET", "/a/../ip/x", redirect, "/ip/x"},
		{"GET", "/../ip/x", redirect, "/ip/x"},
		{"GET", "/ip/y/../x", redirect, "/ip/x"},
		{"GET", "/ip/x/.", redirect, "/ip/x"},
		{"GET", "/ip/x/./", redirect, "/ip/x/"},
		{"POST", "//ip/x", refused, ""}, // only GET and HEAD are redirected
		{"POST", "/./ip/x", refused, ""},
		{"DELETE", "/a/../ip/x", refused, ""},
		{"GET", "/%2e/ip/x", refused, ""},
		{"GET", "/%2E%2E/ip/x", refused, ""},
		{"GET", "/a/%2e%2e/ip/x", refused, ""},
		{"GET", "/ip%2fx", refused, ""},
		{"GET", "/ip%2Fx", refused, ""},
		{"GET", "/%2fip/x", refused, ""},
		{"GET", "/a%2f..%2fip/x", refused, ""},
		{"GET", "/ip%252fx", refused, ""}, // double-encoded
		{"GET", "/%252e/ip/x", refused, ""},
		{"GET", `/ip\x`, refused, ""},
		{"GET", "/ip%5cx", refused, ""},
		{"GET", "/ip./x", refused, ""}, // trailing dots
		{"GET", "/ip../x", refused, ""},
		{"GET", "/ip.%20/x", refused, ""},
		{"GET", "/ip/x.", refused, ""},
		{"GET", "/ip%20/x", refused, ""}, // a trailing space
		{"GET", "/ip;x/x", refused, ""},  // ;parameters that hide the route
		{"GET", "/ip;/x", refused, ""},
		{"GET", "/ip%3bx/x", refused, ""},
		{"GET", "/a/..;/ip/x", refused, ""},
		{"GET", "/ip/..;/ip/x", refused, ""},
		{"GET", "/ip/;x/x", refused, ""},
		{"GET", "/ip/x%00", refused, ""},     // a control character
		{"GET", "/ip/%c0%af", refused, ""},   // not UTF-8 (an overlong /)
		{"GET", "/%u002e/ip/x", refused, ""}, // not a percent-encoding at all
		{"GET", "*", refused, ""},
		{"GET", "/IP/x", other, ""}, // routes are case-sensitive, as this upstream is
		{"GET", "/Ip/x", other, ""},
		{"GET", "/ipx", other, ""},
	} {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			var ipHits atomic.Int64
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				res := lenientResource(r.URL.EscapedPath())
				if strings.HasPrefix(res, "/ip/") {
					ipHits.Add(1)
				}
				io.WriteString(w, "resource "+res+"\n")
			})
			base := newProxy(t, config, up.URL)
			for i := range 2 {
				if r := rawGet(t, base, "GET", "/ip/x"); r.status != 200 || r.body != "resource /ip/x\n" {
					t.Fatalf("canonical request %d: %d %q; want 200 from the upstream", i, r.status, r.body)
				}
			}
			for i := range 3 {
				r := rawGet(t, base, tc.method, tc.target)
				switch tc.want {
				case limited:
					if r.status != 429 {
						t.Errorf("request %d: %d %q; want 429: limited by the /ip/ route, whose budget is spent", i, r.status, r.body)
					}
				case refused:
					if r.status != 400 {
						t.Errorf("request %d: %d %q; want 400", i, r.status, r.body)
					}
				case redirect:
					if r.status != 308 || r.header.Get("Location") != tc.location {
						t.Errorf("request %d: %d, Location %q; want 308 to %q", i, r.status, r.header.Get("Location"), tc.location)
					}
				case other:
					if r.status != 200 || strings.HasPrefix(r.body, "resource /ip/") || r.header.Get("RateLimit-Policy") != rest {
						t.Errorf("request %d: %d %q %v; want 200 from a resource outside /ip/, with RateLimit-Policy %q", i, r.status, r.body, r.header, rest)
					}
				}
			}
			if tc.want == redirect { // followed, the redirect is limited by the /ip/ route
				if r := rawGet(t, base, "GET", tc.location); r.status != 429 {
					t.Errorf("%s: %d; want 429", tc.location, r.status)
				}
			}
			if n := ipHits.Load(); n != 2 {
				t.Errorf("the upstream served a resource under /ip/ %d times; want 2, the /ip/ route's budget", n)
			}
			if tc.want != other && up.hits.Load() != 2 {
				t.Errorf("the upstream saw %d requests; want 2: a limited, refused or redirected path is never forwarded", up.hits.Load())
			}
		})
	}
}
