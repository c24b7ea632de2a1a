// Package policy reads admit's configuration files into validated, immutable policy sets. A file
// names policies (an algorithm and its numbers, a mode and a failure mode each) and, for
// `admit serve` and `admit proxy`, server settings and routes:
//
//	policies:
//	  - name: per-second
//	    algorithm: gcra          # fixed_window | sliding_window | sliding_log | gcra (token_bucket) | concurrency
//	    limit: 10
//	    window: 1s
//	routes:
//	  - path_prefix: /api/
//	    policies: [per-second]
//
// [Parse] reads a file in three separate steps (parse, default, validate) and reports every error
// it finds at once, each with file:line:column, as an [ErrorList]. Every field, its default and
// its bounds: docs/configuration.md#configuration-file.
package policy

import (
	"net/netip"
	"strings"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
)

// A Config is one configuration file, validated. It is immutable once Parse returns it: share it
// freely, and replace it whole to reload.
type Config struct {
	// Server holds the settings of `admit serve` and `admit proxy`.
	Server Server
	// Policies are the file's policies, in its order, with distinct names.
	Policies []Policy
	// Routes are the file's routes, in its order: the first that matches a request applies.
	Routes []Route
	// RLQS are the file's rlqs entries, one per domain, in its order (docs/rlqs.md).
	RLQS []RLQSDomain
	// Hash is the hex SHA-256 of the file's bytes, to tell which configuration is loaded.
	Hash string

	byName map[string]int // policy name → index in Policies
}

// Policy returns the policy named name, and whether there is one.
func (c *Config) Policy(name string) (Policy, bool) {
	i, ok := c.byName[name]
	if !ok {
		return Policy{}, false
	}
	return c.Policies[i], true
}

// Route returns the first of c's Routes that matches a request of method for path, and whether one
// does. A route matches when its Method is empty or is method — or is GET and method is HEAD, which
// an app answers as a GET without its body, so a HEAD never escapes a GET route's budget — and path
// starts with its PathPrefix (a plain string prefix, case-sensitive: "/api" matches "/api/x" and
// "/apix", not "/API"). path is the decoded URL path, which the caller must have found canonical: "//api/x" or
// "/./api/x" match no route starting with "/api" (package httpproxy redirects or refuses them).
func (c *Config) Route(method, path string) (Route, bool) {
	for _, r := range c.Routes {
		if (r.Method == "" || r.Method == method || r.Method == "GET" && method == "HEAD") && strings.HasPrefix(path, r.PathPrefix) {
			return r, true
		}
	}
	return Route{}, false
}

// A Policy is a named Limit and how to apply it.
type Policy struct {
	// Limit is the policy's algorithm and numbers; its Name is the policy's name, and its Shadow
	// the policy's mode: shadow (docs/http.md, "Shadow mode") or enforce.
	Limit admit.Limit
	// Version is the policy's key version (admit.KeyBuilder): change it to start every subject
	// afresh. The default is "1".
	Version string
	// Failure says what happens when the backend cannot decide: Closed answers unavailable; Open
	// lets a local limiter of LocalLimit decide (docs/failure-modes.md).
	Failure Failure
	// LocalLimit is the limit of the local limiter that decides under Failure Open, per process,
	// per Limit.Period: 1 … Limit.Rate, and at most each tier's Rate. It is 0 under Failure Closed.
	LocalLimit int64
	// Tiers are the policy's tiers by name, nil when it has none: each a valid Limit with the
	// policy's Name, Algorithm, Aligned and Shadow, its Tier the tier's name, and the numbers the tier sets in place of the
	// policy's. A request names its tier ([Policy.LimitFor]). Like the Config, it is not modified.
	Tiers map[string]admit.Limit
}

// Failure is a policy's failure mode: what happens when the backend cannot decide. The zero value is
// Closed.
type Failure uint8

// The failure modes of a policy.
const (
	// Closed answers unavailable (HTTP 503) when the backend cannot decide.
	Closed Failure = iota
	// Open lets a bounded local limiter decide, marking its decisions degraded.
	Open
)

// String returns the failure mode's name in configuration: "closed" or "open".
func (f Failure) String() string {
	if f == Open {
		return "open"
	}
	return "closed"
}

// Server holds the settings of `admit serve` and `admit proxy`. Flags and environment variables
// override them (flag, then environment, then file).
type Server struct {
	// Listen is the HTTP listen address; default DefaultListen.
	Listen string
	// Redis is the Redis URL; empty means the in-memory backend.
	Redis string
	// RedisTLS are the TLS settings of a rediss:// Redis URL (server.redis_tls); all empty means the
	// system roots and no client certificate.
	RedisTLS RedisTLS
	// HMACSecretFile names the file holding the HMAC secret of keys; empty means none is configured.
	HMACSecretFile string
	// TrustedProxies are the peers whose forwarding header is read to find a client's address.
	TrustedProxies []netip.Prefix
	// ForwardedHeader is the header read from a trusted proxy: "x-forwarded-for" or "forwarded"
	// (RFC 7239); empty when no proxy is trusted.
	ForwardedHeader string
	// IPv6Prefix is the prefix length by which IPv6 clients are grouped into one subject, so that one
	// host cannot mint many; default DefaultIPv6Prefix.
	IPv6Prefix int
	// RateLimitHeaders reports whether responses carry the RateLimit-Policy and RateLimit fields;
	// default true.
	RateLimitHeaders bool
	// LocalCacheMaxAge bounds how long, on Redis, a process answers a full key's requests from the
	// rejection it remembers (guard.OverLimitOptions.MaxAge) instead of asking Redis: a change made
	// in Redis is seen within it (server.local_cache_max_age). 0 means no local cache; otherwise
	// MinLocalCacheMaxAge … MaxLocalCacheMaxAge, default DefaultLocalCacheMaxAge.
	LocalCacheMaxAge time.Duration
	// Top are the settings of the sketch of the subjects rejected most per policy (server.top).
	Top Top
	// TLS are the files of the TLS of admit serve's HTTP and gRPC listeners (server.tls); all
	// empty means plain HTTP and gRPC.
	TLS ServerTLS
	// ClientTokensFile names the file of the data plane's client tokens
	// (server.client_tokens_file); empty means the data plane asks for no token.
	ClientTokensFile string
	// TrustNetwork silences the warning of a data plane listening beyond loopback with neither
	// client certificates nor client tokens (server.trust_network); default false.
	TrustNetwork bool
	// RedisCommandTimeout bounds one decision on Redis, from the call to the reply
	// (server.redis_command_timeout, redisstore.Config.CommandTimeout): MinRedisCommandTimeout …
	// MaxRedisCommandTimeout, default DefaultRedisCommandTimeout.
	RedisCommandTimeout time.Duration
	// Breaker are the settings of the circuit breaker over Redis (server.breaker).
	Breaker Breaker
}

// Breaker holds the settings of the circuit breaker over Redis, the fields of
// guard.BreakerOptions of the same names (docs/failure-modes.md#circuit-breaker).
type Breaker struct {
	// Failures is the number of consecutive failures that opens it (server.breaker.failures):
	// 1 … MaxBreakerFailures, default DefaultBreakerFailures.
	Failures int
	// CoolOff is how long it stays open before a probe (server.breaker.cool_off): MinBreakerCoolOff
	// … MaxBreakerCoolOff, default DefaultBreakerCoolOff.
	CoolOff time.Duration
	// CountLate counts a late client's timeouts as failures too (server.breaker.count_late);
	// default false.
	CountLate bool
}

// ServerTLS holds the files of the TLS that admit serve's listeners serve: file names, read when
// the server starts and again when they change (docs/security.md).
type ServerTLS struct {
	// CertFile and KeyFile are the PEM certificate chain and its key (server.tls.cert_file,
	// key_file), set together.
	CertFile, KeyFile string
	// ClientCAFile is a PEM bundle of the CAs that sign client certificates
	// (server.tls.client_ca_file): set, every client must present a certificate one of them signed.
	ClientCAFile string
}

// Enabled reports whether t asks for TLS.
func (t ServerTLS) Enabled() bool { return t.CertFile != "" }

// Top holds the settings of the per-policy sketches of the subjects rejected most, which the admin
// API's GET /v1/top reads (docs/operations.md, "Who is being limited").
type Top struct {
	// Size is the most subjects each policy's sketch holds (server.top.size): 0 (no sketch)
	// to MaxTopSize, default DefaultTopSize.
	Size int
	// RevealSubjects keeps each counted subject's raw value in the process's memory, to show it
	// beside its digest (server.top.reveal_subjects); default false: digests only.
	RevealSubjects bool
	// Period is how long a rejection is counted, at most a tenth more (server.top.period):
	// MinTopPeriod to MaxTopPeriod, default DefaultTopPeriod.
	Period time.Duration
}

// RedisTLS holds the TLS settings of the Redis connection, the fields of redisstore.Config of the
// same names: file names, read when the backend is opened, which refuses to start on a file it
// cannot use or on settings given with a URL that is not rediss://.
type RedisTLS struct {
	// CAFile is a PEM bundle of the CAs that may sign Redis's certificate (server.redis_tls.ca_file).
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key (cert_file, key_file), set together.
	CertFile, KeyFile string
	// ServerName is the name Redis's certificate must carry when not the URL's host (server_name).
	ServerName string
}

// Defaults of the Server settings.
const (
	// DefaultListen is Server.Listen when the file sets none.
	DefaultListen = "127.0.0.1:8080"
	// DefaultIPv6Prefix is Server.IPv6Prefix when the file sets none.
	DefaultIPv6Prefix = 64
	// DefaultLocalCacheMaxAge is Server.LocalCacheMaxAge when the file sets none.
	DefaultLocalCacheMaxAge = time.Second
	// MinLocalCacheMaxAge and MaxLocalCacheMaxAge bound a Server.LocalCacheMaxAge other than 0.
	MinLocalCacheMaxAge = time.Millisecond
	MaxLocalCacheMaxAge = time.Minute
	// DefaultRedisCommandTimeout is Server.RedisCommandTimeout when the file sets none (redisstore's
	// default); MinRedisCommandTimeout and MaxRedisCommandTimeout bound it.
	DefaultRedisCommandTimeout = 200 * time.Millisecond
	MinRedisCommandTimeout     = 10 * time.Millisecond
	MaxRedisCommandTimeout     = time.Minute
	// DefaultBreakerFailures is Breaker.Failures when the file sets none (guard's default);
	// MaxBreakerFailures bounds it.
	DefaultBreakerFailures = 5
	MaxBreakerFailures     = 1000
	// DefaultBreakerCoolOff is Breaker.CoolOff when the file sets none (guard's default);
	// MinBreakerCoolOff and MaxBreakerCoolOff bound it.
	DefaultBreakerCoolOff = time.Second
	MinBreakerCoolOff     = 10 * time.Millisecond
	MaxBreakerCoolOff     = 10 * time.Minute
	// DefaultTopSize is Top.Size when the file sets none; MaxTopSize bounds it.
	DefaultTopSize = 100
	MaxTopSize     = 10000
	// DefaultTopPeriod is Top.Period when the file sets none; MinTopPeriod and MaxTopPeriod bound it.
	DefaultTopPeriod = 10 * time.Minute
	MinTopPeriod     = time.Minute
	MaxTopPeriod     = 24 * time.Hour
)

// A Route applies policies to the requests it matches (`admit proxy`): every policy at once,
// all-or-nothing, for the subject it names.
type Route struct {
	// Method is the HTTP method matched; empty matches every method.
	Method string
	// PathPrefix is the prefix of the URL path matched; it starts with '/'.
	PathPrefix string
	// Policies are the names of the policies applied, each defined in the file's policies.
	Policies []string
	// Subject says who a request is limited as.
	Subject Subject
	// Tier says where a request's tier is, if anywhere: a request without one is decided under
	// the policies' own numbers.
	Tier RouteTier
	// Cost is the units each request costs under every policy; default 1.
	Cost int64
}

// A Subject says where a route finds who a request is limited as.
type Subject struct {
	// From is SubjectClientIP (the client's address through trusted proxies, the default),
	// SubjectHeader (a header that only a trusted proxy may set) or SubjectConstant (one subject
	// for every request).
	From string
	// Header is the header read when From is SubjectHeader.
	Header string
}

// A RouteTier says where a route finds the tier of a request (a tier of its policies'
// Tiers): in Header, which only a trusted proxy may set; nowhere when Header is empty.
type RouteTier struct {
	// Header is the header that holds the tier; empty for none.
	Header string
}

// The sources of a route's subject.
const (
	SubjectClientIP = "client_ip"
	SubjectHeader   = "header"
	SubjectConstant = "constant"
)

// MaxFileSize is the largest configuration file Parse reads.
const MaxFileSize = 1 << 20

// durationLimit bounds the durations of a file: every window and TTL.
const durationLimit = bound.MaxPeriod
