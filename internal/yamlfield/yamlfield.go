// Package yamlfield decodes configuration files strictly, from the nodes of go.yaml.in/yaml/v3:
// one document, every field known and set once, each value of its type, and every mistake at the
// line and column of the token that makes it, all of them collected for one report.
//
// A [Decoder] reads a file with [Decoder.Document], walks its mappings and lists with
// [Decoder.Mapping] and [Decoder.Sequence], and reads scalars with [Decoder.String],
// [Decoder.Bool], [Decoder.Int] and [Decoder.Duration]. Each records what is wrong and reports
// false, so that the caller goes on to the next field; [Decoder.Errors] returns every error. A
// misspelt field name gets a suggestion, and a YAML syntax error is placed at its offending
// token, which yaml.v3's own message does not give.
package yamlfield

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// An Error is one mistake in a file, at its place.
type Error struct {
	// Line and Column are the place of the offending token, counted from 1; both are 0 for an
	// error of the whole file.
	Line, Column int
	// Msg says what is wrong, starting with the path of the field when there is one, such as
	// "policies[0].windw: unknown field; did you mean window?".
	Msg string
}

// Error returns "line:column: msg", or msg alone for an error of the whole file.
func (e Error) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Msg)
}

// A Decoder reads the fields of one file and collects the errors it finds. A path names a field
// in errors: "" is the top of the file, "a.b" the field b of the mapping a, "a[0]" the first item
// of the list a. Every reader takes a nil node, a field the file leaves out, for nothing: it
// reports false and records no error.
//
// The zero Decoder is strict and ready to use. A Decoder is not safe for concurrent use.
type Decoder struct {
	// Loose makes String and Duration take any scalar but null, and Bool every boolean of
	// yaml.v3 (True, TRUE), as yaml.v3 decodes them into Go values: so envoyproxy/ratelimit's
	// files are read, where "value: 10" is the string "10". Strict, only a string (plain or
	// quoted) is a string, and true and false are the only booleans.
	Loose bool

	errs []Error
}

// Errorf records an error at n's place, or of the whole file when n is nil.
func (d *Decoder) Errorf(n *yaml.Node, format string, args ...any) {
	e := Error{Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	d.errs = append(d.errs, e)
}

// Errors returns the errors recorded, in the order of their places in the file (those of the
// whole file first), and in the order recorded at one place.
func (d *Decoder) Errors() []Error {
	errs := slices.Clone(d.errs)
	slices.SortStableFunc(errs, func(a, b Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	return errs
}

// Len returns the number of errors recorded.
func (d *Decoder) Len() int { return len(d.errs) }

// Document decodes data, which must hold one YAML document, and returns the document's top node.
// It records an error and reports false for data that holds no document (with the message
// empty), a syntax error (at its offending token), and a second document (at its start).
func (d *Decoder) Document(data []byte, empty string) (*yaml.Node, bool) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.Errorf(nil, "%s", empty)
			return nil, false
		}
		e, _ := locate(data, err) // one locate cannot place has no place: the whole file's
		e.Msg = "YAML: " + e.Msg
		d.errs = append(d.errs, e)
		return nil, false
	}
	const second = "a second YAML document: want one"
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		d.Errorf(&extra, second)
		return nil, false
	} else if !errors.Is(err, io.EOF) { // a second document, and not even YAML
		e := Error{Line: documentStart(data, doc.Line), Column: 1, Msg: second}
		if e.Line == 0 {
			e.Column = 0
		}
		d.errs = append(d.errs, e)
		return nil, false
	}
	return doc.Content[0], true
}

// NoAliases reports whether n and the nodes below it hold no anchor and no alias, recording an
// error at the first one otherwise.
func (d *Decoder) NoAliases(n *yaml.Node) bool {
	if bad := findAlias(n); bad != nil {
		d.Errorf(bad, "anchors and aliases are not supported")
		return false
	}
	return true
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

// Mapping returns the fields of the mapping n at path by name, and reports whether n is a
// mapping. It records an error for n not a mapping (then returning nil), for a field name that is
// not a string, for a field not in known (suggesting the one known name within two edits of it,
// or else listing them all), and for a field set twice (keeping the first).
func (d *Decoder) Mapping(n *yaml.Node, path string, known ...string) (map[string]*yaml.Node, bool) {
	where := path
	if where == "" {
		where = "the file"
	}
	if n == nil {
		return nil, false
	}
	if n.Kind != yaml.MappingNode {
		d.Errorf(n, "%s: want a mapping of the fields %s", where, strings.Join(known, ", "))
		return nil, false
	}
	fields := make(map[string]*yaml.Node, len(known))
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := k.Value
		at := name
		if path != "" {
			at = path + "." + name
		}
		switch {
		case k.Kind != yaml.ScalarNode:
			d.Errorf(k, "%s: a field name must be a string", where)
		case !slices.Contains(known, name):
			if near := nearest(name, known); near != "" {
				d.Errorf(k, "%s: unknown field; did you mean %s?", at, near)
			} else {
				d.Errorf(k, "%s: unknown field (want one of %s)", at, strings.Join(known, ", "))
			}
		case fields[name] != nil:
			d.Errorf(k, "%s: set twice", at)
		default:
			fields[name] = v
		}
	}
	return fields, true
}

// An Entry is one field of a mapping whose names are the file's own, such as a policy's tiers.
type Entry struct {
	// Name is the field's name; Key is its node, Value the node of its value.
	Name       string
	Key, Value *yaml.Node
}

// Entries returns the fields of the mapping n at path, in the file's order, whatever their names:
// what names a mapping of what (such as "tier names to their numbers") in errors. It reports
// whether n is a mapping, recording an error otherwise (then returning nil), for a name that is
// not a string, and for a name set twice (keeping the first), as Mapping says it.
func (d *Decoder) Entries(n *yaml.Node, path, what string) ([]Entry, bool) {
	if n == nil {
		return nil, false
	}
	if n.Kind != yaml.MappingNode {
		d.Errorf(n, "%s: want a mapping of %s, found %s", path, what, describe(n))
		return nil, false
	}
	var entries []Entry
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		name, ok := d.Scalar(k, path, "!!str", "a name (a string)")
		switch {
		case !ok:
		case seen[name]:
			d.Errorf(k, "%s.%s: set twice", path, name)
		default:
			seen[name] = true
			entries = append(entries, Entry{Name: name, Key: k, Value: n.Content[i+1]})
		}
	}
	return entries, true
}

// Sequence returns the items of the list n at path, and reports whether n is a list, recording
// an error otherwise.
func (d *Decoder) Sequence(n *yaml.Node, path string) ([]*yaml.Node, bool) {
	if n == nil {
		return nil, false
	}
	if n.Kind != yaml.SequenceNode {
		d.Errorf(n, "%s: want a list", path)
		return nil, false
	}
	return n.Content, true
}

// Scalar returns the value of n at path, and reports whether n is a scalar of the tag tag
// ("!!str", "!!int", "!!bool"), recording "path: want <want>, found <what n is>" otherwise: so 10
// is not a string, nor "10" in quotes an integer. The typed readers start with it; a caller
// starts a reader of its own type with it.
func (d *Decoder) Scalar(n *yaml.Node, path, tag, want string) (string, bool) {
	if n == nil {
		return "", false
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != tag {
		d.Errorf(n, "%s: want %s, found %s", path, want, describe(n))
		return "", false
	}
	return n.Value, true
}

// text returns the text of n at path: a string's, or, when d is Loose, any scalar's but null's.
func (d *Decoder) text(n *yaml.Node, path, want string) (string, bool) {
	if !d.Loose || n == nil {
		return d.Scalar(n, path, "!!str", want)
	}
	switch n.ShortTag() {
	case "!!null", "!!map", "!!seq":
	default:
		if n.Kind == yaml.ScalarNode {
			return n.Value, true
		}
	}
	d.Errorf(n, "%s: want %s, found %s", path, want, describe(n))
	return "", false
}

// String returns the string n at path, and reports whether it is one, recording an error
// otherwise. When d is Loose, any scalar but null is a string.
func (d *Decoder) String(n *yaml.Node, path string) (string, bool) {
	return d.text(n, path, "a string")
}

// Bool returns the boolean n at path, and reports whether it is one, recording an error
// otherwise: true or false, or, when d is Loose, any spelling yaml.v3 decodes as a bool.
func (d *Decoder) Bool(n *yaml.Node, path string) (bool, bool) {
	v, ok := d.Scalar(n, path, "!!bool", "true or false")
	if !ok {
		return false, false
	}
	var b bool
	switch {
	case d.Loose && n.Decode(&b) == nil:
		return b, true
	case !d.Loose && (v == "true" || v == "false"):
		return v == "true", true
	}
	d.Errorf(n, "%s: %s: want true or false", path, v)
	return false, false
}

// Int returns the whole number n at path, from lo to hi, and reports whether it is one, recording
// an error otherwise. Only decimal is read: YAML's other spellings (0x10, 0o17) are refused, so
// that what a reader sees is the number.
func (d *Decoder) Int(n *yaml.Node, path string, lo, hi int64) (int64, bool) {
	v, ok := d.Scalar(n, path, "!!int", "a whole number")
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		d.Errorf(n, "%s: %s: want a decimal whole number below 2^63", path, v)
		return 0, false
	}
	if i < lo || i > hi {
		d.Errorf(n, "%s: %d is outside %s", path, i, span(lo, hi))
		return 0, false
	}
	return i, true
}

// span returns the whole numbers from lo to hi as an error gives them, in ASCII, as the root
// package gives its bounds: "1-128", or "-5 to 100" when lo is negative, where a '-' would misread.
func span(lo, hi int64) string {
	if lo < 0 {
		return fmt.Sprintf("%d to %d", lo, hi)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}

// Duration returns the Go duration n at path, such as 1s, 250ms or 24h, from lo to hi, and
// reports whether it is one, recording an error otherwise. With lo math.MinInt64 and hi
// math.MaxInt64, any duration is taken. When d is Loose, the duration may be any scalar's text.
func (d *Decoder) Duration(n *yaml.Node, path string, lo, hi time.Duration) (time.Duration, bool) {
	const want = "a duration such as 1s, 250ms or 24h"
	v, ok := d.text(n, path, want)
	if !ok {
		return 0, false
	}
	t, err := time.ParseDuration(v)
	if err != nil || t < lo || t > hi {
		d.Errorf(n, "%s: %q: want %s%s", path, v, want, within(lo, hi))
		return 0, false
	}
	return t, true
}

// within says which durations from lo to hi are wanted, for an error: "" for any.
func within(lo, hi time.Duration) string {
	switch {
	case lo == math.MinInt64 && hi == math.MaxInt64:
		return ""
	case lo == math.MinInt64 || lo == 0:
		return fmt.Sprintf(", at most %v", hi)
	case hi == math.MaxInt64:
		return fmt.Sprintf(", at least %v", lo)
	}
	return fmt.Sprintf(", from %v to %v", lo, hi)
}

// describe says what n is, for an error: "a list", "a mapping", "an alias", or a scalar's type
// and value.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
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
		v = v[:40] + "..."
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
