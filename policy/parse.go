package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/admit-dev/admit/internal/yamlfield"
	"go.yaml.in/yaml/v3"
)

// Load reads the configuration file at path and parses it with [Parse], naming it path in errors.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1)) // one byte more tells a file too large
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return Parse(path, data)
}

// Parse reads a configuration file's bytes, naming it filename in errors: it parses, defaults and
// validates them, and returns the Config, or an [ErrorList] of every error found. A file larger
// than MaxFileSize, with several YAML documents, or with anchors and aliases is refused.
func Parse(filename string, data []byte) (*Config, error) {
	d := &decoder{file: filename}
	raw, ok := d.parse(data)
	if !ok {
		return nil, d.errors()
	}
	raw.setDefaults()
	cfg := d.validate(raw)
	if d.yf.Len() > 0 {
		return nil, d.errors()
	}
	sum := sha256.Sum256(data)
	cfg.Hash = hex.EncodeToString(sum[:])
	return cfg, nil
}

// A decoder turns one file into a Config, collecting errors as it goes.
type decoder struct {
	file string
	yf   yamlfield.Decoder
}

// errorf records an error at n's place (the whole file's for nil n).
func (d *decoder) errorf(n *yaml.Node, format string, args ...any) {
	d.yf.Errorf(n, format, args...)
}

// errors returns the errors recorded, in the order of their places.
func (d *decoder) errors() ErrorList {
	var list ErrorList
	for _, e := range d.yf.Errors() {
		list = append(list, &Error{File: d.file, Line: e.Line, Column: e.Column, Msg: e.Msg})
	}
	return list
}

// A field is a value read from the file, with the node it came from: nil when the file leaves it
// out. A field whose node the parse step refused is bad: its error is recorded, and the validate
// step neither checks it nor calls it missing.
type field[T any] struct {
	v    T
	node *yaml.Node
	bad  bool
}

// set reports whether the file sets f to a value of its type.
func (f field[T]) set() bool { return f.node != nil && !f.bad }

// missing reports whether the file leaves f out.
func (f field[T]) missing() bool { return f.node == nil }

// refused returns the bad field of node n.
func refused[T any](n *yaml.Node) field[T] { return field[T]{node: n, bad: true} }

// rawFile is a file's fields as parsed, before defaults.
type rawFile struct {
	server      rawServer
	policies    []rawPolicy
	policiesBad bool // the file is not a mapping, or its policies not a list
	routes      []rawRoute
	rlqs        []rawRLQS
}

type rawServer struct {
	listen, redis, hmacSecretFile, forwardedHeader field[string]
	redisTLS                                       *yaml.Node // server.redis_tls, nil if absent
	caFile, certFile, keyFile, serverName          field[string]
	trustedProxies                                 field[[]field[string]]
	ipv6Prefix                                     field[int64]
	rateLimitHeaders                               field[bool]
	localCacheMaxAge                               field[time.Duration]
	top                                            *yaml.Node // server.top, nil if absent
	topSize                                        field[int64]
	topReveal                                      field[bool]
	topPeriod                                      field[time.Duration]
	tls                                            *yaml.Node // server.tls, nil if absent
	tlsCert, tlsKey, tlsClientCA                   field[string]
	clientTokensFile                               field[string]
	trustNetwork                                   field[bool]
	redisCommandTimeout                            field[time.Duration]
	breaker                                        *yaml.Node // server.breaker, nil if absent
	breakerFailures                                field[int64]
	breakerCoolOff                                 field[time.Duration]
	breakerCountLate                               field[bool]
}

type rawPolicy struct {
	bad                                     bool // not a mapping: nothing to validate
	node                                    *yaml.Node
	path                                    string // "policies[i]"
	name, algorithm, version, mode, failure field[string]
	durability                              field[string]
	limit, burst, localLimit                field[int64]
	durabilityReplicas                      field[int64]
	window, leaseTTL, durabilityTimeout     field[time.Duration]
	aligned                                 field[bool]
	tiers                                   []rawTier
	tiersNode                               *yaml.Node // nil if absent
	tiersBad                                bool       // not a mapping
}

type rawRoute struct {
	bad                        bool // not a mapping: nothing to validate
	node                       *yaml.Node
	path                       string // "routes[i]"
	method, pathPrefix         field[string]
	policies                   field[[]field[string]]
	subjectFrom, subjectHeader field[string]
	subject                    *yaml.Node
	tierHeader                 field[string]
	tier                       *yaml.Node // nil if absent
	tierBad                    bool       // not a mapping
	cost                       field[int64]
}

// parse reads data into a rawFile: the parse step, which knows the fields and their types only. It
// reports false when the file is not YAML of one document, leaving nothing to validate; an error
// within a field only marks the field bad.
func (d *decoder) parse(data []byte) (raw rawFile, ok bool) {
	if len(data) > MaxFileSize {
		d.errorf(nil, "file of more than %d bytes", MaxFileSize)
		return raw, false
	}
	root, ok := d.yf.Document(data, "empty file: want at least one policy")
	if !ok || !d.yf.NoAliases(root) {
		return raw, false
	}
	top, _ := d.yf.Mapping(root, "", "server", "policies", "routes", "rlqs")
	raw.policiesBad = root.Kind != yaml.MappingNode || top["policies"] != nil && top["policies"].Kind != yaml.SequenceNode
	if n := top["server"]; n != nil {
		raw.server = d.parseServer(n)
	}
	items, _ := d.yf.Sequence(top["policies"], "policies")
	for i, item := range items {
		raw.policies = append(raw.policies, d.parsePolicy(item, fmt.Sprintf("policies[%d]", i)))
	}
	items, _ = d.yf.Sequence(top["routes"], "routes")
	for i, item := range items {
		raw.routes = append(raw.routes, d.parseRoute(item, fmt.Sprintf("routes[%d]", i)))
	}
	if n := top["rlqs"]; n != nil {
		raw.rlqs = d.parseRLQS(n)
	}
	return raw, true
}

func (d *decoder) parseServer(n *yaml.Node) rawServer {
	var s rawServer
	f, _ := d.yf.Mapping(n, "server", "listen", "redis", "hmac_secret_file", "trusted_proxies", "forwarded_header", "ipv6_prefix", "ratelimit_headers", "redis_tls", "local_cache_max_age", "top", "tls", "client_tokens_file", "trust_network", "redis_command_timeout", "breaker")
	if n := f["breaker"]; n != nil {
		s.breaker = n
		bf, _ := d.yf.Mapping(n, "server.breaker", "failures", "cool_off", "count_late")
		s.breakerFailures = d.integer(bf["failures"], "server.breaker.failures")
		s.breakerCoolOff = d.duration(bf["cool_off"], "server.breaker.cool_off")
		s.breakerCountLate = d.boolean(bf["count_late"], "server.breaker.count_late")
	}
	s.redisCommandTimeout = d.duration(f["redis_command_timeout"], "server.redis_command_timeout")
	if n := f["redis_tls"]; n != nil {
		s.redisTLS = n
		tf, _ := d.yf.Mapping(n, "server.redis_tls", "ca_file", "cert_file", "key_file", "server_name")
		s.caFile = d.str(tf["ca_file"], "server.redis_tls.ca_file")
		s.certFile = d.str(tf["cert_file"], "server.redis_tls.cert_file")
		s.keyFile = d.str(tf["key_file"], "server.redis_tls.key_file")
		s.serverName = d.str(tf["server_name"], "server.redis_tls.server_name")
	}
	if n := f["top"]; n != nil {
		s.top = n
		tf, _ := d.yf.Mapping(n, "server.top", "size", "reveal_subjects", "period")
		s.topSize = d.integer(tf["size"], "server.top.size")
		s.topReveal = d.boolean(tf["reveal_subjects"], "server.top.reveal_subjects")
		s.topPeriod = d.duration(tf["period"], "server.top.period")
	}
	if n := f["tls"]; n != nil {
		s.tls = n
		tf, _ := d.yf.Mapping(n, "server.tls", "cert_file", "key_file", "client_ca_file")
		s.tlsCert = d.str(tf["cert_file"], "server.tls.cert_file")
		s.tlsKey = d.str(tf["key_file"], "server.tls.key_file")
		s.tlsClientCA = d.str(tf["client_ca_file"], "server.tls.client_ca_file")
	}
	s.clientTokensFile = d.str(f["client_tokens_file"], "server.client_tokens_file")
	s.trustNetwork = d.boolean(f["trust_network"], "server.trust_network")
	s.listen = d.str(f["listen"], "server.listen")
	s.redis = d.str(f["redis"], "server.redis")
	s.hmacSecretFile = d.str(f["hmac_secret_file"], "server.hmac_secret_file")
	s.forwardedHeader = d.str(f["forwarded_header"], "server.forwarded_header")
	s.trustedProxies = d.strings(f["trusted_proxies"], "server.trusted_proxies")
	s.ipv6Prefix = d.integer(f["ipv6_prefix"], "server.ipv6_prefix")
	s.rateLimitHeaders = d.boolean(f["ratelimit_headers"], "server.ratelimit_headers")
	s.localCacheMaxAge = d.cacheMaxAge(f["local_cache_max_age"], "server.local_cache_max_age")
	return s
}

// cacheMaxAge reads the age bound of the over-limit cache: 0 (no cache), or a duration from
// MinLocalCacheMaxAge to MaxLocalCacheMaxAge.
func (d *decoder) cacheMaxAge(n *yaml.Node, path string) field[time.Duration] {
	if n == nil {
		return field[time.Duration]{}
	}
	const want = "0 (no local cache) or a duration from 1ms to 1m, such as 1s" // MinLocalCacheMaxAge, MaxLocalCacheMaxAge
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" && n.Value == "0" {
		return field[time.Duration]{v: 0, node: n} // a plain 0, as well as "0s"
	}
	v, ok := d.yf.Scalar(n, path, "!!str", want)
	if !ok {
		return refused[time.Duration](n)
	}
	t, err := time.ParseDuration(v)
	if err != nil || t != 0 && (t < MinLocalCacheMaxAge || t > MaxLocalCacheMaxAge) {
		d.errorf(n, "%s: %q: want %s", path, v, want)
		return refused[time.Duration](n)
	}
	return field[time.Duration]{v: t, node: n}
}

func (d *decoder) parsePolicy(n *yaml.Node, path string) rawPolicy {
	p := rawPolicy{node: n, path: path, bad: n.Kind != yaml.MappingNode}
	f, _ := d.yf.Mapping(n, path, "name", "algorithm", "limit", "window", "burst", "aligned", "lease_ttl", "version", "mode", "failure", "local_limit", "tiers", "durability", "durability_replicas", "durability_timeout")
	p.name = d.str(f["name"], path+".name")
	if p.name.v != "" {
		p.path = fmt.Sprintf("%s (%s)", path, p.name.v)
	}
	path = p.path
	p.algorithm = d.str(f["algorithm"], path+".algorithm")
	p.limit = d.integer(f["limit"], path+".limit")
	p.window = d.duration(f["window"], path+".window")
	p.burst = d.integer(f["burst"], path+".burst")
	p.aligned = d.boolean(f["aligned"], path+".aligned")
	p.leaseTTL = d.duration(f["lease_ttl"], path+".lease_ttl")
	p.version = d.str(f["version"], path+".version")
	p.mode = d.str(f["mode"], path+".mode")
	p.failure = d.str(f["failure"], path+".failure")
	p.localLimit = d.integer(f["local_limit"], path+".local_limit")
	p.durability = d.str(f["durability"], path+".durability")
	p.durabilityReplicas = d.integer(f["durability_replicas"], path+".durability_replicas")
	p.durabilityTimeout = d.duration(f["durability_timeout"], path+".durability_timeout")
	if n := f["tiers"]; n != nil {
		d.parseTiers(&p, n)
	}
	return p
}

// anyBad reports whether any of p's fields is bad.
func (p *rawPolicy) anyBad() bool {
	return p.name.bad || p.algorithm.bad || p.version.bad || p.mode.bad || p.failure.bad || p.limit.bad ||
		p.burst.bad || p.localLimit.bad || p.window.bad || p.leaseTTL.bad || p.aligned.bad ||
		p.durability.bad || p.durabilityReplicas.bad || p.durabilityTimeout.bad
}

func (d *decoder) parseRoute(n *yaml.Node, path string) rawRoute {
	r := rawRoute{node: n, path: path, bad: n.Kind != yaml.MappingNode}
	f, _ := d.yf.Mapping(n, path, "method", "path_prefix", "policies", "subject", "tier", "cost")
	r.method = d.str(f["method"], path+".method")
	r.pathPrefix = d.str(f["path_prefix"], path+".path_prefix")
	r.policies = d.strings(f["policies"], path+".policies")
	r.cost = d.integer(f["cost"], path+".cost")
	if s := f["subject"]; s != nil {
		r.subject = s
		sf, _ := d.yf.Mapping(s, path+".subject", "from", "header")
		r.subjectFrom = d.str(sf["from"], path+".subject.from")
		r.subjectHeader = d.str(sf["header"], path+".subject.header")
	}
	if t := f["tier"]; t != nil {
		r.tier = t
		tf, ok := d.yf.Mapping(t, path+".tier", "header")
		r.tierBad = !ok
		r.tierHeader = d.str(tf["header"], path+".tier.header")
	}
	return r
}

// read returns the field of node n, at path, that get turns into a value: missing for nil n, bad
// when get refuses n.
func read[T any](n *yaml.Node, path string, get func(*yaml.Node, string) (T, bool)) field[T] {
	if n == nil {
		return field[T]{}
	}
	v, ok := get(n, path)
	return field[T]{v: v, node: n, bad: !ok}
}

func (d *decoder) str(n *yaml.Node, path string) field[string] {
	return read(n, path, d.yf.String)
}

func (d *decoder) strings(n *yaml.Node, path string) field[[]field[string]] {
	return read(n, path, func(n *yaml.Node, path string) ([]field[string], bool) {
		items, ok := d.yf.Sequence(n, path)
		var vs []field[string]
		for i, item := range items {
			vs = append(vs, d.str(item, fmt.Sprintf("%s[%d]", path, i)))
		}
		return vs, ok
	})
}

// integer reads a decimal integer; its bounds are checked by the validate step.
func (d *decoder) integer(n *yaml.Node, path string) field[int64] {
	return read(n, path, func(n *yaml.Node, path string) (int64, bool) {
		return d.yf.Int(n, path, math.MinInt64, math.MaxInt64)
	})
}

func (d *decoder) boolean(n *yaml.Node, path string) field[bool] {
	return read(n, path, d.yf.Bool)
}

// duration reads a Go duration, such as 1s, 250ms or 24h, between 0 and durationLimit.
func (d *decoder) duration(n *yaml.Node, path string) field[time.Duration] {
	return read(n, path, func(n *yaml.Node, path string) (time.Duration, bool) {
		return d.yf.Duration(n, path, 0, durationLimit)
	})
}
