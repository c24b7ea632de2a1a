// Package httpproxy is the reverse proxy behind `admit proxy`: it applies the routes of a
// configuration (method and path prefix → policies and a subject) in front of any HTTP app.
//
// A [Proxy] matches each request against the routes of the configuration its [service.Service]
// has loaded, taken once per request; the first route that matches applies, and a request that
// matches none is forwarded unlimited. Routes match the decoded path, case-sensitively, and only a
// path in canonical form is matched or forwarded: one that only needs cleaning is redirected (308,
// for GET and HEAD) or refused (400), any other spelling is refused (docs/proxy.md#paths). A
// matched request is decided under every policy of its route at once, all-or-nothing, for the
// route's subject (client_ip, a header only a trusted proxy may set, or a constant) at its cost.
// A request that is not admitted is answered by the Proxy and never forwarded: 429, 400, 500 or
// 503 (docs/proxy.md#answers). An admitted one is forwarded with the RateLimit fields set on its
// response, its bodies streamed and Upgrade connections passed through, and holds the leases of
// its concurrency policies until its response is written (docs/proxy.md#forwarding).
//
// A Proxy answers no path of its own: [NewOps] serves the proxy's health, readiness and metrics,
// for a listener of their own.
package httpproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/httplimit"
	"github.com/admit-dev/admit/internal/lograte"
	"github.com/admit-dev/admit/internal/ratelimitfield"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
	"github.com/prometheus/client_golang/prometheus"
)

// BadGatewayBody is the body of a 502 response: the upstream could not be reached.
const BadGatewayBody = "bad gateway\n"

// ConstantSubject is the subject of every request of a route whose subject is `from: constant`.
const ConstantSubject = "constant"

// Options configure a Proxy; see [New].
type Options struct {
	// Upstream is the URL of the app the Proxy forwards to, such as http://127.0.0.1:3000; a path
	// in it prefixes every forwarded path. Required.
	Upstream *url.URL
	// Service decides requests under its loaded configuration, whose routes the Proxy applies.
	// Required.
	Service *service.Service
	// Logger receives the records of requests answered 400, 500, 502 or 503, at the rate
	// LogInterval allows. Nil means slog.Default().
	Logger *slog.Logger
	// LogInterval bounds the log rate of each kind of record (400, 500, 502, 503): the first is
	// written at once, and then one summary per LogInterval with the number left out (suppressed=N).
	// Zero means httplimit.DefaultLogInterval; less than zero logs every record.
	LogInterval time.Duration
	// UnavailableRetryAfter is the Retry-After of a 503, rounded up to whole seconds. Zero or less
	// means httplimit.DefaultUnavailableRetryAfter.
	UnavailableRetryAfter time.Duration
	// Transport carries requests to the upstream. Nil means http.DefaultTransport.
	Transport http.RoundTripper
	// Registerer, if not nil, receives the Proxy's metrics: admit_proxy_requests_total{answer},
	// the requests it answered by answer (AnswerForwarded …), and
	// admit_proxy_upstream_errors_total, the forwarded requests answered 502.
	Registerer prometheus.Registerer
}

// A Proxy is an http.Handler that limits requests by the routes of a Service's configuration and
// forwards those it admits to an upstream. Make one with [New]; it is safe for concurrent use.
//
// The server settings it uses — trusted_proxies, forwarded_header, ipv6_prefix and
// ratelimit_headers — are read once, by New, from the configuration loaded then; routes and
// policies are read per request, so a reload applies to the requests that start after it.
type Proxy struct {
	svc       *service.Service
	clientIP  *httplimit.ClientIP
	forwarded httplimit.ForwardedHeader
	headers   bool               // whether responses carry the RateLimit fields
	answers   *httplimit.Answers // the answers to requests not forwarded
	rp        *httputil.ReverseProxy
	log       *lograte.Limiter
	count     *counters
}

// New returns a Proxy to o.Upstream that applies the routes of o.Service's configuration, or an
// error when o lacks the Upstream or the Service, the loaded configuration's server settings are
// invalid, or its metrics cannot be registered into o.Registerer.
func New(o Options) (*Proxy, error) {
	if o.Upstream == nil || o.Service == nil {
		return nil, errors.New("httpproxy: New needs an Upstream and a Service")
	}
	if o.Upstream.Scheme != "http" && o.Upstream.Scheme != "https" || o.Upstream.Host == "" {
		return nil, fmt.Errorf("httpproxy: upstream %q: want http:// or https:// and a host", o.Upstream.Redacted())
	}
	srv := o.Service.Config().Server
	ci, err := httplimit.ConfigureClientIP(srv.TrustedProxies, srv.ForwardedHeader, srv.IPv6Prefix)
	if err != nil {
		return nil, fmt.Errorf("httpproxy: %w", err)
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	interval := o.LogInterval
	if interval == 0 {
		interval = httplimit.DefaultLogInterval
	}
	count, err := newCounters(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("httpproxy: metrics: %w", err)
	}
	p := &Proxy{
		svc:       o.Service,
		clientIP:  ci,
		forwarded: ci.Header(),
		headers:   srv.RateLimitHeaders,
		answers:   httplimit.NewAnswers(o.UnavailableRetryAfter, !srv.RateLimitHeaders),
		log:       lograte.New(logger, interval, logKinds...),
		count:     count,
	}
	upstream := *o.Upstream
	p.rp = &httputil.ReverseProxy{
		Rewrite:        func(pr *httputil.ProxyRequest) { p.rewrite(pr, &upstream) },
		Transport:      o.Transport,
		FlushInterval:  -1, // flush every write: a streamed response reaches the client as it is written
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.badGateway,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	return p, nil
}

// ServeHTTP limits r by the first route of the loaded configuration that matches its path, and
// forwards it to the upstream if it is admitted, or if no route matches. A path not in canonical
// form is redirected or refused first, never matched or forwarded (see the package doc).
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cfg := p.svc.Config() // the one configuration of this request
	switch clean, err := checkPath(cfg, r.Method, r.URL.Path, r.URL.RawPath); {
	case err != nil:
		p.refusePath(w, r, err)
		return
	case clean != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		p.count.answers[ansRedirected].Inc()
		u := url.URL{Path: clean, RawQuery: r.URL.RawQuery}
		http.Redirect(w, r, u.RequestURI(), http.StatusPermanentRedirect)
		return
	case clean != "":
		p.refusePath(w, r, pathError("it has empty, . or .. segments (only GET and HEAD are redirected to the clean path)"))
		return
	}
	route, ok := cfg.Route(r.Method, r.URL.Path)
	if !ok {
		p.count.answers[ansUnrouted].Inc()
		p.rp.ServeHTTP(w, r) // no route: unlimited
		return
	}
	subject, err := p.subject(r, route.Subject)
	if err == nil {
		subject.Tier, err = p.tier(r, route.Tier)
	}
	if err != nil {
		p.fail(w, r, err, true)
		return
	}
	res, release, err := p.svc.Admit(r.Context(), service.Check{Policies: route.Policies, Subject: subject, Tier: subject.Tier, Cost: route.Cost, Config: cfg})
	defer release() // once the response is written, or the client has gone, or on a panic
	switch {
	case errors.Is(err, policy.ErrUnknownTier), errors.Is(err, service.ErrInvalidTier):
		p.fail(w, r, fmt.Errorf("tier header %s: %w: %w", route.Tier.Header, err, httplimit.ErrMalformedRequest), true)
	case err != nil:
		p.fail(w, r, err, false)
	case !res.Allowed:
		p.count.answers[ansLimited].Inc()
		p.answers.Limited(w, res.Decisions, ratelimitfield.RetryAfter(res.Decisions[res.Deciding]))
	default:
		p.count.answers[ansForwarded].Inc()
		if p.headers {
			r = r.WithContext(context.WithValue(r.Context(), decisionsKey{}, res.Decisions))
		}
		p.rp.ServeHTTP(w, r)
	}
}

// refusePath answers 400 to a request whose path is not in canonical form, because of err, and
// logs it.
func (p *Proxy) refusePath(w http.ResponseWriter, r *http.Request, err error) {
	p.count.answers[ansNonCanonical].Inc()
	p.logRequest(r, kindMalformed, err)
	p.answers.Write(w, http.StatusBadRequest, NonCanonicalPathBody)
}

// errUntrustedPeer is the error of a request whose route reads its subject from a header that the
// request's TCP peer is not trusted to set.
var errUntrustedPeer = fmt.Errorf("the subject header comes from a peer not in trusted_proxies: %w", httplimit.ErrMalformedRequest)

// subject returns the subject of r under a route's Subject. Its error wraps
// httplimit.ErrMalformedRequest for a request the client must change.
func (p *Proxy) subject(r *http.Request, s policy.Subject) (admit.Subject, error) {
	switch s.From {
	case policy.SubjectConstant:
		return admit.Subject{ID: ConstantSubject}, nil
	case policy.SubjectHeader:
		if !p.clientIP.TrustsPeer(r) {
			return admit.Subject{}, errUntrustedPeer
		}
		id, err := oneValue(r.Header.Values(s.Header), "subject", s.Header)
		return admit.Subject{ID: id}, err
	}
	return p.clientIP.Subject(r)
}

// errUntrustedTier is the error of a request that carries the tier header of its route from a TCP
// peer not trusted to set it.
var errUntrustedTier = fmt.Errorf("the tier header comes from a peer not in trusted_proxies: %w", httplimit.ErrMalformedRequest)

// tier returns the tier of r under a route's RouteTier: "" for none. The header is read as a
// subject's is, from a trusted proxy only; it may be absent, but not repeated or empty. Its error
// wraps httplimit.ErrMalformedRequest.
func (p *Proxy) tier(r *http.Request, t policy.RouteTier) (string, error) {
	if t.Header == "" {
		return "", nil
	}
	vs := r.Header.Values(t.Header)
	switch {
	case len(vs) == 0:
		return "", nil
	case !p.clientIP.TrustsPeer(r):
		return "", errUntrustedTier
	}
	return oneValue(vs, "tier", t.Header)
}

// oneValue returns the one value vs of the header name, which holds what (the subject, the tier),
// or an error wrapping httplimit.ErrMalformedRequest when there are several, none, or it is empty.
func oneValue(vs []string, what, name string) (string, error) {
	if len(vs) != 1 || vs[0] == "" {
		return "", fmt.Errorf("%s header %s: %d values, want one that is not empty: %w", what, name, len(vs), httplimit.ErrMalformedRequest)
	}
	return vs[0], nil
}

// fail answers a request that was neither admitted nor limited, because of err, found while
// finding its subject when subject is set, and logs it.
func (p *Proxy) fail(w http.ResponseWriter, r *http.Request, err error, subject bool) {
	switch p.answers.Failed(w, r, err, subject) {
	case http.StatusBadRequest:
		p.count.answers[ansMalformed].Inc()
		p.logRequest(r, kindMalformed, err)
	case http.StatusInternalServerError:
		p.count.answers[ansInvalid].Inc()
		p.logRequest(r, kindInvalid, err)
	default:
		p.count.answers[ansUnavailable].Inc()
		if r.Context().Err() == nil { // else the client went away first: nothing to report
			p.logRequest(r, kindUnavailable, err)
		}
	}
}

// rewrite makes the request forwarded to upstream: its URL and Host are upstream's, and
// X-Forwarded-For, -Host and -Proto name the client as this proxy saw it. A peer's own
// X-Forwarded-For (or Forwarded) is kept, and appended to, only when the peer is a trusted proxy
// and the header is the server's forwarded_header; else it is dropped.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest, upstream *url.URL) {
	pr.SetURL(upstream)
	trusted := p.forwarded != httplimit.NoForwardedHeader && p.clientIP.TrustsPeer(pr.In)
	if trusted && p.forwarded == httplimit.XForwardedFor {
		pr.Out.Header["X-Forwarded-For"] = pr.In.Header["X-Forwarded-For"] // Rewrite removed it
	}
	pr.SetXForwarded()
	if !trusted || p.forwarded != httplimit.Forwarded {
		pr.Out.Header.Del("Forwarded")
		return
	}
	if peer, err := netip.ParseAddrPort(pr.In.RemoteAddr); err == nil {
		pr.Out.Header.Add("Forwarded", forwardedElement(peer.Addr().Unmap(), pr.In.TLS != nil))
	}
}

// forwardedElement returns the RFC 7239 element that says a request came from a, over TLS or not.
func forwardedElement(a netip.Addr, tls bool) string {
	proto := "http"
	if tls {
		proto = "https"
	}
	if a.Is6() {
		return `for="[` + a.WithZone("").String() + `]";proto=` + proto
	}
	return "for=" + a.String() + ";proto=" + proto
}

// decisionsKey is the context key of the Decisions of an admitted request, for its response's
// RateLimit fields.
type decisionsKey struct{}

// modifyResponse sets the RateLimit fields of the upstream's response to an admitted request,
// replacing any the upstream set.
func (p *Proxy) modifyResponse(resp *http.Response) error {
	if ds, ok := resp.Request.Context().Value(decisionsKey{}).([]admit.Decision); ok {
		delete(resp.Header, ratelimitfield.PolicyName)
		delete(resp.Header, ratelimitfield.Name)
		ratelimitfield.Set(resp.Header, ds, 0)
	}
	return nil
}

// badGateway answers 502 to a request the upstream did not answer, and logs it.
func (p *Proxy) badGateway(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() == nil { // else the client went away: not the upstream's failure
		p.count.upstream.Inc()
		p.logRequest(r, kindBadGateway, err)
	}
	p.answers.Write(w, http.StatusBadGateway, BadGatewayBody)
}

// The kinds of log records, each rate-bounded on its own: indexes of logKinds.
const (
	kindMalformed = iota
	kindInvalid
	kindUnavailable
	kindBadGateway
)

// logKinds are the proxy's kinds of log records.
var logKinds = []lograte.Kind{
	kindMalformed:   {Level: slog.LevelInfo, Msg: "malformed request"},
	kindInvalid:     {Level: slog.LevelError, Msg: "invalid limit or request"},
	kindUnavailable: {Level: slog.LevelWarn, Msg: "limiter unavailable"},
	kindBadGateway:  {Level: slog.LevelWarn, Msg: "upstream unavailable"},
}

// logRequest logs err, of kind k, about r, with its path as the client escaped it, at the log's
// bounded rate.
func (p *Proxy) logRequest(r *http.Request, k int, err error) {
	p.log.Log(r.Context(), k, err, slog.String("method", r.Method), slog.String("path", r.URL.EscapedPath()))
}

var _ http.Handler = (*Proxy)(nil)
