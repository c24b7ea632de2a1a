package yamlfield_test

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/yamlfield"
	"go.yaml.in/yaml/v3"
)

// run decodes doc, a mapping of the fields v and a, hands its field v (nil if absent) to read, and returns what read
// returned and every error, one "line:column: message" per line.
func run(t *testing.T, loose bool, doc string, read func(d *yamlfield.Decoder, n *yaml.Node) any) (any, string) {
	t.Helper()
	d := yamlfield.Decoder{Loose: loose}
	root, ok := d.Document([]byte(doc), "empty")
	if !ok {
		t.Fatalf("Document(%q): %v", doc, d.Errors())
	}
	f, _ := d.Mapping(root, "", "v", "a")
	got := read(&d, f["v"])
	var lines []string
	for _, e := range d.Errors() {
		lines = append(lines, e.Error())
	}
	return got, strings.Join(lines, "\n")
}

// A step is one value read: the document, what the reader returns, and the errors.
type step struct {
	doc    string
	want   any
	errors string
}

func check(t *testing.T, name string, loose bool, read func(d *yamlfield.Decoder, n *yaml.Node) any, steps []step) {
	t.Helper()
	for _, s := range steps {
		got, errs := run(t, loose, s.doc, read)
		if fmt.Sprint(got) != fmt.Sprint(s.want) || errs != s.errors {
			t.Errorf("%s (Loose %v) of %q = %v, errors %q; want %v, errors %q", name, loose, s.doc, got, errs, s.want, s.errors)
		}
	}
}

func TestString(t *testing.T) {
	read := func(d *yamlfield.Decoder, n *yaml.Node) any {
		v, ok := d.String(n, "v")
		return fmt.Sprintf("%v %v", v, ok)
	}
	check(t, "String", false, read, []step{
		{"v: abc\n", "abc true", ""},
		{"v: '10'\n", "10 true", ""},
		{"w: 1\n", " false", "1:1: w: unknown field (want one of v, a)"}, // absent: no error of its own
		{"v: 10\n", " false", `1:4: v: want a string, found the number "10"`},
		{"v: true\n", " false", `1:4: v: want a string, found the boolean "true"`},
		{"v:\n", " false", "1:3: v: want a string, found null"},
		{"v: [a]\n", " false", "1:4: v: want a string, found a list"},
		{"v: {a: 1}\n", " false", "1:4: v: want a string, found a mapping"},
		{"v: !custom x\n", " false", `1:4: v: want a string, found the value "x"`},
		{"v: " + strings.Repeat("7", 50) + "\n", " false", `1:4: v: want a string, found the number "` + strings.Repeat("7", 40) + `..."`},
	})
	check(t, "String", true, read, []step{
		{"v: abc\n", "abc true", ""},
		{"v: 10\n", "10 true", ""},
		{"v: true\n", "true true", ""},
		{"v: !custom x\n", "x true", ""},
		{"v:\n", " false", "1:3: v: want a string, found null"},
		{"v: ~\n", " false", "1:4: v: want a string, found null"},
		{"v: [a]\n", " false", "1:4: v: want a string, found a list"},
		{"a: &x 1\nv: *x\n", " false", "2:4: v: want a string, found an alias"},
	})
}

func TestBool(t *testing.T) {
	read := func(d *yamlfield.Decoder, n *yaml.Node) any {
		v, ok := d.Bool(n, "v")
		return fmt.Sprintf("%v %v", v, ok)
	}
	check(t, "Bool", false, read, []step{
		{"v: true\n", "true true", ""},
		{"v: false\n", "false true", ""},
		{"v: True\n", "false false", "1:4: v: True: want true or false"},
		{"v: yes\n", "false false", `1:4: v: want true or false, found the string "yes"`},
		{"v: 'true'\n", "false false", `1:4: v: want true or false, found the string "true"`},
		{"v: 1\n", "false false", `1:4: v: want true or false, found the number "1"`},
	})
	check(t, "Bool", true, read, []step{
		{"v: True\n", "true true", ""},
		{"v: FALSE\n", "false true", ""},
		{"v: yes\n", "false false", `1:4: v: want true or false, found the string "yes"`},
	})
}

func TestInt(t *testing.T) {
	read := func(d *yamlfield.Decoder, n *yaml.Node) any {
		v, ok := d.Int(n, "v", -5, 100)
		return fmt.Sprintf("%v %v", v, ok)
	}
	for _, loose := range []bool{false, true} { // Loose reads integers strictly too
		check(t, "Int", loose, read, []step{
			{"v: 100\n", "100 true", ""},
			{"v: -5\n", "-5 true", ""},
			{"v: 101\n", "0 false", "1:4: v: 101 is outside -5 to 100"},
			{"v: -6\n", "0 false", "1:4: v: -6 is outside -5 to 100"},
			{"v: 0x10\n", "0 false", "1:4: v: 0x10: want a decimal whole number below 2^63"},
			{"v: 1.5\n", "0 false", `1:4: v: want a whole number, found the number "1.5"`},
			{"v: 99999999999999999999\n", "0 false", `1:4: v: want a whole number, found the number "99999999999999999999"`},
			{"v: \"10\"\n", "0 false", `1:4: v: want a whole number, found the string "10"`},
		})
	}
}

func TestDuration(t *testing.T) {
	bounded := func(lo, hi time.Duration) func(d *yamlfield.Decoder, n *yaml.Node) any {
		return func(d *yamlfield.Decoder, n *yaml.Node) any {
			v, ok := d.Duration(n, "v", lo, hi)
			return fmt.Sprintf("%v %v", v, ok)
		}
	}
	check(t, "Duration", false, bounded(0, time.Hour), []step{
		{"v: 250ms\n", "250ms true", ""},
		{"v: 1h\n", "1h0m0s true", ""},
		{"v: 2h\n", "0s false", `1:4: v: "2h": want a duration such as 1s, 250ms or 24h, at most 1h0m0s`},
		{"v: -1s\n", "0s false", `1:4: v: "-1s": want a duration such as 1s, 250ms or 24h, at most 1h0m0s`},
		{"v: soon\n", "0s false", `1:4: v: "soon": want a duration such as 1s, 250ms or 24h, at most 1h0m0s`},
		{"v: 10\n", "0s false", `1:4: v: want a duration such as 1s, 250ms or 24h, found the number "10"`},
	})
	check(t, "Duration", false, bounded(time.Second, time.Minute), []step{
		{"v: 2m\n", "0s false", `1:4: v: "2m": want a duration such as 1s, 250ms or 24h, from 1s to 1m0s`},
	})
	check(t, "Duration", false, bounded(time.Second, math.MaxInt64), []step{
		{"v: 1ms\n", "0s false", `1:4: v: "1ms": want a duration such as 1s, 250ms or 24h, at least 1s`},
	})
	check(t, "Duration", true, bounded(math.MinInt64, math.MaxInt64), []step{
		{"v: -1s\n", "-1s true", ""},
		{"v: 10\n", "0s false", `1:4: v: "10": want a duration such as 1s, 250ms or 24h`},
		{"v: [1s]\n", "0s false", "1:4: v: want a duration such as 1s, 250ms or 24h, found a list"},
	})
}

// TestMapping checks each error of a mapping's fields, at the field's key, in the order of their
// places in the file.
func TestMapping(t *testing.T) {
	doc := `top:
  limit: 1
  windw: 2
  lmt: 3
  burst: 4
  limit: 5
  zzz: 6
  ? [a]
  : 7
  inner: [1]
`
	var d yamlfield.Decoder
	root, ok := d.Document([]byte(doc), "empty")
	if !ok {
		t.Fatal(d.Errors())
	}
	top, ok := d.Mapping(root, "", "top")
	if !ok {
		t.Fatal("the file is a mapping")
	}
	f, ok := d.Mapping(top["top"], "top", "limit", "window", "burst", "inner")
	if !ok {
		t.Fatal("top is a mapping")
	}
	if _, ok := d.Mapping(f["inner"], "top.inner", "a", "b"); ok {
		t.Error("Mapping of a list reports a mapping")
	}
	if got, ok := d.Sequence(f["limit"], "top.limit"); ok || got != nil {
		t.Errorf("Sequence of a number = %v, %v", got, ok)
	}
	if m, ok := d.Mapping(nil, "absent"); ok || m != nil {
		t.Errorf("Mapping of no node = %v, %v", m, ok)
	}
	if items, ok := d.Sequence(nil, "absent"); ok || items != nil {
		t.Errorf("Sequence of no node = %v, %v", items, ok)
	}
	if items, ok := d.Sequence(f["inner"], "top.inner"); !ok || len(items) != 1 {
		t.Errorf("Sequence of [1] = %v, %v", items, ok)
	}
	if f["limit"].Value != "1" || f["burst"].Value != "4" || len(f) != 3 {
		t.Errorf("fields %v; want limit 1 (the first of two), burst 4, inner", f)
	}
	if _, ok := d.Mapping(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		{Kind: yaml.ScalarNode, Tag: "!!str", Value: "ab", Line: 11, Column: 1}, {Kind: yaml.ScalarNode, Tag: "!!int", Value: "1"},
	}}, "", "abc", "abd"); !ok {
		t.Error("Mapping of a mapping reports none")
	}
	want := []string{
		"2:10: top.limit: want a list",
		"3:3: top.windw: unknown field; did you mean window?",
		"4:3: top.lmt: unknown field; did you mean limit?",
		"6:3: top.limit: set twice",
		"7:3: top.zzz: unknown field (want one of limit, window, burst, inner)",
		"8:5: top: a field name must be a string",
		"10:10: top.inner: want a mapping of the fields a, b",
		"11:1: ab: unknown field (want one of abc, abd)", // two names within two edits: no guess
	}
	var got []string
	for _, e := range d.Errors() {
		got = append(got, e.Error())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if d.Len() != len(got) {
		t.Errorf("Len = %d; want %d", d.Len(), len(got))
	}
}

func TestDocument(t *testing.T) {
	for _, tt := range []struct{ doc, want string }{
		{"", "empty file"},
		{"# a comment only\n", "empty file"},
		{"a: 1\n---\nb: 2\n", "2:1: a second YAML document: want one"},
		{"a: 1\n---\nb: [\n", "2:1: a second YAML document: want one"},
		{"a: 1\nb: [1, 2\n", "3:1: YAML: did not find expected ',' or ']'; the '[' at 2:4 is never closed"},
		{"a: *nowhere\n", "YAML: unknown anchor 'nowhere' referenced"},
		{"[a, b]\n", ""},
	} {
		var d yamlfield.Decoder
		root, ok := d.Document([]byte(tt.doc), "empty file")
		var got []string
		for _, e := range d.Errors() {
			got = append(got, e.Error())
		}
		if strings.Join(got, "\n") != tt.want || ok != (tt.want == "") || ok != (root != nil) {
			t.Errorf("Document(%q) = %v, %v, errors %q; want errors %q", tt.doc, root, ok, got, tt.want)
		}
	}
}

func TestNoAliases(t *testing.T) {
	for _, tt := range []struct{ doc, want string }{
		{"a: 1\nb: [1, 2]\n", ""},
		{"a: 1\nb: [1, &x 2]\n", "2:8: anchors and aliases are not supported"},
		{"a: &x 1\nb: *x\n", "1:4: anchors and aliases are not supported"},
	} {
		var d yamlfield.Decoder
		root, ok := d.Document([]byte(tt.doc), "empty")
		if !ok {
			t.Fatal(d.Errors())
		}
		ok = d.NoAliases(root)
		var got []string
		for _, e := range d.Errors() {
			got = append(got, e.Error())
		}
		if strings.Join(got, "\n") != tt.want || ok != (tt.want == "") {
			t.Errorf("NoAliases(%q) = %v, errors %q; want %q", tt.doc, ok, got, tt.want)
		}
	}
}

// TestErrorsInPlaceOrder: Errors orders by place, errors of the whole file first, keeping the
// order of those at one place.
func TestErrorsInPlaceOrder(t *testing.T) {
	var d yamlfield.Decoder
	at := func(line, col int) *yaml.Node { return &yaml.Node{Line: line, Column: col} }
	d.Errorf(at(3, 1), "c")
	d.Errorf(at(1, 5), "b1")
	d.Errorf(nil, "file")
	d.Errorf(at(1, 5), "b2")
	d.Errorf(at(1, 2), "a")
	var got []string
	for _, e := range d.Errors() {
		got = append(got, e.Error())
	}
	if want := "file|1:2: a|1:5: b1|1:5: b2|3:1: c"; strings.Join(got, "|") != want {
		t.Errorf("Errors = %s; want %s", strings.Join(got, "|"), want)
	}
}

// FuzzDecoder reads every node of any data with every reader, strict and Loose: none panics, a
// reader that reports false has recorded an error, and every error is placed within the file
// (or where a line after it would start) or is of the whole file.
func FuzzDecoder(f *testing.F) {
	for _, s := range []string{
		"a: 1\nb: [x, 'y', {c: true}]\n",
		"policies:\n  - name: api\n    limit: 10\n  window: 1s\n",
		"a: &x 1\nb: *x\n",
		"a: 1\n---\nb: 2\n",
		"k: é\nb: [é, @x]\n",
		"a: \"x\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := 1 // at most: YAML breaks a line at \r, \n, NEL, LS and PS, \r\n once
		for _, br := range []string{"\r", "\n", "\u0085", "\u2028", "\u2029"} {
			lines += bytes.Count(data, []byte(br))
		}
		for _, loose := range []bool{false, true} {
			d := yamlfield.Decoder{Loose: loose}
			root, ok := d.Document(data, "empty")
			if ok != (d.Len() == 0) {
				t.Fatalf("Document reports %v with %d errors", ok, d.Len())
			}
			if ok {
				d.NoAliases(root)
				var walk func(n *yaml.Node, depth int)
				walk = func(n *yaml.Node, depth int) {
					if depth > 50 {
						return
					}
					for _, read := range []func() bool{
						func() bool { _, ok := d.String(n, "v"); return ok },
						func() bool { _, ok := d.Bool(n, "v"); return ok },
						func() bool { _, ok := d.Int(n, "v", -10, 10); return ok },
						func() bool { _, ok := d.Duration(n, "v", 0, time.Hour); return ok },
						func() bool { _, ok := d.Sequence(n, "v"); return ok },
						func() bool { _, ok := d.Mapping(n, "v", "a", "b"); return ok },
					} {
						before := d.Len()
						if !read() && d.Len() == before {
							t.Fatalf("a reader of %v reports false and records nothing", n)
						}
					}
					for _, c := range n.Content {
						walk(c, depth+1)
					}
				}
				walk(root, 0)
			}
			for _, e := range d.Errors() {
				// An empty node at the file's end is placed where a next line would start.
				if e.Line < 0 || e.Line > lines+1 || e.Line == 0 && e.Column != 0 || e.Line > 0 && e.Column < 1 {
					t.Fatalf("error %q placed outside the file of %d lines", e.Error(), lines)
				}
			}
		}
	})
}

func TestEntries(t *testing.T) {
	read := func(d *yamlfield.Decoder, n *yaml.Node) any {
		entries, ok := d.Entries(n, "v", "names to numbers")
		var names []string
		for _, e := range entries {
			names = append(names, fmt.Sprintf("%s@%d:%d", e.Name, e.Key.Line, e.Value.Column))
		}
		return fmt.Sprintf("%v %v", names, ok)
	}
	check(t, "Entries", false, read, []step{
		{"v: {b: 1, a: 2}\n", "[b@1:8 a@1:14] true", ""}, // the file's order
		{"v: {}\n", "[] true", ""},
		{"w: 1\n", "[] false", "1:1: w: unknown field (want one of v, a)"},
		{"v: [a]\n", "[] false", "1:4: v: want a mapping of names to numbers, found a list"},
		{"v:\n", "[] false", "1:3: v: want a mapping of names to numbers, found null"},
		{"v: {a: 1, a: 2, b: 3}\n", "[a@1:8 b@1:20] true", "1:11: v.a: set twice"},
		{"v: {1: 1, true: 2, c: 3}\n", "[c@1:23] true", "1:5: v: want a name (a string), found the number \"1\"\n1:11: v: want a name (a string), found the boolean \"true\""},
	})
}
