package envoyconf

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/yamlerr"
	"github.com/admit-dev/admit/policy"
	"go.yaml.in/yaml/v3"
)

// A decoder turns one file into a domain's tree, collecting errors as it goes.
type decoder struct {
	file string
	errs policy.ErrorList
}

// errorf records an error at n's place (the whole file's for nil n).
func (d *decoder) errorf(n *yaml.Node, format string, args ...any) {
	e := &policy.Error{File: d.file, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	d.errs = append(d.errs, e)
}

// parse parses a file: its domain, its tree, and the line of its domain.
func (d *decoder) parse(data []byte) (domain string, root *node, line int, atomic bool) {
	var doc yaml.Node
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.errorf(nil, "empty file: want a domain")
		} else if e, ok := yamlerr.Locate(data, err); ok {
			d.errs = append(d.errs, &policy.Error{File: d.file, Line: e.Line, Column: e.Column, Msg: "YAML: " + e.Msg})
		} else {
			d.errorf(nil, "YAML: %s", e.Msg)
		}
		return "", nil, 0, false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		d.errorf(&extra, "a second YAML document: want one")
		return "", nil, 0, false
	} else if !errors.Is(err, io.EOF) { // a second document, and not even YAML
		e := &policy.Error{File: d.file, Line: yamlerr.DocumentStart(data, doc.Line), Column: 1, Msg: "a second YAML document: want one"}
		if e.Line == 0 {
			e.Column = 0
		}
		d.errs = append(d.errs, e)
		return "", nil, 0, false
	}
	top := d.mapping(doc.Content[0], "", "domain", "descriptors", "atomic")
	if top == nil {
		return "", nil, 0, false
	}
	switch n := top["domain"]; {
	case n == nil:
		d.errorf(doc.Content[0], "domain: missing")
	default:
		domain, _ = d.str(n, "domain")
		line = n.Line
		if domain == "" {
			d.errorf(n, "domain: empty")
		}
	}
	if n := top["atomic"]; n != nil {
		atomic, _ = d.boolean(n, "atomic")
	}
	root = &node{}
	d.descriptors(root, top["descriptors"], "descriptors", 1)
	setDomain(root, domain)
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

// descriptors parses the list n of descriptors, at path, into parent's children.
func (d *decoder) descriptors(parent *node, n *yaml.Node, path string, depth int) {
	if n == nil {
		return
	}
	if depth > MaxDepth {
		d.errorf(n, "%s: descriptors nested more than %d deep", path, MaxDepth)
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, "%s: want a list", path)
		return
	}
	for i, item := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		f := d.mapping(item, p, "key", "value", "rate_limit", "descriptors", "shadow_mode", "detailed_metric")
		if f == nil {
			continue
		}
		key, ok := d.str(f["key"], p+".key")
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
		value, _ := d.str(f["value"], p+".value")
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
		child := &node{}
		parent.children[name] = child
		if strings.HasSuffix(value, "*") {
			parent.wildcards = append(parent.wildcards, name)
		}
		shadow, _ := d.boolean(f["shadow_mode"], p+".shadow_mode")
		detailed, _ := d.boolean(f["detailed_metric"], p+".detailed_metric")
		if rl := f["rate_limit"]; rl != nil {
			child.rule = d.rateLimit(rl, p+".rate_limit", shadow)
			if child.rule != nil {
				child.rule.Path = name
				child.rule.DetailedMetric = detailed
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
	f := d.mapping(n, path, "unit", "requests_per_unit", "unlimited", "name", "replaces", "algorithm", "window", "burst")
	if f == nil {
		return nil
	}
	errs := len(d.errs)
	r := &Rule{}
	r.Name, _ = d.str(f["name"], path+".name")
	r.Unlimited, _ = d.boolean(f["unlimited"], path+".unlimited")
	if rn := f["replaces"]; rn != nil {
		if rn.Kind != yaml.SequenceNode {
			d.errorf(rn, "%s.replaces: want a list", path)
		} else {
			for i, item := range rn.Content {
				p := fmt.Sprintf("%s.replaces[%d]", path, i)
				rf := d.mapping(item, p, "name")
				if rf == nil {
					continue
				}
				name, ok := d.str(rf["name"], p+".name")
				switch {
				case rf["name"] == nil:
					d.errorf(item, "%s.name: missing", p)
				case ok && name == "":
					d.errorf(rf["name"], "%s.name: empty", p)
				case ok:
					r.Replaces = append(r.Replaces, name)
				}
			}
		}
	}
	unitName, _ := d.str(f["unit"], path+".unit")
	if un := f["unit"]; un != nil {
		for u := UnitSecond; int(u) < len(units); u++ {
			if strings.EqualFold(unitName, units[u].name) {
				r.Unit = u
			}
		}
		if r.Unit == UnitNone && len(d.errs) == errs {
			d.errorf(un, "%s.unit: %q: want second, minute, hour, day, week, month or year", path, unitName)
		}
	}
	rate, _ := d.integer(f["requests_per_unit"], path+".requests_per_unit", 0, math.MaxUint32)
	if r.Unlimited {
		for _, k := range []string{"unit", "requests_per_unit", "algorithm", "window", "burst"} {
			if f[k] != nil {
				d.errorf(f[k], "%s.%s: an unlimited rate_limit has no %s", path, k, k)
			}
		}
		if len(d.errs) > errs {
			return nil
		}
		return r
	}
	lim := admit.Limit{Name: DefaultName, Algorithm: admit.FixedWindow, Rate: rate, Period: r.Unit.Duration(), Shadow: shadow}
	if validName(r.Name) {
		lim.Name = r.Name
	}
	if an := f["algorithm"]; an != nil {
		if s, ok := d.str(an, path+".algorithm"); ok {
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
		if s, ok := d.str(wn, path+".window"); ok {
			w, err := time.ParseDuration(s)
			if err != nil {
				d.errorf(wn, "%s.window: %q: want a duration such as 10s or 1m30s", path, s)
			}
			lim.Period = w
		}
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
		lim.Burst, _ = d.integer(bn, path+".burst", 1, admit.MaxRate)
	}
	lim.Aligned = lim.Algorithm == admit.FixedWindow
	if len(d.errs) > errs {
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

// validName reports whether s is a valid admit policy name.
func validName(s string) bool {
	return s != "" && (admit.Limit{Name: s, Algorithm: admit.FixedWindow, Rate: 1, Period: time.Second}).Validate() == nil
}

// mapping returns the fields of the mapping n at path by name, recording an error for a field not
// among names, for a repeated one, and for n not a mapping (then returning nil).
func (d *decoder) mapping(n *yaml.Node, path string, names ...string) map[string]*yaml.Node {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, "%s: want a mapping", orTop(path))
		return nil
	}
	f := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := k.Value
		p := name
		if path != "" {
			p = path + "." + name
		}
		switch {
		case !contains(names, name):
			d.errorf(k, "%s: unknown field; want one of %s", p, strings.Join(names, ", "))
		case f[name] != nil:
			d.errorf(k, "%s: repeated", p)
		default:
			f[name] = v
		}
	}
	return f
}

// orTop returns path, or "the file" for the top level.
func orTop(path string) string {
	if path == "" {
		return "the file"
	}
	return path
}

func contains(names []string, s string) bool {
	for _, n := range names {
		if n == s {
			return true
		}
	}
	return false
}

// str returns the string n at path, and whether it is one; nil n is "", false, with no error.
func (d *decoder) str(n *yaml.Node, path string) (string, bool) {
	if n == nil {
		return "", false
	}
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" || n.Tag == "!!map" || n.Tag == "!!seq" {
		d.errorf(n, "%s: want a string", path)
		return "", false
	}
	return n.Value, true
}

// boolean returns the boolean n at path, and whether it is one.
func (d *decoder) boolean(n *yaml.Node, path string) (bool, bool) {
	if n == nil {
		return false, false
	}
	var b bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
		d.errorf(n, "%s: want true or false", path)
		return false, false
	}
	return b, true
}

// integer returns the integer n at path, in lo…hi, and whether it is one.
func (d *decoder) integer(n *yaml.Node, path string, lo, hi int64) (int64, bool) {
	if n == nil {
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || err != nil {
		d.errorf(n, "%s: want an integer", path)
		return 0, false
	}
	if v < lo || v > hi {
		d.errorf(n, "%s: %d is outside %d…%d", path, v, lo, hi)
		return 0, false
	}
	return v, true
}
