package httplimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/admit-dev/admit/httplimit"
)

// proxies are the trusted proxies of the client IP tests: a load balancer's network and one host.
var proxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48"), netip.MustParsePrefix("192.0.2.200/32")}

func newClientIP(t testing.TB, c httplimit.ClientIPConfig) *httplimit.ClientIP {
	t.Helper()
	ci, err := httplimit.NewClientIP(c)
	if err != nil {
		t.Fatal(err)
	}
	return ci
}

// request returns a request from peer with the header lines field: lines.
func request(peer, field string, lines ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = peer
	for _, l := range lines {
		r.Header.Add(field, l)
	}
	return r
}

// clientIPCase is one request and the client address (or "malformed", "misconfigured") it resolves to.
type clientIPCase struct {
	name  string
	peer  string
	lines []string
	want  string
}

// runClientIPCases resolves each case with ci reading field, and checks its address and subject.
func runClientIPCases(t *testing.T, ci *httplimit.ClientIP, field string, cases []clientIPCase) {
	t.Helper()
	for _, tc := range cases {
		r := request(tc.peer, field, tc.lines...)
		got, err := ci.Resolve(r)
		_, serr := ci.Subject(r)
		switch tc.want {
		case "malformed":
			if !errors.Is(err, httplimit.ErrMalformedRequest) || !errors.Is(serr, httplimit.ErrMalformedRequest) {
				t.Errorf("%s: Resolve = %v, %v; want an error matching ErrMalformedRequest", tc.name, got, err)
			}
		case "misconfigured":
			if !errors.Is(err, httplimit.ErrMisconfigured) {
				t.Errorf("%s: Resolve = %v, %v; want an error matching ErrMisconfigured", tc.name, got, err)
			}
		default:
			if err != nil || got.String() != tc.want {
				t.Errorf("%s: Resolve = %v, %v; want %s", tc.name, got, err, tc.want)
			}
		}
	}
}

func TestClientIPPeerOnly(t *testing.T) {
	ci := newClientIP(t, httplimit.ClientIPConfig{})
	runClientIPCases(t, ci, "X-Forwarded-For", []clientIPCase{
		{"IPv4 peer", "203.0.113.7:5555", nil, "203.0.113.7"},
		{"IPv6 peer", "[2001:db8::7]:5555", nil, "2001:db8::7"},
		{"IPv4-mapped peer", "[::ffff:203.0.113.7]:5555", nil, "203.0.113.7"},
		{"zone dropped", "[fe80::1%eth0]:5555", nil, "fe80::1"},
		{"no port", "203.0.113.7", nil, "203.0.113.7"},
		{"header ignored", "203.0.113.7:1", []string{"198.51.100.1"}, "203.0.113.7"},
		{"not an IP", "@", nil, "misconfigured"},
		{"empty", "", nil, "misconfigured"},
	})
}

func TestClientIPXForwardedFor(t *testing.T) {
	ci := newClientIP(t, httplimit.ClientIPConfig{TrustedProxies: proxies, Header: httplimit.XForwardedFor})
	const lb = "10.0.0.1:40000"
	runClientIPCases(t, ci, "X-Forwarded-For", []clientIPCase{
		{"untrusted peer, spoofed header", "203.0.113.7:1", []string{"198.51.100.1"}, "203.0.113.7"},
		{"untrusted peer, garbage header", "203.0.113.7:1", []string{"unknown, _x, [[, " + strings.Repeat("1,", 100)}, "203.0.113.7"},
		{"untrusted peer, IPv6", "[2001:db8::1]:1", []string{"198.51.100.1"}, "2001:db8::1"},
		{"one hop", lb, []string{"198.51.100.1"}, "198.51.100.1"},
		{"client spoofs to the left", lb, []string{"1.2.3.4, 198.51.100.1"}, "198.51.100.1"},
		{"junk to the left is not read", lb, []string{"unknown, _hidden, bogus, 198.51.100.1"}, "198.51.100.1"},
		{"trusted hops skipped", lb, []string{"198.51.100.1, 10.1.1.1, 192.0.2.200"}, "198.51.100.1"},
		{"trusted hops over two lines", lb, []string{"1.2.3.4, 198.51.100.1", "10.1.1.1", "10.2.2.2"}, "198.51.100.1"},
		{"lines in order", lb, []string{"198.51.100.1", "198.51.100.2"}, "198.51.100.2"},
		{"every hop trusted: the leftmost", lb, []string{"10.9.9.9, 10.1.1.1"}, "10.9.9.9"},
		{"no header: the peer", lb, nil, "10.0.0.1"},
		{"empty entries skipped", lb, []string{" , 198.51.100.1 ,,", ""}, "198.51.100.1"},
		{"IPv4 with port", lb, []string{"198.51.100.1:8080"}, "198.51.100.1"},
		{"IPv6", lb, []string{"2001:db8:1::1"}, "2001:db8:1::1"},
		{"bracketed IPv6", lb, []string{"[2001:db8:1::1]"}, "2001:db8:1::1"},
		{"bracketed IPv6 with port", lb, []string{"[2001:db8:1::1]:443"}, "2001:db8:1::1"},
		{"IPv4-mapped", lb, []string{"::ffff:198.51.100.1"}, "198.51.100.1"},
		{"IPv4-mapped trusted", lb, []string{"198.51.100.1, ::ffff:10.1.1.1"}, "198.51.100.1"},
		{"IPv6 trusted proxy", "[2001:db8:ffff::1]:1", []string{"198.51.100.1, 2001:db8:ffff:1::2"}, "198.51.100.1"},
		{"IPv4-mapped peer trusted", "[::ffff:10.0.0.1]:1", []string{"198.51.100.1"}, "198.51.100.1"},
		{"tabs and spaces", lb, []string{"\t198.51.100.1 \t"}, "198.51.100.1"},
		{"unknown", lb, []string{"unknown"}, "malformed"},
		{"obfuscated", lb, []string{"_hidden"}, "malformed"},
		{"garbage", lb, []string{"not-an-ip"}, "malformed"},
		{"hostname", lb, []string{"example.com"}, "malformed"},
		{"malformed trusted hop", lb, []string{"198.51.100.1, bogus, 10.1.1.1"}, "malformed"},
		{"zone", lb, []string{"fe80::1%eth0"}, "malformed"},
		{"bracketed IPv4", lb, []string{"[198.51.100.1]"}, "malformed"},
		{"unclosed bracket", lb, []string{"[2001:db8::1"}, "malformed"},
		{"bad port", lb, []string{"198.51.100.1:99999"}, "malformed"},
		{"empty port", lb, []string{"198.51.100.1:"}, "malformed"},
		{"letters in port", lb, []string{"[2001:db8::1]:http"}, "malformed"},
		{"leading zeros", lb, []string{"010.1.1.1"}, "malformed"},
		{"CIDR", lb, []string{"198.51.100.0/24"}, "malformed"},
		{"quoted", lb, []string{`"198.51.100.1"`}, "malformed"},
		{"32 entries", lb, []string{strings.Repeat("10.1.1.1, ", 31) + "198.51.100.1"}, "198.51.100.1"},
		{"33 entries", lb, []string{strings.Repeat("10.1.1.1, ", 32) + "198.51.100.1"}, "malformed"},
		{"33 entries over lines", lb, append(strings.Split(strings.Repeat("10.1.1.1,", 32), ","), "198.51.100.1"), "malformed"},
		{"4 KiB", lb, []string{strings.Repeat(" ", 4096-len("198.51.100.1")) + "198.51.100.1"}, "198.51.100.1"},
		{"over 4 KiB", lb, []string{strings.Repeat(" ", 4097-len("198.51.100.1")) + "198.51.100.1"}, "malformed"},
		{"over 4 KiB over lines", lb, []string{strings.Repeat(" ", 2048), strings.Repeat(" ", 2048)}, "malformed"},
	})
}

func TestClientIPForwarded(t *testing.T) {
	ci := newClientIP(t, httplimit.ClientIPConfig{TrustedProxies: proxies, Header: httplimit.Forwarded})
	const lb = "10.0.0.1:40000"
	runClientIPCases(t, ci, "Forwarded", []clientIPCase{
		{"untrusted peer, spoofed", "203.0.113.7:1", []string{"for=198.51.100.1"}, "203.0.113.7"},
		{"untrusted peer, garbage", "203.0.113.7:1", []string{`for="unterminated`}, "203.0.113.7"},
		{"token", lb, []string{"for=198.51.100.1"}, "198.51.100.1"},
		{"quoted", lb, []string{`for="198.51.100.1"`}, "198.51.100.1"},
		{"IPv4 with port", lb, []string{`for="192.0.2.43:47011"`}, "192.0.2.43"},
		{"IPv6 with port", lb, []string{`for="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::17"},
		{"IPv6", lb, []string{`for="[2001:db8:cafe::17]"`}, "2001:db8:cafe::17"},
		{"IPv4-mapped", lb, []string{`for="[::ffff:198.51.100.1]"`}, "198.51.100.1"},
		{"obfuscated port", lb, []string{`for="198.51.100.1:_p0rt"`}, "198.51.100.1"},
		{"parameter name case", lb, []string{"For=198.51.100.1"}, "198.51.100.1"},
		{"other parameters", lb, []string{`for=198.51.100.1;proto=https;by="[2001:db8::1]:80";host="example.com:8080"`}, "198.51.100.1"},
		{"order of parameters", lb, []string{`proto=http;for=198.51.100.1`}, "198.51.100.1"},
		{"quoted-pair", lb, []string{`for="198.51.100.\1";host="a\"b,c"`}, "198.51.100.1"},
		{"comma in a quoted string", lb, []string{`for=198.51.100.1;host="a,b", for=10.1.1.1`}, "198.51.100.1"},
		{"whitespace around separators", lb, []string{"for=198.51.100.1 ; proto=http ,\tfor=10.1.1.1"}, "198.51.100.1"},
		{"empty pairs and elements", lb, []string{";for=198.51.100.1;;, ,"}, "198.51.100.1"},
		{"client spoofs to the left", lb, []string{"for=1.2.3.4, for=198.51.100.1"}, "198.51.100.1"},
		{"unknown to the left is not read", lb, []string{"for=unknown, for=_hidden, for=198.51.100.1"}, "198.51.100.1"},
		{"trusted hops skipped", lb, []string{`for=198.51.100.1, for=10.1.1.1, for="[2001:db8:ffff::9]"`}, "198.51.100.1"},
		{"lines joined", lb, []string{"for=1.2.3.4, for=198.51.100.1", "for=10.1.1.1;proto=https"}, "198.51.100.1"},
		{"every hop trusted", lb, []string{"for=10.9.9.9, for=10.1.1.1"}, "10.9.9.9"},
		{"unknown", lb, []string{"for=unknown"}, "malformed"},
		{"unknown, any case", lb, []string{`for="UNKNOWN"`}, "malformed"},
		{"obfuscated", lb, []string{"for=_hidden"}, "malformed"},
		{"obfuscated, quoted", lb, []string{`for="_gazonk"`}, "malformed"},
		{"no for", lb, []string{"proto=https"}, "malformed"},
		{"trusted element without for", lb, []string{"for=198.51.100.1, by=10.1.1.1"}, "malformed"},
		{"two fors", lb, []string{"for=198.51.100.1;for=198.51.100.2"}, "malformed"},
		{"empty for", lb, []string{`for=""`}, "malformed"},
		{"unquoted IPv6", lb, []string{"for=[2001:db8::1]"}, "malformed"},
		{"bare IPv6 quoted", lb, []string{`for="2001:db8::1"`}, "malformed"},
		{"unquoted port", lb, []string{"for=198.51.100.1:80"}, "malformed"},
		{"unterminated quote", lb, []string{`for="198.51.100.1`}, "malformed"},
		{"control character", lb, []string{"for=\"198.51.100.1\x01\""}, "malformed"},
		{"no value", lb, []string{"for="}, "malformed"},
		{"no name", lb, []string{"=198.51.100.1"}, "malformed"},
		{"no equals", lb, []string{"for"}, "malformed"},
		{"space around equals", lb, []string{"for = 198.51.100.1"}, "malformed"},
		{"junk after value", lb, []string{`for="198.51.100.1"x`}, "malformed"},
		{"bad parameter elsewhere", lb, []string{"for=198.51.100.1;host=a b"}, "malformed"},
		{"bad port", lb, []string{`for="198.51.100.1:65536"`}, "malformed"},
		{"zone", lb, []string{`for="[fe80::1%25eth0]"`}, "malformed"},
		{"IPv4 in brackets", lb, []string{`for="[198.51.100.1]"`}, "malformed"},
		{"32 elements", lb, []string{strings.Repeat("for=10.1.1.1, ", 31) + "for=198.51.100.1"}, "198.51.100.1"},
		{"33 elements", lb, []string{strings.Repeat("for=10.1.1.1, ", 32) + "for=198.51.100.1"}, "malformed"},
		{"over 4 KiB", lb, []string{`for="198.51.100.1";x="` + strings.Repeat("a", 4096) + `"`}, "malformed"},
	})
}

// TestClientIPSubjectGroupsIPv6 checks the subjects: an IPv4 address, or the IPv6 network of the
// configured prefix, so that every host of one /64 is one client.
func TestClientIPSubjectGroupsIPv6(t *testing.T) {
	for _, tc := range []struct {
		bits int
		peer string
		want string
	}{
		{0, "203.0.113.7:1", "203.0.113.7"},
		{0, "[::ffff:203.0.113.7]:1", "203.0.113.7"},
		{0, "[2001:db8:1:2:3:4:5:6]:1", "2001:db8:1:2::/64"},
		{0, "[2001:db8:1:2:ffff:ffff:ffff:ffff]:1", "2001:db8:1:2::/64"},
		{0, "[2001:db8:1:3::1]:1", "2001:db8:1:3::/64"},
		{56, "[2001:db8:1:2ff::1]:1", "2001:db8:1:200::/56"},
		{128, "[2001:db8::1]:1", "2001:db8::1/128"},
		{48, "[fe80::1%eth0]:1", "fe80::/48"},
	} {
		ci := newClientIP(t, httplimit.ClientIPConfig{IPv6Prefix: tc.bits})
		s, err := ci.Subject(request(tc.peer, ""))
		if err != nil || s.ID != tc.want || s.Slot != "" {
			t.Errorf("/%d: Subject(%s) = %+v, %v; want {ID: %s}", tc.bits, tc.peer, s, err, tc.want)
		}
	}
	// Through a trusted proxy too: two hosts of one /64 are one subject, a third elsewhere is not.
	ci := newClientIP(t, httplimit.ClientIPConfig{TrustedProxies: proxies, Header: httplimit.XForwardedFor})
	subject := func(xff string) string {
		s, err := ci.Subject(request("10.0.0.1:1", "X-Forwarded-For", xff))
		if err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	if a, b, c := subject("2001:db8:5:6::1"), subject("2001:db8:5:6:ffff::2"), subject("2001:db8:5:7::1"); a != b || a == c {
		t.Errorf("subjects %s, %s, %s: want the first two equal, the third apart", a, b, c)
	}
}

func TestNewClientIPRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    httplimit.ClientIPConfig
		want string
	}{
		{"proxies without a header", httplimit.ClientIPConfig{TrustedProxies: proxies}, "without a forwarding header"},
		{"header without proxies", httplimit.ClientIPConfig{Header: httplimit.Forwarded}, "without trusted proxies"},
		{"unknown header", httplimit.ClientIPConfig{TrustedProxies: proxies, Header: 9}, "unknown forwarding header"},
		{"invalid prefix", httplimit.ClientIPConfig{TrustedProxies: []netip.Prefix{{}}, Header: httplimit.XForwardedFor}, "invalid prefix"},
		{"IPv6 prefix too long", httplimit.ClientIPConfig{IPv6Prefix: 129}, "IPv6 prefix /129"},
		{"IPv6 prefix negative", httplimit.ClientIPConfig{IPv6Prefix: -1}, "IPv6 prefix /-1"},
	} {
		ci, err := httplimit.NewClientIP(tc.c)
		if ci != nil || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewClientIP = %v, %v; want an error saying %q", tc.name, ci, err, tc.want)
		}
	}
	// Every error at once.
	_, err := httplimit.NewClientIP(httplimit.ClientIPConfig{TrustedProxies: []netip.Prefix{{}}, IPv6Prefix: 200})
	if err == nil || !strings.Contains(err.Error(), "invalid prefix") || !strings.Contains(err.Error(), "/200") {
		t.Errorf("NewClientIP = %v; want both errors", err)
	}
	// An IPv4-mapped prefix is the IPv4 one.
	ci := newClientIP(t, httplimit.ClientIPConfig{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("::ffff:10.0.0.0/104")}, Header: httplimit.XForwardedFor})
	if got, err := ci.Resolve(request("10.1.2.3:1", "X-Forwarded-For", "198.51.100.1")); err != nil || got.String() != "198.51.100.1" {
		t.Errorf("IPv4-mapped trusted prefix: Resolve = %v, %v; want 198.51.100.1", got, err)
	}
}

func TestForwardedHeaderString(t *testing.T) {
	for h, want := range map[httplimit.ForwardedHeader]string{
		httplimit.NoForwardedHeader: "none", httplimit.XForwardedFor: "X-Forwarded-For", httplimit.Forwarded: "Forwarded", 7: "ForwardedHeader(7)",
	} {
		if got := h.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", h, got, want)
		}
	}
}

// fuzzClientIP resolves a request from a trusted proxy whose header field holds the lines of
// header (split at newlines), and checks that the result is an error matching ErrMalformedRequest
// or a valid, normalised address.
func fuzzClientIP(t *testing.T, ci *httplimit.ClientIP, field, header string) {
	lines := strings.Split(header, "\n")
	a, err := ci.Resolve(request("10.0.0.1:1", field, lines...))
	if err != nil {
		if !errors.Is(err, httplimit.ErrMalformedRequest) {
			t.Fatalf("Resolve(%q) = %v, want an error matching ErrMalformedRequest", header, err)
		}
		return
	}
	if !a.IsValid() || a.Is4In6() || a.Zone() != "" {
		t.Fatalf("Resolve(%q) = %v, want a valid address, unmapped, without a zone", header, a)
	}
	if size := len(header); size > httplimit.MaxForwardedBytes {
		t.Fatalf("Resolve(%d bytes) = %v, want an error", size, a)
	}
	s, err := ci.Subject(request("10.0.0.1:1", field, lines...))
	if err != nil || s.ID == "" {
		t.Fatalf("Subject(%q) = %+v, %v after Resolve found %v", header, s, err, a)
	}
}

func FuzzXForwardedFor(f *testing.F) {
	for _, s := range []string{
		"198.51.100.1", "1.2.3.4, 198.51.100.1, 10.1.1.1", "198.51.100.1:80", "[2001:db8::1]:443", "2001:db8::1",
		"::ffff:198.51.100.1", "unknown", "_hidden", "fe80::1%eth0", "[1.2.3.4]", " , ,", "10.1.1.1\n198.51.100.1",
		strings.Repeat("10.1.1.1,", 40), "[", "[]:", "1.2.3.4:", ":::::", "1.2.3.4:65536",
	} {
		f.Add(s)
	}
	ci := newClientIP(f, httplimit.ClientIPConfig{TrustedProxies: proxies, Header: httplimit.XForwardedFor})
	f.Fuzz(func(t *testing.T, header string) { fuzzClientIP(t, ci, "X-Forwarded-For", header) })
}

func FuzzForwarded(f *testing.F) {
	for _, s := range []string{
		"for=198.51.100.1", `for="[2001:db8:cafe::17]:4711"`, `for="192.0.2.43:47011";proto=http;by=203.0.113.43`,
		"for=192.0.2.43, for=198.51.100.17", `for="_gazonk"`, "for=unknown", `For="\"[::1]\""`, `for="a\`,
		"for=198.51.100.1;for=1.1.1.1", ";;,,", "proto=https", "for=10.1.1.1\nfor=198.51.100.1;host=\"a,b\"",
		`for="198.51.100.1:_p"`, `for="[::ffff:10.1.1.1]"`, strings.Repeat("for=10.1.1.1,", 40),
	} {
		f.Add(s)
	}
	ci := newClientIP(f, httplimit.ClientIPConfig{TrustedProxies: proxies, Header: httplimit.Forwarded})
	f.Fuzz(func(t *testing.T, header string) { fuzzClientIP(t, ci, "Forwarded", header) })
}

// TestClientIPTrustsPeer checks TrustsPeer: only a TCP peer in a trusted network is trusted,
// whatever its forwarding header says.
func TestClientIPTrustsPeer(t *testing.T) {
	ci := newClientIP(t, httplimit.ClientIPConfig{TrustedProxies: proxies, Header: httplimit.XForwardedFor})
	for _, tc := range []struct {
		peer string
		want bool
	}{
		{"10.1.2.3:4000", true},
		{"[::ffff:10.1.2.3]:4000", true},
		{"[2001:db8:ffff::1]:443", true},
		{"192.0.2.200:1", true},
		{"192.0.2.201:1", false},
		{"203.0.113.9:80", false},
		{"not an address", false},
	} {
		r := request(tc.peer, "X-Forwarded-For", "10.0.0.1")
		if got := ci.TrustsPeer(r); got != tc.want {
			t.Errorf("TrustsPeer(%s) = %v; want %v", tc.peer, got, tc.want)
		}
	}
	if none := newClientIP(t, httplimit.ClientIPConfig{}); none.TrustsPeer(request("10.1.2.3:4000", "")) {
		t.Error("with no trusted proxies, TrustsPeer = true")
	}
}

// TestConfigureClientIP checks that a configuration's names of the forwarding headers make the
// ClientIP that reads them, and that any other name is an error.
func TestConfigureClientIP(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"x-forwarded-for", "X-Forwarded-For"},
		{"forwarded", "Forwarded"},
	} {
		ci, err := httplimit.ConfigureClientIP(proxies, tc.name, 0)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := ci.Header().String(); got != tc.want {
			t.Errorf("%s: reads %s; want %s", tc.name, got, tc.want)
		}
	}
	if ci, err := httplimit.ConfigureClientIP(nil, "", 56); err != nil || ci.Header() != httplimit.NoForwardedHeader {
		t.Errorf(`"" without trusted proxies: %v, %v; want the TCP peer`, ci, err)
	}
	if _, err := httplimit.ConfigureClientIP(proxies, "x-real-ip", 0); err == nil || !strings.Contains(err.Error(), `"x-real-ip"`) {
		t.Errorf("x-real-ip: %v; want an error naming it", err)
	}
	if _, err := httplimit.ConfigureClientIP(proxies, "", 0); err == nil {
		t.Error("trusted proxies without a forwarding header: no error")
	}
}
