package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/admit-dev/admit"
)

// A ForwardedHeader names the request header field in which trusted proxies pass on the address of
// the client they received a request from. The zero value, NoForwardedHeader, reads none.
type ForwardedHeader uint8

const (
	// NoForwardedHeader reads no header: the client is always the TCP peer.
	NoForwardedHeader ForwardedHeader = iota
	// XForwardedFor reads X-Forwarded-For: a comma-separated list of addresses, the client's first
	// and each proxy's peer appended after it.
	XForwardedFor
	// Forwarded reads Forwarded (RFC 7239): a list of elements such as for="[2001:db8::1]:4711";proto=https,
	// one appended by each proxy, of which only the for parameter is used.
	Forwarded
)

// String returns the header's field name, such as "X-Forwarded-For", or "none".
func (h ForwardedHeader) String() string {
	switch h {
	case NoForwardedHeader:
		return "none"
	case XForwardedFor:
		return "X-Forwarded-For"
	case Forwarded:
		return "Forwarded"
	}
	return fmt.Sprintf("ForwardedHeader(%d)", uint8(h))
}

// Bounds of a forwarding header and of client addresses.
const (
	// MaxForwardedHops is the most entries (X-Forwarded-For) or elements (Forwarded) that a
	// forwarding header may hold, all its lines together; a request with more is malformed.
	MaxForwardedHops = 32
	// MaxForwardedBytes is the most bytes that a forwarding header's lines may hold together; a
	// request with more is malformed.
	MaxForwardedBytes = 4096
	// DefaultIPv6Prefix is the prefix length that groups IPv6 clients when
	// [ClientIPConfig.IPv6Prefix] is 0: one /64, the smallest network a site is normally given,
	// is one client, so one host cannot make itself 2^64 clients.
	DefaultIPv6Prefix = 64
)

// A ClientIPConfig says how to find a request's client address. The zero value makes the TCP peer
// the client, always; that is right for a server that faces its clients directly.
type ClientIPConfig struct {
	// TrustedProxies are the networks of the reverse proxies (load balancers, CDNs) in front of the
	// server, which are trusted to append the address they received each request from to Header.
	// Only when the TCP peer is in one of them is Header read at all. Each must be a valid prefix;
	// IPv4-mapped IPv6 prefixes (::ffff:10.0.0.0/104) are taken as the IPv4 ones.
	TrustedProxies []netip.Prefix
	// Header is the header field that the trusted proxies write: XForwardedFor or Forwarded, never
	// both. It must be set when TrustedProxies is, and must not be when it is not.
	Header ForwardedHeader
	// IPv6Prefix is the prefix length, 1 … 128, that groups IPv6 client addresses into one client.
	// 0 means DefaultIPv6Prefix, 64.
	IPv6Prefix int
}

// A ClientIP finds the address of the client that sent a request, through the trusted proxies of
// its configuration, for limiting clients by address. Make one with [NewClientIP]; its methods
// are safe for concurrent use.
//
// The client is the TCP peer (r.RemoteAddr), unless the peer is a trusted proxy. Then the client
// is found in the forwarding header, read from the right, its lines joined in order: each trusted
// address is a proxy, skipped, and the first address that is not trusted is the client; when
// every one is trusted (or the header is absent), the leftmost is (a request from inside the
// proxies' network). The header is never read from a peer that is not trusted, whatever it holds,
// and X-Real-IP or any other header never is.
//
// The request is malformed ([ErrMalformedRequest], 400) when the header has more than
// MaxForwardedHops entries or MaxForwardedBytes bytes, does not parse (Forwarded: RFC 7239's
// syntax), or one of the entries read — the trusted ones and the client's — is not an IP address:
// "unknown", an obfuscated identifier such as "_hidden", an address with a zone, garbage, or a
// Forwarded element without a for parameter. The entries left of the client's were written by the
// client or its own proxies and are not read.
//
// Ports are dropped ("192.0.2.43:47011", Forwarded's for="[2001:db8::1]:4711"), IPv4-mapped IPv6
// addresses are taken as IPv4, and IPv6 addresses are grouped by the configured prefix.
type ClientIP struct {
	trusted []netip.Prefix
	header  ForwardedHeader
	field   string // header's canonical field name
	v6bits  int
}

// ConfigureClientIP returns the ClientIP of a configuration's settings: its trusted proxies, its
// forwarding header named as admit's configuration names it ("x-forwarded-for", "forwarded", or
// "" for none) and its IPv6 prefix; or an error that says what is wrong with them. admit serve and
// admit proxy resolve client addresses with it.
func ConfigureClientIP(trustedProxies []netip.Prefix, forwardedHeader string, ipv6Prefix int) (*ClientIP, error) {
	c := ClientIPConfig{TrustedProxies: trustedProxies, IPv6Prefix: ipv6Prefix}
	switch forwardedHeader {
	case "":
	case "x-forwarded-for":
		c.Header = XForwardedFor
	case "forwarded":
		c.Header = Forwarded
	default:
		return nil, fmt.Errorf("httplimit: client IP: unknown forwarding header %q: want x-forwarded-for or forwarded", forwardedHeader)
	}
	return NewClientIP(c)
}

// NewClientIP returns the ClientIP that c configures, or an error that says what is wrong with c.
func NewClientIP(c ClientIPConfig) (*ClientIP, error) {
	var errs []error
	ci := &ClientIP{header: c.Header, v6bits: c.IPv6Prefix}
	if ci.v6bits == 0 {
		ci.v6bits = DefaultIPv6Prefix
	}
	if ci.v6bits < 1 || ci.v6bits > 128 {
		errs = append(errs, fmt.Errorf("IPv6 prefix /%d outside /1-/128 (or 0 for /%d)", c.IPv6Prefix, DefaultIPv6Prefix))
	}
	for i, p := range c.TrustedProxies {
		if !p.IsValid() {
			errs = append(errs, fmt.Errorf("trusted proxy %d: invalid prefix %q", i, p))
			continue
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		ci.trusted = append(ci.trusted, p.Masked())
	}
	switch c.Header {
	case NoForwardedHeader:
		if len(c.TrustedProxies) > 0 {
			errs = append(errs, errors.New("trusted proxies without a forwarding header: set Header to XForwardedFor or Forwarded, the one your proxies write"))
		}
	case XForwardedFor, Forwarded:
		ci.field = http.CanonicalHeaderKey(c.Header.String())
		if len(c.TrustedProxies) == 0 {
			errs = append(errs, fmt.Errorf("forwarding header %s without trusted proxies: it would never be read", c.Header))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown forwarding header %s", c.Header))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("httplimit: client IP: %w", err)
	}
	return ci, nil
}

// Header returns the forwarding header the ClientIP reads from trusted proxies, or
// NoForwardedHeader.
func (c *ClientIP) Header() ForwardedHeader { return c.header }

// Subject is a [SubjectFunc] that limits each request as its client address, as [ClientIP.Resolve]
// finds it: an IPv4 address such as "192.0.2.1", or the IPv6 network that groups its IPv6 address,
// such as "2001:db8::/64".
func (c *ClientIP) Subject(r *http.Request) (admit.Subject, error) {
	a, err := c.Resolve(r)
	if err != nil {
		return admit.Subject{}, err
	}
	if a.Is4() {
		return admit.Subject{ID: a.String()}, nil
	}
	p, _ := a.Prefix(c.v6bits)
	return admit.Subject{ID: p.String()}, nil
}

// Resolve returns the address of the client that sent r: an IPv4 address, or an IPv6 address
// that is not IPv4-mapped, without a zone and not yet grouped. Its error wraps ErrMalformedRequest
// for a malformed forwarding header (400), or ErrMisconfigured when r.RemoteAddr is not an IP
// address (500: a server on a Unix socket, say, has no client addresses to limit).
func (c *ClientIP) Resolve(r *http.Request) (netip.Addr, error) {
	addr, err := peerAddr(r)
	if err != nil {
		return netip.Addr{}, err
	}
	if c.header == NoForwardedHeader || !c.isTrusted(addr) {
		return addr, nil
	}
	lines := r.Header[c.field]
	size := len(lines) - 1
	for _, l := range lines {
		size += len(l)
	}
	if size > MaxForwardedBytes {
		return netip.Addr{}, fmt.Errorf("%s: %d bytes, more than %d: %w", c.field, size, MaxForwardedBytes, ErrMalformedRequest)
	}
	var buf [MaxForwardedHops]string
	var hops []string
	var parse func(string) (netip.Addr, error)
	if c.header == XForwardedFor {
		hops, err = splitXForwardedFor(lines, buf[:0])
		parse = parseXForwardedForNode
	} else {
		hops, err = splitForwarded(lines, buf[:0])
		parse = parseForwardedNode
	}
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%s: %w: %w", c.field, ErrMalformedRequest, err)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		if addr, err = parse(hops[i]); err != nil {
			return netip.Addr{}, fmt.Errorf("%s: hop %d from the right: %w: %w", c.field, len(hops)-i, ErrMalformedRequest, err)
		}
		if !c.isTrusted(addr) {
			return addr, nil
		}
	}
	return addr, nil // every hop trusted: the leftmost, or the peer when there are none
}

// TrustsPeer reports whether r's TCP peer (r.RemoteAddr) is one of the trusted proxies: whether
// a header that only a trusted proxy may set can be believed. It is false when r.RemoteAddr is not
// an IP address.
func (c *ClientIP) TrustsPeer(r *http.Request) bool {
	a, err := peerAddr(r)
	return err == nil && c.isTrusted(a)
}

// peerAddr returns the address of r's TCP peer, without a zone, IPv4-mapped addresses as IPv4.
func peerAddr(r *http.Request) (netip.Addr, error) {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	addr := peer.Addr()
	if err != nil {
		if addr, err = netip.ParseAddr(r.RemoteAddr); err != nil {
			return netip.Addr{}, fmt.Errorf("%w: the TCP peer %q is not an IP address", ErrMisconfigured, r.RemoteAddr)
		}
	}
	return addr.WithZone("").Unmap(), nil
}

// isTrusted reports whether a is the address of a trusted proxy.
func (c *ClientIP) isTrusted(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Errors of the forwarding header parsers. They say what is wrong, never the value: an address
// is personal data, which admit keeps out of its logs.
var (
	errTooManyHops  = fmt.Errorf("more than %d hops", MaxForwardedHops)
	errUnknown      = errors.New(`"unknown" address`)
	errObfuscated   = errors.New("obfuscated identifier, not an address")
	errNotAddress   = errors.New("not an IP address")
	errZone         = errors.New("IP address with a zone")
	errBadPort      = errors.New("bad port")
	errSyntax       = errors.New("syntax error")
	errNoFor        = errors.New("element without a for parameter")
	errDuplicateFor = errors.New("element with two for parameters")
)

// splitXForwardedFor appends the entries of an X-Forwarded-For header's lines to hops, in order,
// and returns them. Empty entries are skipped, as for any HTTP list (RFC 9110 §5.6.1).
func splitXForwardedFor(lines []string, hops []string) ([]string, error) {
	for _, l := range lines {
		for l != "" {
			var e string
			e, l, _ = strings.Cut(l, ",")
			if e = strings.Trim(e, " \t"); e == "" {
				continue
			}
			if len(hops) == MaxForwardedHops {
				return nil, errTooManyHops
			}
			hops = append(hops, e)
		}
	}
	return hops, nil
}

// parseXForwardedForNode parses one X-Forwarded-For entry: an IPv4 or IPv6 address, optionally
// with a port ("192.0.2.1:80", "[2001:db8::1]:80"), or a bracketed IPv6 address.
func parseXForwardedForNode(e string) (netip.Addr, error) {
	switch {
	case e[0] == '[':
		return parseBracketed(e, false)
	case strings.Count(e, ":") == 1: // IPv4 with a port; an IPv6 address has at least two
		host, port, _ := strings.Cut(e, ":")
		if !validPort(port, false) {
			return netip.Addr{}, errBadPort
		}
		return parseAddr(host, true)
	}
	return parseAddr(e, false)
}

// parseForwardedNode parses the value of a Forwarded for parameter, unquoted (RFC 7239 §6): an
// IPv4 address or a bracketed IPv6 address, optionally with a port or an obfuscated port.
func parseForwardedNode(v string) (netip.Addr, error) {
	switch {
	case v == "":
		return netip.Addr{}, errNoFor
	case strings.EqualFold(v, "unknown"):
		return netip.Addr{}, errUnknown
	case v[0] == '_':
		return netip.Addr{}, errObfuscated
	case v[0] == '[':
		return parseBracketed(v, true)
	}
	host, port, hasPort := strings.Cut(v, ":")
	if hasPort && !validPort(port, true) {
		return netip.Addr{}, errBadPort
	}
	return parseAddr(host, true)
}

// parseBracketed parses "[IPv6]" or "[IPv6]:port"; obfPort allows an obfuscated port.
func parseBracketed(s string, obfPort bool) (netip.Addr, error) {
	host, rest, ok := strings.Cut(s[1:], "]")
	if !ok {
		return netip.Addr{}, errNotAddress
	}
	if rest != "" && (rest[0] != ':' || !validPort(rest[1:], obfPort)) {
		return netip.Addr{}, errBadPort
	}
	if !strings.Contains(host, ":") {
		return netip.Addr{}, errNotAddress // "[192.0.2.1]": brackets are for IPv6
	}
	return parseAddr(host, false)
}

// parseAddr parses an IP address without a zone, IPv4 only if only4, and returns it with an
// IPv4-mapped IPv6 address unmapped.
func parseAddr(s string, only4 bool) (netip.Addr, error) {
	switch {
	case strings.EqualFold(s, "unknown"):
		return netip.Addr{}, errUnknown
	case strings.HasPrefix(s, "_"):
		return netip.Addr{}, errObfuscated
	}
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil, only4 && !a.Is4():
		return netip.Addr{}, errNotAddress
	case a.Zone() != "":
		return netip.Addr{}, errZone
	}
	return a.Unmap(), nil
}

// validPort reports whether s is a port, 1 to 5 digits up to 65535, or, if obf, an obfuscated
// port: "_" and 1 or more of ALPHA, DIGIT, ".", "_", "-" (RFC 7239 §6.3).
func validPort(s string, obf bool) bool {
	if obf && len(s) > 1 && s[0] == '_' {
		for i := 1; i < len(s); i++ {
			if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
				return false
			}
		}
		return true
	}
	if s == "" || len(s) > 5 {
		return false
	}
	n := 0
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n <= 65535
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// isTchar reports whether c may be in an HTTP token (RFC 9110 §5.6.2).
func isTchar(c byte) bool {
	return isAlnum(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// splitForwarded parses the lines of a Forwarded header (RFC 7239 §4) and appends to hops the
// value of each element's for parameter, unquoted, in order: "" for an element without one.
// Every parameter must parse, whatever its name; parameter names are case-insensitive; empty list
// elements are skipped, and optional whitespace is allowed around "," and ";".
func splitForwarded(lines []string, hops []string) ([]string, error) {
	for _, l := range lines {
		p := forwardedParser{s: l}
		for {
			p.skipOWS()
			if p.eof() {
				break
			}
			if p.s[p.i] == ',' {
				p.i++
				continue
			}
			v, err := p.element()
			if err != nil {
				return nil, err
			}
			if len(hops) == MaxForwardedHops {
				return nil, errTooManyHops
			}
			hops = append(hops, v)
		}
	}
	return hops, nil
}

// forwardedParser scans one line of a Forwarded header.
type forwardedParser struct {
	s string
	i int
}

func (p *forwardedParser) eof() bool { return p.i >= len(p.s) }

func (p *forwardedParser) skipOWS() {
	for !p.eof() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// element parses one forwarded-element, leaving p at the "," that ends it or at the end, and
// returns its for parameter's value, or "" if it has none.
func (p *forwardedParser) element() (forValue string, err error) {
	hasFor := false
	for {
		p.skipOWS()
		if p.eof() || p.s[p.i] == ',' {
			return forValue, nil
		}
		if p.s[p.i] == ';' { // an empty forwarded-pair
			p.i++
			continue
		}
		name := p.token()
		if name == "" || p.eof() || p.s[p.i] != '=' {
			return "", errSyntax
		}
		p.i++
		var v string
		if !p.eof() && p.s[p.i] == '"' {
			if v, err = p.quoted(); err != nil {
				return "", err
			}
		} else if v = p.token(); v == "" {
			return "", errSyntax
		}
		if strings.EqualFold(name, "for") {
			if hasFor {
				return "", errDuplicateFor
			}
			if v == "" {
				return "", errNotAddress // for=""
			}
			forValue, hasFor = v, true
		}
		p.skipOWS()
		switch {
		case p.eof() || p.s[p.i] == ',':
			return forValue, nil
		case p.s[p.i] == ';':
			p.i++
		default:
			return "", errSyntax
		}
	}
}

// token scans a token and returns it, "" if there is none.
func (p *forwardedParser) token() string {
	start := p.i
	for !p.eof() && isTchar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

// quoted scans a quoted-string (RFC 9110 §5.6.4) and returns its content, unescaped.
func (p *forwardedParser) quoted() (string, error) {
	p.i++ // the opening quote
	start, escaped := p.i, false
	for ; !p.eof(); p.i++ {
		switch c := p.s[p.i]; {
		case c == '"':
			v := p.s[start:p.i]
			p.i++
			if escaped {
				v = unescape(v)
			}
			return v, nil
		case c == '\\':
			p.i++
			if p.eof() || !isQuotedPairChar(p.s[p.i]) {
				return "", errSyntax
			}
			escaped = true
		case !isQdtext(c):
			return "", errSyntax
		}
	}
	return "", errSyntax // unterminated
}

// isQdtext reports whether c may stand unescaped in a quoted-string.
func isQdtext(c byte) bool {
	return c == '\t' || c == ' ' || c == 0x21 || 0x23 <= c && c <= 0x5b || 0x5d <= c && c <= 0x7e || c >= 0x80
}

// isQuotedPairChar reports whether c may follow a backslash in a quoted-string.
func isQuotedPairChar(c byte) bool {
	return c == '\t' || c == ' ' || 0x21 <= c && c <= 0x7e || c >= 0x80
}

// unescape returns the content of a well-formed quoted-string without its backslashes.
func unescape(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
