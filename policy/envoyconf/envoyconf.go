// Package envoyconf loads envoyproxy/ratelimit's YAML configuration files, unchanged, into rules
// that admit decides: the configuration of admit's Envoy rate limit service (package transport/rls).
//
// A file names a domain and a tree of descriptors:
//
//	domain: mongo_cps
//	descriptors:
//	  - key: database
//	    value: users
//	    rate_limit:
//	      unit: second
//	      requests_per_unit: 500
//
// admit adds algorithm, window and burst to rate_limit, and atomic to a file ([Config.Atomic]).
// Parsing is strict; each error has its file:line:column ([policy.Error]). The fields are in
// docs/envoy.md#the-configuration. [Load] walks a directory and its subdirectories as
// envoyproxy/ratelimit's runtime loader does; [Options] merges the files of one domain.
// [Config.Lookup] finds the rule of a request's descriptor as envoyproxy/ratelimit does, '*' of
// a value standing for any run of bytes (docs/envoy.md#how-a-request-is-decided).
package envoyconf

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/policy"
)

// Bounds on a configuration.
const (
	// MaxFileSize is the largest file Load and Parse read, in bytes.
	MaxFileSize = 4 << 20
	// MaxDepth is the deepest nesting of descriptors.
	MaxDepth = 16
)

// DefaultName is the Limit.Name of a rule whose rate_limit has no name that is a valid admit
// policy name (1…64 characters of a-z, 0-9, '_' and '-'): the name its keys and
// metrics carry.
const DefaultName = "envoy"

// A Unit is the unit of a rate_limit, as envoyproxy/ratelimit names them. The zero value,
// UnitNone, is a rate_limit given by admit's window instead of a unit.
type Unit uint8

// The units of a rate_limit, with envoyproxy/ratelimit's durations: a month is 30 days and a year
// 365 days.
const (
	UnitNone Unit = iota
	UnitSecond
	UnitMinute
	UnitHour
	UnitDay
	UnitWeek
	UnitMonth
	UnitYear
)

// units are the Units by name, lower case, with their durations.
var units = []struct {
	name string
	d    time.Duration
}{
	UnitSecond: {"second", time.Second},
	UnitMinute: {"minute", time.Minute},
	UnitHour:   {"hour", time.Hour},
	UnitDay:    {"day", 24 * time.Hour},
	UnitWeek:   {"week", 7 * 24 * time.Hour},
	UnitMonth:  {"month", 30 * 24 * time.Hour},
	UnitYear:   {"year", 365 * 24 * time.Hour},
}

// String returns the unit's name, such as "second", or "" for UnitNone.
func (u Unit) String() string {
	if int(u) < len(units) {
		return units[u].name
	}
	return fmt.Sprintf("Unit(%d)", uint8(u))
}

// Duration returns the unit's length, or 0 for UnitNone.
func (u Unit) Duration() time.Duration {
	if int(u) < len(units) {
		return units[u].d
	}
	return 0
}

// A Rule is the rate_limit of a descriptor of the configuration. Rules are immutable.
type Rule struct {
	// Domain is the domain of the file the rule is in.
	Domain string
	// Path is the descriptor's path in the tree, such as "database_users" or "key.key2_value2":
	// each level's key, and "_value" when it names a value, joined by '.'.
	Path string
	// Limit is what admit decides under: by default a FixedWindow of RequestsPerUnit per Unit,
	// Aligned to Unix time, with Shadow set by shadow_mode or quota_mode. Its Rate is 0 for requests_per_unit 0,
	// which limits every request (and is no valid Limit: it is never passed to a Store). It is the
	// zero Limit for an unlimited rule.
	Limit admit.Limit
	// Unit is the rate_limit's unit; UnitNone when admit's window gives the window instead.
	Unit Unit
	// Unlimited reports whether the rule is unlimited: its descriptor is never limited.
	Unlimited bool
	// Name is the rate_limit's name, as written, or "".
	Name string
	// Replaces are the names of the rules this one replaces when both match one request.
	Replaces []string
	// DetailedMetric is detailed_metric as written. admit's own metrics never put descriptor
	// values into labels; envoyproxy/ratelimit's stats (transport/rls, Options.Stats) count the
	// rule's descriptors by their values with it, bounded (docs/envoy.md).
	DetailedMetric bool
	// ValueToMetric reports whether value_to_metric is set on the rule's descriptor or on one
	// above it. envoyproxy/ratelimit's stats (transport/rls, Options.Stats) then name the
	// descriptor by [Rule.MetricKey], bounded; admit's own metrics never carry values.
	ValueToMetric bool
	// QuotaMode is quota_mode: the descriptor is decided and counted as usual, but answered OK when
	// over its limit, the response reporting it in its dynamic metadata (package transport/rls).
	// Limit.Shadow is set with it.
	QuotaMode bool
	// ShareThreshold is share_threshold of the rule's own descriptor: when its value has a '*',
	// every value it matches shares one counter ([Config.Lookup]).
	ShareThreshold bool

	levels []level // the descriptors from the top down to the rule's, when ValueToMetric
}

// A level is one descriptor of a rule's path, as [Rule.MetricKey] names it.
type level struct {
	key, value  string // as written
	share       bool   // share_threshold
	valueMetric bool   // value_to_metric
}

// MetricKey returns envoyproxy/ratelimit's stats key of a descriptor of entries under r, a rule
// with ValueToMetric (entries as [Config.Lookup] returns them, r the rule it found): the domain,
// then each entry's key, with "_" and a value where envoyproxy/ratelimit puts one: the request's
// value for a descriptor with value_to_metric (but the wildcard's as written under
// share_threshold), the value as written for a descriptor that has one, none for a key alone;
// joined by '.', such as "d.route_draw.http_method_GET.subject_id". Without ValueToMetric, or for
// entries r does not match, it returns the rule's own key, the domain and r.Path.
func (r *Rule) MetricKey(entries []Entry) string {
	if !r.ValueToMetric || len(entries) != len(r.levels) {
		return r.Domain + "." + r.Path
	}
	var b strings.Builder
	b.WriteString(r.Domain)
	for i, l := range r.levels {
		b.WriteByte('.')
		b.WriteString(l.key)
		v := l.value
		switch {
		case l.share:
		case l.valueMetric:
			v = entries[i].Value
		}
		if v != "" {
			b.WriteByte('_')
			b.WriteString(v)
		}
	}
	return b.String()
}

// An Entry is one entry of a request's descriptor.
type Entry struct {
	Key, Value string
}

// A Config is the configuration of every domain: a directory of files. It is immutable and safe
// for concurrent use.
type Config struct {
	domains map[string]*node
	atomic  map[string]bool // the domains with atomic: true
	// Hash is a hex SHA-256 of the files' names and contents, in name order.
	Hash string
}

// A node is a level of a domain's descriptor tree.
type node struct {
	key, value  string           // the descriptor's, as written
	line, col   int              // the place of the descriptor in its file
	share       bool             // share_threshold: the values its wildcard matches share one counter
	valueMetric bool             // value_to_metric: its value in the stats key of the rules at and below it
	rule        *Rule            // nil for none
	children    map[string]*node // by "key_value", or "key" for a descriptor with no value
	wildcards   []string         // children's names whose values have a '*', in file order
}

// Domains returns the names of the configured domains, sorted.
func (c *Config) Domains() []string {
	ds := make([]string, 0, len(c.domains))
	for d := range c.domains {
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return ds
}

// HasDomain reports whether a file configures domain.
func (c *Config) HasDomain(domain string) bool { return c.domains[domain] != nil }

// Atomic reports whether domain's file sets admit's extension atomic: true. Then the keys of
// every descriptor of the domain whose first entries are equal share one Redis Cluster hash slot,
// so that a request's descriptors with one first entry are decided together, all-or-nothing
// (docs/envoy.md, "Atomicity").
func (c *Config) Atomic(domain string) bool { return c.atomic[domain] }

// Limits returns the Limits of the limited rules whose Limit.Name is name (a rate_limit's name, or
// DefaultName), each once, in domain order and then depth-first in key order: what an override of
// that name applies to.
func (c *Config) Limits(name string) []admit.Limit {
	var out []admit.Limit
	var walk func(n *node)
	walk = func(n *node) {
		if r := n.rule; r != nil && !r.Unlimited && r.Limit.Rate > 0 && r.Limit.Name == name && !slices.Contains(out, r.Limit) {
			out = append(out, r.Limit)
		}
		for _, k := range slices.Sorted(maps.Keys(n.children)) {
			walk(n.children[k])
		}
	}
	for _, d := range c.Domains() {
		walk(c.domains[d])
	}
	return out
}

// Replicas returns the most replicas a rule with durability: replicated waits for
// (admit.Limit.Replicas), and the domain and path of the first such rule, in domain order and then
// depth-first in key order; 0 when every rule is async.
func (c *Config) Replicas() (n int, where string) {
	var walk func(n *node)
	walk = func(nd *node) {
		if r := nd.rule; r != nil && r.Limit.Replicas > n {
			n, where = r.Limit.Replicas, r.Domain+" "+r.Path
		}
		for _, k := range slices.Sorted(maps.Keys(nd.children)) {
			walk(nd.children[k])
		}
	}
	for _, d := range c.Domains() {
		walk(c.domains[d])
	}
	return n, where
}

// Match returns the rule of a request's descriptor of entries in domain, or nil when no rule
// applies, as envoyproxy/ratelimit finds it: walking the tree level by level, each entry matches
// the child "key_value" exactly, else the first wildcard child (in file order) whose value
// matches the entry's, each '*' of it standing for any run of bytes, empty too ("/api/*",
// "bar*b", "foo*bar*baz"), else the child "key" with no value; the rule is that of the node the
// last entry matches. A descriptor deeper or shallower than the tree's rule has none.
func (c *Config) Match(domain string, entries []Entry) *Rule {
	rule, _ := c.Lookup(domain, entries)
	return rule
}

// Lookup is Match, and returns too the entries the descriptor is counted by: entries itself,
// except that an entry matched by a wildcard descriptor with share_threshold: true carries the
// wildcard's value as written (such as "/api/*") instead of its own, so that every value the
// wildcard matches shares one counter, as envoyproxy/ratelimit shares them. entries is never
// modified; a copy is returned when an entry changes.
func (c *Config) Lookup(domain string, entries []Entry) (*Rule, []Entry) {
	n := c.domains[domain]
	if n == nil {
		return nil, entries
	}
	keyed, copied := entries, false
	var rule *Rule
	for i, e := range entries {
		next := n.children[e.Key+"_"+e.Value]
		if next == nil {
			for _, w := range n.wildcards {
				if wc := n.children[w]; e.Key == wc.key && Wildcard(wc.value, e.Value) {
					next = wc
					break
				}
			}
			if next != nil && next.share {
				if !copied {
					keyed, copied = slices.Clone(entries), true
				}
				keyed[i].Value = next.value
			}
		}
		if next == nil {
			next = n.children[e.Key]
		}
		if next == nil {
			return nil, entries
		}
		if i == len(entries)-1 {
			rule = next.rule
		}
		if len(next.children) == 0 {
			break
		}
		n = next
	}
	return rule, keyed
}

// Wildcard reports whether value matches pattern, a descriptor's value in which each '*' stands
// for any run of bytes, empty too: "/api/*" matches "/api/" and "/api/x", "bar*b" matches "barb"
// and "bar-b", "foo*bar*baz" matches "foo-bar-baz". A pattern without '*' matches itself only.
func Wildcard(pattern, value string) bool {
	first, rest, found := strings.Cut(pattern, "*")
	if !found {
		return pattern == value
	}
	if !strings.HasPrefix(value, first) {
		return false
	}
	value = value[len(first):]
	parts := strings.Split(rest, "*")
	last := parts[len(parts)-1]
	for _, p := range parts[:len(parts)-1] {
		i := strings.Index(value, p)
		if i < 0 {
			return false
		}
		value = value[i+len(p):]
	}
	return strings.HasSuffix(value, last)
}

// Load reads dir as [Options.Load] does with no options: two files of one domain are an error.
func Load(dir string) (*Config, error) { return Options{}.Load(dir) }

// Options are how a configuration is loaded.
type Options struct {
	// MergeDomains merges the files of one domain into one tree, as envoyproxy/ratelimit's
	// MERGE_DOMAIN_CONFIG=true does: each file's descriptors are added to the domain's, in the
	// files' name order; a descriptor that two files give at one level is an error, and so are
	// files of one domain that disagree on atomic. Without it, two files of one domain are an
	// error.
	MergeDomains bool
}

// Load reads the files of the tree under dir, subdirectories included, as envoyproxy/ratelimit's
// runtime loader walks its directory (every file of RUNTIME_ROOT/RUNTIME_SUBDIRECTORY, at any
// depth), and parses them as [Options.Parse] does. admit reads only the files whose names end in
// ".yaml" or ".yml", and skips every file and directory whose name starts with '.' (as
// RUNTIME_IGNOREDOTFILES=true does; a Kubernetes ConfigMap's "..data" copy among them). A
// symbolic link to a file is read; one to a directory is not followed, as filepath.Walk does not
// follow it in envoyproxy/ratelimit. A tree with no such file is an error.
func (o Options) Load(dir string) (*Config, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, err
	}
	var files []File
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := e.Name()
		if path == dir {
			return nil
		}
		if strings.HasPrefix(name, ".") {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if e.IsDir() || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			return nil
		}
		if e.Type()&fs.ModeSymlink != 0 {
			if fi, err := os.Stat(path); err != nil || fi.IsDir() {
				return err // a dangling link is an error; one to a directory is skipped
			}
		} else if !e.Type().IsRegular() {
			return nil
		}
		data, err := readFile(path)
		if err != nil {
			return err
		}
		files = append(files, File{Name: path, Data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no .yaml or .yml file", dir)
	}
	return o.Parse(files...)
}

// readFile reads the file at path, refusing one larger than MaxFileSize.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, &policy.Error{File: path, Msg: fmt.Sprintf("file of more than %d bytes", MaxFileSize)}
	}
	return data, nil
}

// A File is one configuration file: its name, used in errors, and its contents.
type File struct {
	Name string
	Data []byte
}

// Parse parses files as [Options.Parse] does with no options.
func Parse(files ...File) (*Config, error) { return Options{}.Parse(files...) }

// Parse parses files, each one domain's configuration, into a Config. It reports every error found
// as a [policy.ErrorList], each at its file:line:column; two files of one domain are an error,
// unless o.MergeDomains.
func (o Options) Parse(files ...File) (*Config, error) {
	cfg := &Config{domains: make(map[string]*node), atomic: make(map[string]bool)}
	var errs policy.ErrorList
	where := make(map[string]string) // domain → the file that configured it first
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	h := sha256.New()
	for _, f := range files {
		var n [binary.MaxVarintLen64]byte
		for _, s := range []string{f.Name, string(f.Data)} {
			h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
			h.Write([]byte(s))
		}
		d := &decoder{file: f.Name}
		domain, root, line, atomic := d.parse(f.Data)
		errs = append(errs, d.errs...)
		if len(d.errs) > 0 {
			continue
		}
		prev, ok := where[domain]
		switch {
		case ok && !o.MergeDomains:
			errs = append(errs, &policy.Error{File: f.Name, Line: line, Column: 1,
				Msg: fmt.Sprintf("domain: %q is configured in %s too; admit serve --envoy-merge-domains merges them", domain, prev)})
			continue
		case ok && atomic != cfg.atomic[domain]:
			errs = append(errs, &policy.Error{File: f.Name, Line: line, Column: 1,
				Msg: fmt.Sprintf("atomic: %v here, %v in %s, another file of domain %q", atomic, cfg.atomic[domain], prev, domain)})
			continue
		case ok:
			errs = append(errs, merge(cfg.domains[domain], root, f.Name, prev)...)
			continue
		}
		where[domain] = f.Name
		cfg.domains[domain] = root
		if atomic {
			cfg.atomic[domain] = true
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	cfg.Hash = hex.EncodeToString(h.Sum(nil))
	return cfg, nil
}

// merge adds the top-level descriptors of src, a tree of file, to dst, the tree of the same
// domain from prev, as envoyproxy/ratelimit merges them: a descriptor dst has already is an error.
func merge(dst, src *node, file, prev string) policy.ErrorList {
	var errs policy.ErrorList
	for _, name := range slices.Sorted(maps.Keys(src.children)) {
		if dst.children[name] != nil {
			errs = append(errs, &policy.Error{File: file, Line: src.children[name].line, Column: src.children[name].col,
				Msg: fmt.Sprintf("duplicate descriptor %q: %s has it too", name, prev)})
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if dst.children == nil {
		dst.children = make(map[string]*node)
	}
	maps.Copy(dst.children, src.children)
	dst.wildcards = append(dst.wildcards, src.wildcards...)
	return nil
}
