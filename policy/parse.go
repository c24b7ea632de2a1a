package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/admit-dev/admit/internal/yamlerr"
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
		return nil, d.errs
	}
	raw.setDefaults()
	cfg := d.validate(raw)
	if len(d.errs) > 0 {
		d.errs.sort()
		return nil, d.errs
	}
	sum := sha256.Sum256(data)
	cfg.Hash = hex.EncodeToString(sum[:])
	return cfg, nil
}

// A decoder turns one file into a Config, collecting errors as it goes.
type decoder struct {
	file string
	errs ErrorList
}

// errorf records an error at n's place (the whole file's for nil n).
func (d *decoder) errorf(n *yaml.Node, format string, args ...any) {
	e := &Error{File: d.file, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	d.errs = append(d.errs, e)
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
}

type rawServer struct {
	listen, redis, hmacSecretFile, forwardedHeader field[string]
	redisTLS                                       *yaml.Node // server.redis_tls, nil if absent
	caFile, certFile, keyFile, serverName          field[string]
	trustedProxies                                 field[[]field[string]]
	ipv6Prefix                                     field[int64]
	rateLimitHeaders                               field[bool]
	localCacheMaxAge                               field[time.Duration]
}

type rawPolicy struct {
	bad                                     bool // not a mapping: nothing to validate
	node                                    *yaml.Node
	path                                    string // "policies[i]"
	name, algorithm, version, mode, failure field[string]
	limit, burst, localLimit                field[int64]
	window, leaseTTL                        field[time.Duration]
	aligned                                 field[bool]
}

type rawRoute struct {
	bad                        bool // not a mapping: nothing to validate
	node                       *yaml.Node
	path                       string // "routes[i]"
	method, pathPrefix         field[string]
	policies                   field[[]field[string]]
	subjectFrom, subjectHeader field[string]
	subject                    *yaml.Node
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
	var doc yaml.Node
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.errorf(nil, "empty file: want at least one policy")
			return raw, false
		}
		d.syntaxError(data, err)
		return raw, false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		d.errorf(&extra, "a second YAML document: want one")
		return raw, false
	} else if !errors.Is(err, io.EOF) { // a second document, and not even YAML
		e := &Error{File: d.file, Line: yamlerr.DocumentStart(data, doc.Line), Column: 1, Msg: "a second YAML document: want one"}
		if e.Line == 0 {
			e.Column = 0
		}
		d.errs = append(d.errs, e)
		return raw, false
	}
	if bad := findAlias(&doc); bad != nil {
		d.errorf(bad, "anchors and aliases are not supported")
		return raw, false
	}
	root := doc.Content[0]
	top := d.mapping(root, "", "server", "policies", "routes")
	raw.policiesBad = root.Kind != yaml.MappingNode || top["policies"] != nil && top["policies"].Kind != yaml.SequenceNode
	if n := top["server"]; n != nil {
		raw.server = d.parseServer(n)
	}
	if n := top["policies"]; n != nil {
		for i, item := range d.sequence(n, "policies") {
			raw.policies = append(raw.policies, d.parsePolicy(item, fmt.Sprintf("policies[%d]", i)))
		}
	}
	if n := top["routes"]; n != nil {
		for i, item := range d.sequence(n, "routes") {
			raw.routes = append(raw.routes, d.parseRoute(item, fmt.Sprintf("routes[%d]", i)))
		}
	}
	return raw, true
}

// syntaxError records a YAML syntax error of data at its offending token.
func (d *decoder) syntaxError(data []byte, err error) {
	e, ok := yamlerr.Locate(data, err)
	if !ok {
		d.errorf(nil, "YAML: %s", e.Msg)
		return
	}
	d.errs = append(d.errs, &Error{File: d.file, Line: e.Line, Column: e.Column, Msg: "YAML: " + e.Msg})
}

// findAlias returns the first anchor or alias in n, or nil.
func findAlias(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return n
	}
	for _, c := range n.Content {
		if bad := findAlias(c); bad != nil {
			return bad
		}
	}
	return nil
}

func (d *decoder) parseServer(n *yaml.Node) rawServer {
	var s rawServer
	f := d.mapping(n, "server", "listen", "redis", "hmac_secret_file", "trusted_proxies", "forwarded_header", "ipv6_prefix", "ratelimit_headers", "redis_tls", "local_cache_max_age")
	if n := f["redis_tls"]; n != nil {
		s.redisTLS = n
		tf := d.mapping(n, "server.redis_tls", "ca_file", "cert_file", "key_file", "server_name")
		s.caFile = d.str(tf["ca_file"], "server.redis_tls.ca_file")
		s.certFile = d.str(tf["cert_file"], "server.redis_tls.cert_file")
		s.keyFile = d.str(tf["key_file"], "server.redis_tls.key_file")
		s.serverName = d.str(tf["server_name"], "server.redis_tls.server_name")
	}
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
	v, ok := d.scalar(n, path, "!!str", want)
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
	f := d.mapping(n, path, "name", "algorithm", "limit", "window", "burst", "aligned", "lease_ttl", "version", "mode", "failure", "local_limit")
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
	return p
}

// anyBad reports whether any of p's fields is bad.
func (p *rawPolicy) anyBad() bool {
	return p.name.bad || p.algorithm.bad || p.version.bad || p.mode.bad || p.failure.bad || p.limit.bad ||
		p.burst.bad || p.localLimit.bad || p.window.bad || p.leaseTTL.bad || p.aligned.bad
}

func (d *decoder) parseRoute(n *yaml.Node, path string) rawRoute {
	r := rawRoute{node: n, path: path, bad: n.Kind != yaml.MappingNode}
	f := d.mapping(n, path, "method", "path_prefix", "policies", "subject", "cost")
	r.method = d.str(f["method"], path+".method")
	r.pathPrefix = d.str(f["path_prefix"], path+".path_prefix")
	r.policies = d.strings(f["policies"], path+".policies")
	r.cost = d.integer(f["cost"], path+".cost")
	if s := f["subject"]; s != nil {
		r.subject = s
		sf := d.mapping(s, path+".subject", "from", "header")
		r.subjectFrom = d.str(sf["from"], path+".subject.from")
		r.subjectHeader = d.str(sf["header"], path+".subject.header")
	}
	return r
}

// mapping returns the fields of the mapping n by name, recording an error for a node that is not
// a mapping, a field not in known, and a field set twice.
func (d *decoder) mapping(n *yaml.Node, path string, known ...string) map[string]*yaml.Node {
	fields := make(map[string]*yaml.Node, len(known))
	where := path
	if where == "" {
		where = "the file"
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, "%s: want a mapping of the fields %s", where, strings.Join(known, ", "))
		return fields
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := k.Value
		at := join(path, name)
		switch {
		case k.Kind != yaml.ScalarNode:
			d.errorf(k, "%s: a field name must be a string", where)
		case !slices.Contains(known, name):
			if near := nearest(name, known); near != "" {
				d.errorf(k, "%s: unknown field; did you mean %s?", at, near)
			} else {
				d.errorf(k, "%s: unknown field (want one of %s)", at, strings.Join(known, ", "))
			}
		case fields[name] != nil:
			d.errorf(k, "%s: set twice", at)
		default:
			fields[name] = v
		}
	}
	return fields
}

// sequence returns the items of the sequence n, recording an error for a node that is not one.
func (d *decoder) sequence(n *yaml.Node, path string) []*yaml.Node {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, "%s: want a list", path)
		return nil
	}
	return n.Content
}

// scalar returns the scalar n's value, recording an error for a node that is not a plain scalar
// of the tag want ("!!str", "!!int", "!!bool") — so "10" in quotes is not an integer, and 10 is
// not a string.
func (d *decoder) scalar(n *yaml.Node, path, want, what string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != want {
		d.errorf(n, "%s: want %s, found %s", path, what, describe(n))
		return "", false
	}
	return n.Value, true
}

func (d *decoder) str(n *yaml.Node, path string) field[string] {
	if n == nil {
		return field[string]{}
	}
	v, ok := d.scalar(n, path, "!!str", "a string")
	if !ok {
		return refused[string](n)
	}
	return field[string]{v: v, node: n}
}

func (d *decoder) strings(n *yaml.Node, path string) field[[]field[string]] {
	if n == nil {
		return field[[]field[string]]{}
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, "%s: want a list", path)
		return refused[[]field[string]](n)
	}
	var vs []field[string]
	for i, item := range n.Content {
		vs = append(vs, d.str(item, fmt.Sprintf("%s[%d]", path, i)))
	}
	return field[[]field[string]]{v: vs, node: n}
}

// integer reads a decimal integer. YAML's other spellings (0x10, 1_000, 1e3) are refused, so that
// what a reader sees is the number.
func (d *decoder) integer(n *yaml.Node, path string) field[int64] {
	if n == nil {
		return field[int64]{}
	}
	v, ok := d.scalar(n, path, "!!int", "a whole number")
	if !ok {
		return refused[int64](n)
	}
	i, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		d.errorf(n, "%s: %s: want a decimal whole number below 2^63", path, v)
		return refused[int64](n)
	}
	return field[int64]{v: i, node: n}
}

func (d *decoder) boolean(n *yaml.Node, path string) field[bool] {
	if n == nil {
		return field[bool]{}
	}
	v, ok := d.scalar(n, path, "!!bool", "true or false")
	if !ok {
		return refused[bool](n)
	}
	if v != "true" && v != "false" {
		d.errorf(n, "%s: %s: want true or false", path, v)
		return refused[bool](n)
	}
	return field[bool]{v: v == "true", node: n}
}

// duration reads a Go duration, such as 1s, 250ms or 24h, between 0 and durationLimit.
func (d *decoder) duration(n *yaml.Node, path string) field[time.Duration] {
	if n == nil {
		return field[time.Duration]{}
	}
	v, ok := d.scalar(n, path, "!!str", "a duration such as 1s, 250ms or 24h")
	if !ok {
		return refused[time.Duration](n)
	}
	t, err := time.ParseDuration(v)
	if err != nil || t < 0 || t > durationLimit {
		d.errorf(n, "%s: %q: want a duration such as 1s, 250ms or 24h, at most %v", path, v, durationLimit)
		return refused[time.Duration](n)
	}
	return field[time.Duration]{v: t, node: n}
}

// describe says what n is, for an error: "a list", "a mapping", or a scalar's type and value.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	kind := map[string]string{"!!str": "the string", "!!int": "the number", "!!float": "the number", "!!bool": "the boolean", "!!null": "null"}[n.ShortTag()]
	if kind == "" {
		kind = "the value"
	}
	if n.ShortTag() == "!!null" {
		return kind
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "…"
	}
	return fmt.Sprintf("%s %q", kind, v)
}

// nearest returns the one name of known within two edits of name, or "".
func nearest(name string, known []string) string {
	found := ""
	for _, k := range known {
		if editDistance(name, k) <= 2 {
			if found != "" {
				return ""
			}
			found = k
		}
	}
	return found
}

// editDistance returns the Levenshtein distance between a and b, bytes, or 3 when it is larger
// than 2 (all nearest needs).
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 || len(a)-len(b) > 2 || len(b)-len(a) > 2 {
		return 3
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// join returns path.name, or name for the top level.
func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
