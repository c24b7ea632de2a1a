package httplimit_test

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/httplimit"
	"github.com/admit-dev/admit/internal/bound"
)

// The tests in this file run over real sockets: a server on 127.0.0.1, and clients bound to other
// loopback addresses (127.0.0.2, 127.0.0.3, …), so that the server sees distinct TCP peers.

// ipServer starts a server on 127.0.0.1 that limits requests by ci's client address under a
// fixed window of rate per hour, and answers an admitted request with that address.
func ipServer(t *testing.T, ci *httplimit.ClientIP, rate int64) string {
	t.Helper()
	m := &httplimit.Middleware{
		Limiter: newLimiter(t, newMemstore(t), admit.Limit{Name: "per-client", Algorithm: admit.FixedWindow, Rate: rate, Period: time.Hour}),
		Subject: ci.Subject,
		Logger:  slog.New(slog.DiscardHandler),
	}
	srv := httptest.NewServer(m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, err := ci.Resolve(r)
		if err != nil {
			t.Errorf("next handler: Resolve: %v", err)
		}
		fmt.Fprint(w, a)
	})))
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("server at %s, want 127.0.0.1", srv.URL)
	}
	return srv.URL
}

// peer is an HTTP client whose connections come from one loopback address.
type peer struct {
	t      *testing.T
	addr   string
	client *http.Client
}

// newPeer returns a client bound to the loopback address addr, such as 127.0.0.2.
func newPeer(t *testing.T, addr string) *peer {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}, Timeout: 5 * time.Second}
	if c, err := d.Dial("tcp", "127.0.0.1:1"); err != nil && strings.Contains(err.Error(), "assign requested address") {
		t.Skipf("cannot bind to %s on this machine (Linux routes all of 127.0.0.0/8 to loopback): %v", addr, err)
	} else if err == nil {
		c.Close()
	}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 2}
	t.Cleanup(tr.CloseIdleConnections)
	return &peer{t: t, addr: addr, client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

// get sends GET url with header and returns the status and body.
func (p *peer) get(url string, header http.Header) (int, string) {
	p.t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header = header
	res, err := p.client.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	return res.StatusCode, string(body)
}

// spoofedHeader returns forwarding headers of the kinds clients forge, with random values, some of
// them malformed.
func spoofedHeader(rng *rand.Rand) http.Header {
	ip := func() string {
		if rng.IntN(4) == 0 {
			return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(rng.Uint32()), 15: byte(rng.Uint32())}).String()
		}
		return netip.AddrFrom4([4]byte{byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())}).String()
	}
	junk := []string{"unknown", "_hidden", "not-an-ip", "[", strings.Repeat("9,", 50), `"`, "127.0.0.2"}
	h := http.Header{}
	for _, field := range []string{"X-Forwarded-For", "X-Real-Ip", "Forwarded", "True-Client-Ip", "Cf-Connecting-Ip"} {
		switch rng.IntN(4) {
		case 0: // absent
		case 1:
			h.Set(field, junk[rng.IntN(len(junk))])
		default:
			v := ip()
			if field == "Forwarded" {
				v = `for="` + v + `"`
			}
			h.Set(field, v)
		}
	}
	return h
}

// TestSpoofedHeadersFromUntrustedPeerNeverChooseABucket proves G8 (docs/guarantees.md): requests from one
// untrusted peer with random forged X-Forwarded-For, X-Real-IP and Forwarded fields share the
// peer's one bucket, are never answered 400, and leave another peer's bucket alone.
func TestSpoofedHeadersFromUntrustedPeerNeverChooseABucket(t *testing.T) {
	n := 10_000
	if testing.Short() {
		n = 500
	}
	for _, header := range []httplimit.ForwardedHeader{httplimit.XForwardedFor, httplimit.Forwarded} {
		t.Run(header.String(), func(t *testing.T) {
			const rate = 5
			// The proxies are elsewhere: no loopback peer is trusted.
			ci := newClientIP(t, httplimit.ClientIPConfig{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Header: header})
			url := ipServer(t, ci, rate)
			attacker, other := newPeer(t, "127.0.0.2"), newPeer(t, "127.0.0.3")
			rng := rand.New(rand.NewPCG(1, uint64(header)))
			count := map[int]int{}
			for range n / 2 { // half of n per header configuration
				code, body := attacker.get(url, spoofedHeader(rng))
				count[code]++
				if code == http.StatusOK && body != "127.0.0.2" {
					t.Fatalf("admitted as %q, want the peer 127.0.0.2", body)
				}
			}
			if count[http.StatusOK] != rate || count[http.StatusTooManyRequests] != n/2-rate {
				t.Errorf("statuses %v; want %d×200 and the rest 429: one bucket", count, rate)
			}
			for i := range rate + 1 {
				code, body := other.get(url, spoofedHeader(rng))
				want := http.StatusOK
				if i == rate {
					want = http.StatusTooManyRequests
				}
				if code != want || code == http.StatusOK && body != "127.0.0.3" {
					t.Errorf("other peer, request %d: %d %q, want %d as 127.0.0.3", i+1, code, body, want)
				}
			}
		})
	}
}

// TestTrustedChainsResolveToTheClient sends requests through a trusted proxy (the peer
// 127.0.0.2) and checks that the client it names, past trusted hops, is the one limited.
func TestTrustedChainsResolveToTheClient(t *testing.T) {
	for _, tc := range []struct {
		header httplimit.ForwardedHeader
		field  string
		chain  func(hops ...string) string // the header value of hops, left to right
	}{
		{httplimit.XForwardedFor, "X-Forwarded-For", func(hops ...string) string { return strings.Join(hops, ", ") }},
		{httplimit.Forwarded, "Forwarded", func(hops ...string) string {
			for i, h := range hops {
				hops[i] = `for="` + h + `";proto=https`
				if strings.Contains(h, ":") {
					hops[i] = `for="[` + h + `]:4711"`
				}
			}
			return strings.Join(hops, ", ")
		}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			trusted := []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32"), netip.MustParsePrefix("10.0.0.0/8")}
			url := ipServer(t, newClientIP(t, httplimit.ClientIPConfig{TrustedProxies: trusted, Header: tc.header}), 1)
			proxy, direct := newPeer(t, "127.0.0.2"), newPeer(t, "127.0.0.3")
			for i, step := range []struct {
				p          *peer
				hops       []string
				wantStatus int
				wantClient string
			}{
				{proxy, []string{"203.0.113.1"}, 200, "203.0.113.1"},
				// The same client behind more trusted hops, with a forged entry to its left.
				{proxy, []string{"198.51.100.99", "203.0.113.1", "10.0.0.5", "10.0.0.6"}, 429, ""},
				{proxy, []string{"203.0.113.2", "10.0.0.5"}, 200, "203.0.113.2"},
				{proxy, []string{"2001:db8:1:2::1"}, 200, "2001:db8:1:2::1"},
				{proxy, []string{"2001:db8:1:2::ffff"}, 429, ""}, // one /64
				{proxy, []string{"10.9.9.9", "10.0.0.5"}, 200, "10.9.9.9"},
				{proxy, nil, 200, "127.0.0.2"}, // the proxy itself
				// A client that is not a trusted proxy cannot pass on an address.
				{direct, []string{"203.0.113.3"}, 200, "127.0.0.3"},
				{direct, []string{"203.0.113.4"}, 429, ""},
				{direct, []string{"127.0.0.3", "10.0.0.5"}, 429, ""},
			} {
				h := http.Header{}
				if step.hops != nil {
					// Split the chain over two lines where there are two hops or more: joined in order.
					v := tc.chain(step.hops...)
					if a, b, ok := strings.Cut(v, ", "); ok && i%2 == 0 {
						h.Add(tc.field, a)
						h.Add(tc.field, b)
					} else {
						h.Set(tc.field, v)
					}
				}
				code, body := step.p.get(url, h)
				if code != step.wantStatus || step.wantClient != "" && body != step.wantClient {
					t.Errorf("step %d from %s, %s: %v: %d %q; want %d %q", i+1, step.p.addr, tc.field, h[tc.field], code, body, step.wantStatus, step.wantClient)
				}
			}
		})
	}
}

// TestMalformedForwardingAnswers400 sends every kind of malformed forwarding header through a
// trusted proxy, each answered 400, and from an untrusted peer, each ignored.
func TestMalformedForwardingAnswers400(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}
	for _, tc := range []struct {
		header httplimit.ForwardedHeader
		values [][]string // the lines of each malformed header
	}{
		{httplimit.XForwardedFor, [][]string{
			{"unknown"}, {"_hidden"}, {"not-an-ip"}, {"example.com"}, {"fe80::1%eth0"}, {"203.0.113.1:99999"},
			{"[203.0.113.1]"}, {"[2001:db8::1"}, {"203.0.113.1/32"}, {"203.0.113.1, unknown"}, {"203.0.113.1", "bogus"},
			{strings.Repeat("127.0.0.2, ", 32) + "203.0.113.1"},
			{strings.Repeat("127.0.0.2,", 16), strings.Repeat("127.0.0.2,", 16) + "203.0.113.1"},
			{"203.0.113.1," + strings.Repeat(" ", 4096) + "127.0.0.2"}, // a server trims only the ends
		}},
		{httplimit.Forwarded, [][]string{
			{"for=unknown"}, {"for=_hidden"}, {`for="_gazonk"`}, {"proto=https"}, {"for=[2001:db8::1]"}, {"for=203.0.113.1:80"},
			{`for="203.0.113.1`}, {"for=203.0.113.1;for=203.0.113.2"}, {"for="}, {"for = 203.0.113.1"},
			{"for=203.0.113.1;host=a b"}, {`for="2001:db8::1"`}, {"for=203.0.113.1", "for=unknown"},
			{strings.Repeat("for=127.0.0.2, ", 32) + "for=203.0.113.1"},
			{`for=203.0.113.1;x="` + strings.Repeat("a", 4096) + `"`},
		}},
	} {
		t.Run(tc.header.String(), func(t *testing.T) {
			url := ipServer(t, newClientIP(t, httplimit.ClientIPConfig{TrustedProxies: trusted, Header: tc.header}), bound.MaxRate)
			proxy, direct := newPeer(t, "127.0.0.2"), newPeer(t, "127.0.0.3")
			for _, lines := range tc.values {
				h := http.Header{}
				for _, l := range lines {
					h.Add(tc.header.String(), l)
				}
				if code, body := proxy.get(url, h); code != http.StatusBadRequest || body != httplimit.BadRequestBody {
					t.Errorf("%.60q from the trusted proxy: %d %q, want 400", lines, code, body)
				}
				if code, body := direct.get(url, h); code != http.StatusOK || body != "127.0.0.3" {
					t.Errorf("%.60q from an untrusted peer: %d %q, want 200 as 127.0.0.3", lines, code, body)
				}
			}
		})
	}
}
