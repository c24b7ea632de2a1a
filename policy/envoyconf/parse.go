package envoyconf

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/yamlfield"
	"github.com/admit-dev/admit/policy"
	"go.yaml.in/yaml/v3"
)

// A decoder turns one file into a domain's tree, collecting errors as it goes.
type decoder struct {
	file string
	errs policy.ErrorList // every error of the file, once parse returns
	yf   yamlfield.Decoder
}

// errorf records an error at n's place (the whole file's for nil n).
func (d *decoder) errorf(n *yaml.Node, format string, args ...any) {
	d.yf.Errorf(n, format, args...)
}

// parse parses a file: its domain, its tree, and the line of its domain; its errors are in d.errs.
func (d *decoder) parse(data []byte) (domain string, root *node, line int, atomic bool) {
	d.yf.Loose = true // envoyproxy/ratelimit's files are read as yaml.v3 decodes them into Go values
	domain, root, line, atomic = d.parseFile(data)
	for _, e := range d.yf.Errors() {
		d.errs = append(d.errs, &policy.Error{File: d.file, Line: e.Line, Column: e.Column, Msg: e.Msg})
	}
	return domain, root, line, atomic
}

// parseFile is parse, recording its errors in d.yf.
func (d *decoder) parseFile(data []byte) (domain string, root *node, line int, atomic bool) {
	doc, ok := d.yf.Document(data, "empty file: want a domain")
	if !ok {
		return "", nil, 0, false
	}
	f, ok := d.yf.Mapping(doc, "", "domain", "descriptors", "atomic", "metadata")
	if !ok {
		return "", nil, 0, false
	}
	switch n := f["domain"]; {
	case n == nil:
		d.errorf(doc, "domain: missing")
	default:
		domain, _ = d.yf.String(n, "domain")
		line = n.Line
		if domain == "" {
			d.errorf(n, "domain: empty")
		}
	}
	atomic, _ = d.yf.Bool(f["atomic"], "atomic")
	root = &node{}
	d.descriptors(root, f["descriptors"], "descriptors", 1)
	setDomain(root, domain)
	setLevels(root, nil, false)
	return domain, root, line, atomic
}

// setDomain sets the Domain of every rule below n.
func setDomain(n *node, domain string) {
	for _, c := range n.children {
		if c.rule != nil {
			c.rule.Domain = domain
		}
		setDomain(c, domain)
	}
}

// setLevels gives every rule below n whose path (above, the levels down to n, any of them with
// value_to_metric when valueMetric) has value_to_metric its levels, for Rule.MetricKey.
func setLevels(n *node, above []level, valueMetric bool) {
	for _, c := range n.children {
		path := append(slices.Clip(above), level{key: c.key, value: c.value, share: c.share, valueMetric: c.valueMetric})
		vm := valueMetric || c.valueMetric
		if c.rule != nil && vm {
			c.rule.ValueToMetric, c.rule.levels = true, path
		}
		setLevels(c, path, vm)
	}
}

// descriptors parses the list n of descriptors, at path, into parent's children.
func (d *decoder) descriptors(parent *node, n *yaml.Node, path string, depth int) {
	if n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null") {
		return // descriptors: with nothing, as envoyproxy/ratelimit reads it: none
	}
	if depth > MaxDepth {
		d.errorf(n, "%s: descriptors nested more than %d deep", path, MaxDepth)
		return
	}
	items, _ := d.yf.Sequence(n, path)
	for i, item := range items {
		p := fmt.Sprintf("%s[%d]", path, i)
		f, ok := d.yf.Mapping(item, p, "key", "value", "rate_limit", "descriptors", "shadow_mode", "detailed_metric",
			"quota_mode", "share_threshold", "value_to_metric", "metadata")
		if !ok {
			continue
		}
		key, ok := d.yf.String(f["key"], p+".key")
		if f["key"] == nil {
			d.errorf(item, "%s.key: missing", p)
			continue
		}
		if !ok {
			continue
		}
		if key == "" {
			d.errorf(f["key"], "%s.key: empty", p)
			continue
		}
		value, _ := d.yf.String(f["value"], p+".value")
		name := key
		if value != "" {
			name = key + "_" + value
		}
		if parent.children == nil {
			parent.children = make(map[string]*node)
		}
		if parent.children[name] != nil {
			d.errorf(item, "%s: duplicate descriptor %q", p, name)
			continue
		}
		child := &node{key: key, value: value, line: item.Line, col: item.Column}
		parent.children[name] = child
		if strings.Contains(value, "*") {
			parent.wildcards = append(parent.wildcards, name)
		}
		shadow, _ := d.yf.Bool(f["shadow_mode"], p+".shadow_mode")
		quota, _ := d.yf.Bool(f["quota_mode"], p+".quota_mode")
		detailed, _ := d.yf.Bool(f["detailed_metric"], p+".detailed_metric")
		child.valueMetric, _ = d.yf.Bool(f["value_to_metric"], p+".value_to_metric")
		child.share, _ = d.yf.Bool(f["share_threshold"], p+".share_threshold")
		if child.share && !strings.Contains(value, "*") {
			d.errorf(f["share_threshold"], "%s.share_threshold: only a value with '*' shares its counter, and %q has none", p, value)
		}
		if rl := f["rate_limit"]; rl != nil {
			child.rule = d.rateLimit(rl, p+".rate_limit", shadow || quota)
			if child.rule != nil {
				child.rule.Path = name
				child.rule.DetailedMetric = detailed
				child.rule.QuotaMode = quota
				child.rule.ShareThreshold = child.share
			}
		}
		d.descriptors(child, f["descriptors"], p+".descriptors", depth+1)
		prefixRules(child, name)
	}
}

// prefixRules prefixes the paths of the rules below n (not n's own) with n's name.
func prefixRules(n *node, name string) {
	for _, c := range n.children {
		if c.rule != nil {
			c.rule.Path = name + "." + c.rule.Path
		}
		prefixRules(c, name)
	}
}

// rateLimit parses the rate_limit n at path into a Rule.
func (d *decoder) rateLimit(n *yaml.Node, path string, shadow bool) *Rule {
	f, ok := d.yf.Mapping(n, path, "unit", "requests_per_unit", "unlimited", "name", "replaces", "algorithm", "window", "burst", "durability", "durability_replicas", "durability_timeout")
	if !ok {
		return nil
	}
	errs := d.yf.Len()
	r := &Rule{}
	r.Name, _ = d.yf.String(f["name"], path+".name")
	r.Unlimited, _ = d.yf.Bool(f["unlimited"], path+".unlimited")
	items, _ := d.yf.Sequence(f["replaces"], path+".replaces")
	for i, item := range items {
		p := fmt.Sprintf("%s.replaces[%d]", path, i)
		rf, ok := d.yf.Mapping(item, p, "name")
		if !ok {
			continue
		}
		name, ok := d.yf.String(rf["name"], p+".name")
		switch {
		case rf["name"] == nil:
			d.errorf(item, "%s.name: missing", p)
		case ok && name == "":
			d.errorf(rf["name"], "%s.name: empty", p)
		case ok && name == r.Name:
			d.errorf(rf["name"], "%s.name: %q is the rule's own name: a rule cannot replace itself", p, name)
		case ok:
			r.Replaces = append(r.Replaces, name)
		}
	}
	unitName, _ := d.yf.String(f["unit"], path+".unit")
	if un := f["unit"]; un != nil {
		for u := UnitSecond; int(u) < len(units); u++ {
			if strings.EqualFold(unitName, units[u].name) {
				r.Unit = u
			}
		}
		if r.Unit == UnitNone && d.yf.Len() == errs {
			d.errorf(un, "%s.unit: %q: want second, minute, hour, day, week, month or year", path, unitName)
		}
	}
	rate, _ := d.yf.Int(f["requests_per_unit"], path+".requests_per_unit", 0, math.MaxUint32)
	if r.Unlimited {
		for _, k := range []string{"unit", "requests_per_unit", "algorithm", "window", "burst", "durability", "durability_replicas", "durability_timeout"} {
			if f[k] != nil {
				d.errorf(f[k], "%s.%s: an unlimited rate_limit has no %s", path, k, k)
			}
		}
		if d.yf.Len() > errs {
			return nil
		}
		return r
	}
	lim := admit.Limit{Name: DefaultName, Algorithm: admit.FixedWindow, Rate: rate, Period: r.Unit.Duration(), Shadow: shadow}
	if validName(r.Name) {
		lim.Name = r.Name
	}
	if an := f["algorithm"]; an != nil {
		if s, ok := d.yf.String(an, path+".algorithm"); ok {
			a, err := admit.ParseAlgorithm(s)
			if err != nil {
				d.errorf(an, "%s.algorithm: %q: want fixed_window, sliding_window, sliding_log or gcra", path, s)
			} else if a == admit.Concurrency {
				d.errorf(an, "%s.algorithm: concurrency needs a release, which Envoy's rate limit service has not", path)
			} else {
				lim.Algorithm = a
			}
		}
	}
	if wn := f["window"]; wn != nil {
		lim.Period, _ = d.yf.Duration(wn, path+".window", math.MinInt64, math.MaxInt64)
		if f["unit"] != nil {
			d.errorf(wn, "%s.window: give a unit or a window, not both", path)
		}
	} else if f["unit"] == nil {
		d.errorf(n, "%s.unit: missing", path)
	}
	if f["requests_per_unit"] == nil {
		d.errorf(n, "%s.requests_per_unit: missing", path)
	}
	if bn := f["burst"]; bn != nil {
		lim.Burst, _ = d.yf.Int(bn, path+".burst", 1, bound.MaxRate)
	}
	lim.Aligned = lim.Algorithm == admit.FixedWindow
	d.durability(f, path, &lim)
	if d.yf.Len() > errs {
		return nil
	}
	if lim.Rate > 0 {
		if err := lim.Validate(); err != nil {
			d.errorf(n, "%s: %s", path, strings.TrimPrefix(err.Error(), admit.ErrInvalidLimit.Error()+": "))
			return nil
		}
	}
	r.Limit = lim
	return r
}

// durability reads a rate_limit's durability extension into lim (as admit's own policies have it):
// async (the default) or replicated, with durability_replicas (1 … 16, default 1) and
// durability_timeout (1ms … 1m, default the Redis command timeout).
func (d *decoder) durability(f map[string]*yaml.Node, path string, lim *admit.Limit) {
	dn, rn, tn := f["durability"], f["durability_replicas"], f["durability_timeout"]
	mode := "async"
	if dn != nil {
		mode, _ = d.yf.String(dn, path+".durability")
	}
	switch mode {
	case "async":
		for i, n := range []*yaml.Node{rn, tn} {
			if n != nil {
				d.errorf(n, "%s.%s: only a rate_limit with durability: replicated waits for replicas", path, [2]string{"durability_replicas", "durability_timeout"}[i])
			}
		}
		return
	case "replicated":
	default:
		d.errorf(dn, "%s.durability: %q: want async or replicated", path, mode)
		return
	}
	lim.Replicas = 1
	if rn != nil {
		n, _ := d.yf.Int(rn, path+".durability_replicas", 1, bound.MaxReplicas)
		lim.Replicas = int(n)
	}
	if tn != nil {
		lim.ReplicaTimeout, _ = d.yf.Duration(tn, path+".durability_timeout", time.Millisecond, bound.MaxReplicaTimeout)
	}
}

// validName reports whether s is a valid admit policy name.
func validName(s string) bool {
	return s != "" && (admit.Limit{Name: s, Algorithm: admit.FixedWindow, Rate: 1, Period: time.Second}).Validate() == nil
}
