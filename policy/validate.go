package policy

import (
	"net/netip"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
)

// validate checks a parsed and defaulted file and builds its Config: the validate step. It records
// every error it finds; the Config is meaningful only when it finds none.
func (d *decoder) validate(raw rawFile) *Config {
	cfg := &Config{byName: make(map[string]int, len(raw.policies))}
	cfg.Server = d.validateServer(raw.server)
	if len(raw.policies) == 0 && !raw.policiesBad {
		d.errorf(nil, "policies: want at least one policy")
	}
	names := make(map[string]bool, len(raw.policies))
	for i := range raw.policies {
		p := &raw.policies[i]
		if !p.name.set() {
			continue
		}
		if names[p.name.v] {
			d.errorf(p.name.node, "%s.name: another policy before it has this name", p.path)
		}
		names[p.name.v] = true
	}
	for i := range raw.policies {
		if p, ok := d.validatePolicy(&raw.policies[i]); ok {
			if _, dup := cfg.byName[p.Limit.Name]; !dup {
				cfg.byName[p.Limit.Name] = len(cfg.Policies)
			}
			cfg.Policies = append(cfg.Policies, p)
		}
	}
	for i := range raw.routes {
		if r, ok := d.validateRoute(&raw.routes[i], names); ok && d.validateRouteCost(&raw.routes[i], r, cfg) && d.validateRouteTier(&raw.routes[i], r, cfg) {
			cfg.Routes = append(cfg.Routes, r)
		}
	}
	d.validateRLQS(raw.rlqs, cfg)
	return cfg
}

func (d *decoder) validateServer(s rawServer) Server {
	out := Server{
		Listen:           s.listen.v,
		Redis:            s.redis.v,
		HMACSecretFile:   s.hmacSecretFile.v,
		IPv6Prefix:       int(s.ipv6Prefix.v),
		RateLimitHeaders: s.rateLimitHeaders.v,
		LocalCacheMaxAge: s.localCacheMaxAge.v,
		Top:              Top{Size: int(s.topSize.v), RevealSubjects: s.topReveal.v, Period: s.topPeriod.v},

		RedisCommandTimeout: s.redisCommandTimeout.v,
		Breaker:             Breaker{Failures: int(s.breakerFailures.v), CoolOff: s.breakerCoolOff.v, CountLate: s.breakerCountLate.v},
	}
	if !s.listen.bad && s.listen.v == "" {
		d.errorf(s.listen.node, "server.listen: want an address such as 127.0.0.1:8080")
	}
	if s.hmacSecretFile.set() && s.hmacSecretFile.v == "" {
		d.errorf(s.hmacSecretFile.node, "server.hmac_secret_file: want a file name")
	}
	for i, p := range s.trustedProxies.v {
		if p.bad {
			continue
		}
		prefix, err := netip.ParsePrefix(p.v)
		if err != nil {
			addr, aerr := netip.ParseAddr(p.v)
			if aerr != nil {
				d.errorf(p.node, "server.trusted_proxies[%d]: %q is not a CIDR such as 10.0.0.0/8 or an address", i, p.v)
				continue
			}
			prefix = netip.PrefixFrom(addr, addr.BitLen())
		}
		out.TrustedProxies = append(out.TrustedProxies, prefix.Masked())
	}
	switch h := strings.ToLower(s.forwardedHeader.v); {
	case s.forwardedHeader.bad || s.trustedProxies.bad || len(out.TrustedProxies) < len(s.trustedProxies.v):
	case s.forwardedHeader.missing() && len(out.TrustedProxies) > 0:
		d.errorf(s.trustedProxies.node, "server.trusted_proxies: set server.forwarded_header too: x-forwarded-for or forwarded")
	case s.forwardedHeader.missing():
	case h != "x-forwarded-for" && h != "forwarded":
		d.errorf(s.forwardedHeader.node, "server.forwarded_header: %q: want x-forwarded-for or forwarded (RFC 7239)", s.forwardedHeader.v)
	case len(out.TrustedProxies) == 0:
		d.errorf(s.forwardedHeader.node, "server.forwarded_header: no server.trusted_proxies: the header of an untrusted peer is never read")
	default:
		out.ForwardedHeader = h
	}
	out.RedisTLS = d.validateRedisTLS(s)
	out.TLS = d.validateServerTLS(s)
	out.ClientTokensFile, out.TrustNetwork = s.clientTokensFile.v, s.trustNetwork.v
	if s.clientTokensFile.set() && s.clientTokensFile.v == "" {
		d.errorf(s.clientTokensFile.node, "server.client_tokens_file: want a file name")
	}
	if !s.ipv6Prefix.bad && (out.IPv6Prefix < 1 || out.IPv6Prefix > 128) {
		d.errorf(s.ipv6Prefix.node, "server.ipv6_prefix: %d is outside 1-128", s.ipv6Prefix.v)
	}
	if !s.topSize.bad && (s.topSize.v < 0 || s.topSize.v > MaxTopSize) {
		d.errorf(s.topSize.node, "server.top.size: %d is outside 0-%d (0: no sketch)", s.topSize.v, MaxTopSize)
	}
	if !s.topPeriod.bad && (s.topPeriod.v < MinTopPeriod || s.topPeriod.v > MaxTopPeriod) {
		d.errorf(s.topPeriod.node, "server.top.period: %v is outside 1m-24h", s.topPeriod.v) // MinTopPeriod, MaxTopPeriod
	}
	if t := s.redisCommandTimeout; !t.bad && (t.v < MinRedisCommandTimeout || t.v > MaxRedisCommandTimeout) {
		d.errorf(t.node, "server.redis_command_timeout: %v is outside 10ms-1m", t.v) // MinRedisCommandTimeout, MaxRedisCommandTimeout
	}
	if n := s.breakerFailures; !n.bad && (n.v < 1 || n.v > MaxBreakerFailures) {
		d.errorf(n.node, "server.breaker.failures: %d is outside 1-1000", n.v) // MaxBreakerFailures
	}
	if c := s.breakerCoolOff; !c.bad && (c.v < MinBreakerCoolOff || c.v > MaxBreakerCoolOff) {
		d.errorf(c.node, "server.breaker.cool_off: %v is outside 10ms-10m", c.v) // MinBreakerCoolOff, MaxBreakerCoolOff
	}
	return out
}

// validateRedisTLS checks server.redis_tls. Whether the URL is rediss:// is checked when the backend
// is opened: a flag or REDIS_URL may set the URL.
func (d *decoder) validateRedisTLS(s rawServer) RedisTLS {
	out := RedisTLS{CAFile: s.caFile.v, CertFile: s.certFile.v, KeyFile: s.keyFile.v, ServerName: s.serverName.v}
	for _, f := range []struct {
		name string
		v    field[string]
		want string
	}{{"ca_file", s.caFile, "a file name"}, {"cert_file", s.certFile, "a file name"}, {"key_file", s.keyFile, "a file name"}, {"server_name", s.serverName, "a host name"}} {
		if f.v.set() && f.v.v == "" {
			d.errorf(f.v.node, "server.redis_tls.%s: want %s", f.name, f.want)
		}
	}
	switch {
	case s.certFile.bad || s.keyFile.bad:
	case s.certFile.set() && s.keyFile.missing():
		d.errorf(s.certFile.node, "server.redis_tls.cert_file: set server.redis_tls.key_file too, the client certificate's key")
	case s.keyFile.set() && s.certFile.missing():
		d.errorf(s.keyFile.node, "server.redis_tls.key_file: set server.redis_tls.cert_file too, the client certificate")
	}
	if s.redisTLS != nil && s.caFile.missing() && s.certFile.missing() && s.keyFile.missing() && s.serverName.missing() && s.redisTLS.Kind == yaml.MappingNode {
		d.errorf(s.redisTLS, "server.redis_tls: empty: want ca_file, cert_file and key_file, or server_name")
	}
	return out
}

// validateServerTLS checks server.tls: a certificate and its key, both or neither, and a client CA
// only beside them. What the files hold is checked where they are read (internal/tlsconf).
func (d *decoder) validateServerTLS(s rawServer) ServerTLS {
	out := ServerTLS{CertFile: s.tlsCert.v, KeyFile: s.tlsKey.v, ClientCAFile: s.tlsClientCA.v}
	for _, f := range []struct {
		name string
		v    field[string]
	}{{"cert_file", s.tlsCert}, {"key_file", s.tlsKey}, {"client_ca_file", s.tlsClientCA}} {
		if f.v.set() && f.v.v == "" {
			d.errorf(f.v.node, "server.tls.%s: want a file name", f.name)
		}
	}
	switch {
	case s.tls == nil || s.tls.Kind != yaml.MappingNode || s.tlsCert.bad || s.tlsKey.bad:
	case s.tlsCert.missing() && s.tlsKey.missing() && s.tlsClientCA.missing():
		d.errorf(s.tls, "server.tls: empty: want cert_file and key_file, and client_ca_file to verify clients")
	case s.tlsCert.missing() && s.tlsKey.missing():
		d.errorf(s.tls, "server.tls: client_ca_file needs cert_file and key_file: client certificates are asked for over TLS only")
	case s.tlsKey.missing():
		d.errorf(s.tlsCert.node, "server.tls.cert_file: set server.tls.key_file too, the certificate's key")
	case s.tlsCert.missing():
		d.errorf(s.tlsKey.node, "server.tls.key_file: set server.tls.cert_file too, the certificate")
	}
	return out
}

// validatePolicy checks one policy and returns it, and whether it is valid.
func (d *decoder) validatePolicy(p *rawPolicy) (Policy, bool) {
	if p.bad {
		return Policy{}, false
	}
	before := d.yf.Len()
	path := p.path
	out := Policy{Version: p.version.v}
	lim := &out.Limit
	lim.Name = p.name.v
	switch {
	case p.name.missing():
		d.errorf(p.node, "%s: want a name", path)
	case p.name.set() && !validName(p.name.v):
		d.errorf(p.name.node, "%s.name: %q: want 1-%d characters of a-z, 0-9, '_' and '-'", path, p.name.v, bound.MaxNameLen)
	}
	if !p.version.bad && !validName(p.version.v) {
		d.errorf(p.version.node, "%s.version: %q: want 1-%d characters of a-z, 0-9, '_' and '-'", path, p.version.v, bound.MaxNameLen)
	}
	if p.algorithm.missing() {
		d.errorf(p.node, "%s: want an algorithm: fixed_window, sliding_window, sliding_log, gcra (token_bucket) or concurrency", path)
	} else if a, err := admit.ParseAlgorithm(p.algorithm.v); p.algorithm.set() && err != nil {
		d.errorf(p.algorithm.node, "%s.algorithm: %q: want fixed_window, sliding_window, sliding_log, gcra (token_bucket) or concurrency", path, p.algorithm.v)
	} else {
		lim.Algorithm = a // 0 for a bad field: validateNumbers then checks only what needs no algorithm
	}
	d.validateNumbers(p, lim)
	switch p.mode.v {
	case "":
		// a bad field, reported
	case "enforce":
		lim.Shadow = false
	case "shadow":
		lim.Shadow = true
	default:
		d.errorf(p.mode.node, "%s.mode: %q: want enforce or shadow", path, p.mode.v)
	}
	switch p.failure.v {
	case "":
		// a bad field, reported
	case "closed":
		out.Failure = Closed
		if p.localLimit.set() {
			d.errorf(p.localLimit.node, "%s.local_limit: only a policy with failure: open has a local limit", path)
		}
	case "open":
		out.Failure = Open
		out.LocalLimit = p.localLimit.v
		switch {
		case p.localLimit.bad:
		case p.localLimit.missing():
			d.errorf(p.failure.node, "%s.failure: open needs local_limit: the most a process admits on its own while the backend is down", path)
		case p.localLimit.v < 1 || p.limit.set() && p.localLimit.v > p.limit.v:
			d.errorf(p.localLimit.node, "%s.local_limit: %d is outside 1-%d (the limit)", path, p.localLimit.v, p.limit.v)
		}
	default:
		d.errorf(p.failure.node, "%s.failure: %q: want closed or open", path, p.failure.v)
	}
	d.validateDurability(p, &out)
	ok := d.yf.Len() == before && !p.anyBad()
	if err := lim.Validate(); ok && err != nil { // what the checks above leave: GCRA's rounding, for one
		d.errorf(p.node, "%s: %s", path, strings.TrimPrefix(err.Error(), admit.ErrInvalidLimit.Error()+": "))
		ok = false
	}
	tiers, tiersOK := d.validateTiers(p, out, ok)
	if !ok || !tiersOK {
		return Policy{}, false
	}
	out.Tiers = tiers
	return out, true
}

// validateDurability checks a policy's durability (docs/running-redis.md, "Durability") and sets
// out.Limit's Replicas and ReplicaTimeout: async (the default) waits for nothing; replicated waits
// for durability_replicas (default 1) replicas, up to durability_timeout (default the store's
// command timeout).
func (d *decoder) validateDurability(p *rawPolicy, out *Policy) {
	path := p.path
	switch p.durability.v {
	case "", "async":
		// missing, bad (reported) or async
		for _, f := range []struct {
			name string
			node *yaml.Node
		}{{"durability_replicas", p.durabilityReplicas.node}, {"durability_timeout", p.durabilityTimeout.node}} {
			if f.node != nil && !p.durability.bad {
				d.errorf(f.node, "%s.%s: only a policy with durability: replicated waits for replicas", path, f.name)
			}
		}
		return
	case "replicated":
	default:
		d.errorf(p.durability.node, "%s.durability: %q: want async or replicated", path, p.durability.v)
		return
	}
	lim := &out.Limit
	lim.Replicas = 1
	switch {
	case p.durabilityReplicas.bad:
	case p.durabilityReplicas.set() && (p.durabilityReplicas.v < 1 || p.durabilityReplicas.v > bound.MaxReplicas):
		d.errorf(p.durabilityReplicas.node, "%s.durability_replicas: %d is outside 1-%d", path, p.durabilityReplicas.v, bound.MaxReplicas)
	case p.durabilityReplicas.set():
		lim.Replicas = int(p.durabilityReplicas.v)
	}
	switch t := p.durabilityTimeout; {
	case t.bad || !t.set():
	case t.v < time.Millisecond || t.v > bound.MaxReplicaTimeout || t.v%time.Millisecond != 0:
		d.errorf(t.node, "%s.durability_timeout: %v: want a whole number of milliseconds, 1ms to %v", path, t.v, bound.MaxReplicaTimeout)
	default:
		lim.ReplicaTimeout = t.v
	}
	if out.Failure == Open {
		d.errorf(p.durability.node, "%s.durability: replicated with failure: open: an undecided decision would be admitted by the local limiter; a replicated policy fails closed", path)
	}
}

// validateNumbers checks a policy's limit, window, burst, alignment and lease TTL against its
// algorithm (lim.Algorithm, 0 when unknown), and sets them in lim.
func (d *decoder) validateNumbers(p *rawPolicy, lim *admit.Limit) {
	path := p.path
	maxLimit, why := bound.MaxRate, ""
	switch lim.Algorithm {
	case admit.SlidingLog:
		maxLimit, why = bound.MaxSlidingLogRate, " (a sliding_log keeps every admission)"
	case admit.Concurrency:
		maxLimit, why = bound.MaxConcurrency, " (a concurrency key keeps every lease)"
	}
	switch {
	case p.limit.missing():
		d.errorf(p.node, "%s: want a limit", path)
	case p.limit.bad:
	case p.limit.v < 1 || p.limit.v > maxLimit:
		d.errorf(p.limit.node, "%s.limit: %d is outside 1-%d%s", path, p.limit.v, maxLimit, why)
	default:
		lim.Rate = p.limit.v
	}
	period, periodField := p.window, "window"
	switch lim.Algorithm {
	case 0:
		// unknown: a window or a lease TTL
		if p.window.missing() {
			period, periodField = p.leaseTTL, "lease_ttl"
		}
	case admit.Concurrency:
		period, periodField = p.leaseTTL, "lease_ttl"
		if !p.window.missing() {
			d.errorf(p.window.node, "%s.window: a concurrency policy has no window; its leases expire after lease_ttl", path)
		}
	default:
		if !p.leaseTTL.missing() {
			d.errorf(p.leaseTTL.node, "%s.lease_ttl: only a concurrency policy has leases", path)
		}
	}
	switch {
	case period.missing() && lim.Algorithm != 0:
		d.errorf(p.node, "%s: want a %s", path, periodField)
	case !period.set():
	case period.v < bound.MinPeriod || period.v%bound.MinPeriod != 0:
		d.errorf(period.node, "%s.%s: %v: want a whole number of milliseconds, at least %v", path, periodField, period.v, bound.MinPeriod)
	default:
		lim.Period = period.v
	}
	if p.burst.set() {
		switch {
		case lim.Algorithm == 0:
		case lim.Algorithm != admit.GCRA:
			d.errorf(p.burst.node, "%s.burst: only gcra (token_bucket) has a burst", path)
		case p.burst.v < 1 || p.burst.v > bound.MaxRate:
			d.errorf(p.burst.node, "%s.burst: %d is outside 1-%d", path, p.burst.v, bound.MaxRate)
		default:
			lim.Burst = p.burst.v
		}
	}
	if p.aligned.set() {
		if lim.Algorithm != 0 && lim.Algorithm != admit.FixedWindow {
			d.errorf(p.aligned.node, "%s.aligned: only a fixed_window can be aligned", path)
		}
		lim.Aligned = p.aligned.v
	}
}

// validateRoute checks one route against the policies named in the file, and returns it, and
// whether it is valid.
func (d *decoder) validateRoute(r *rawRoute, policies map[string]bool) (Route, bool) {
	if r.bad {
		return Route{}, false
	}
	before := d.yf.Len()
	path := r.path
	out := Route{Method: r.method.v, PathPrefix: r.pathPrefix.v, Cost: r.cost.v, Subject: Subject{From: r.subjectFrom.v, Header: r.subjectHeader.v},
		Tier: RouteTier{Header: r.tierHeader.v}}
	if r.method.set() && !validMethod(r.method.v) {
		d.errorf(r.method.node, "%s.method: %q: want an HTTP method such as GET, in capitals", path, r.method.v)
	}
	switch {
	case r.pathPrefix.missing():
		d.errorf(r.node, "%s: want a path_prefix, such as /", path)
	case r.pathPrefix.set() && !strings.HasPrefix(r.pathPrefix.v, "/"):
		d.errorf(r.pathPrefix.node, "%s.path_prefix: %q: want a path starting with /", path, r.pathPrefix.v)
	}
	switch n := len(r.policies.v); {
	case r.policies.missing():
		d.errorf(r.node, "%s: want policies: the names of the policies the route applies", path)
	case r.policies.bad:
	case n == 0 || n > bound.MaxRequests:
		d.errorf(r.policies.node, "%s.policies: %d policies; want 1-%d", path, n, bound.MaxRequests)
	}
	seen := make(map[string]bool, len(r.policies.v))
	for i, name := range r.policies.v {
		switch {
		case name.bad:
		case !policies[name.v]:
			d.errorf(name.node, "%s.policies[%d]: no policy is named %q", path, i, name.v)
		case seen[name.v]:
			d.errorf(name.node, "%s.policies[%d]: %q is listed twice", path, i, name.v)
		}
		seen[name.v] = true
		out.Policies = append(out.Policies, name.v)
	}
	if !r.cost.bad && (r.cost.v < 0 || r.cost.v > bound.MaxRate) {
		d.errorf(r.cost.node, "%s.cost: %d is outside 0-%d", path, r.cost.v, bound.MaxRate)
	}
	d.validateSubject(r, path)
	if r.tier != nil && !r.tierBad && !r.tierHeader.bad && r.tierHeader.v == "" {
		d.errorf(r.tier, "%s.tier: want header: the name of a header only a trusted proxy sets, which holds the tier", path)
	}
	return out, d.yf.Len() == before
}

// validateRouteTier reports, for a route out that validateRoute made of r, whether a tier it reads
// can mean anything: at least one of its policies in cfg has tiers.
func (d *decoder) validateRouteTier(r *rawRoute, out Route, cfg *Config) bool {
	if out.Tier.Header == "" {
		return true
	}
	for _, name := range out.Policies {
		if p, ok := cfg.Policy(name); !ok || p.Tiers != nil {
			return true // an invalid policy is reported, and may have had tiers
		}
	}
	d.errorf(r.tier, "%s.tier: none of the route's policies has tiers: a tier would change nothing", r.path)
	return false
}

// validateRouteCost reports, for a route out that validateRoute made of r, whether its cost is one
// that each of its policies in cfg can decide: at most the policy's capacity, and 0 or 1 under a
// concurrency policy, as every check's cost. Any other would make each of the route's requests a
// 500.
func (d *decoder) validateRouteCost(r *rawRoute, out Route, cfg *Config) bool {
	at := r.cost.node
	if at == nil {
		at = r.node
	}
	for _, name := range out.Policies {
		p, ok := cfg.Policy(name)
		if !ok {
			continue // invalid, reported
		}
		switch lim := p.Limit; {
		case lim.Algorithm == admit.Concurrency && out.Cost > 1:
			d.errorf(at, "%s.cost: %d: policy %q is a concurrency policy, which counts requests in flight, one lease each: a route with it costs 0 or 1", r.path, out.Cost, name)
			return false
		case out.Cost > lim.Capacity():
			d.errorf(at, "%s.cost: %d is above the capacity of policy %q (%d): no request of the route could be admitted", r.path, out.Cost, name, lim.Capacity())
			return false
		}
	}
	return true
}

func (d *decoder) validateSubject(r *rawRoute, path string) {
	at := r.subjectFrom.node
	if at == nil {
		at = r.subject
	}
	switch r.subjectFrom.v {
	case "":
		// a bad field, reported
	case SubjectHeader:
		if !r.subjectHeader.set() || r.subjectHeader.v == "" {
			d.errorf(at, "%s.subject: from: header needs header: the name of a header only a trusted proxy sets", path)
		}
	case SubjectClientIP, SubjectConstant:
		if r.subjectHeader.set() {
			d.errorf(r.subjectHeader.node, "%s.subject.header: only a subject from: header reads a header", path)
		}
	default:
		d.errorf(at, "%s.subject.from: %q: want client_ip, header or constant", path, r.subjectFrom.v)
	}
}

// validName reports whether s is 1 to bound.MaxNameLen characters of a-z, 0-9, '_' and '-', as
// policy names and key versions must be.
func validName(s string) bool {
	lim := admit.Limit{Name: s, Algorithm: admit.FixedWindow, Rate: 1, Period: bound.MinPeriod}
	return s != "" && lim.Validate() == nil
}

// validMethod reports whether s is an HTTP method token in capitals, such as GET.
func validMethod(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}
