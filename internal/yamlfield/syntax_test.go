package yamlfield

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func decode(data string) error {
	var n yaml.Node
	return yaml.NewDecoder(strings.NewReader(data)).Decode(&n)
}

// TestLocate places each kind of syntax error at its offending token, where yaml.v3's own
// message names the line of the construct around it: libyaml's problem mark, read off a build
// of yaml.v3 that prints it.
func TestLocate(t *testing.T) {
	tests := []struct {
		yaml string
		want string // "line:column: message"
	}{
		// yaml.v3: "line 1: did not find expected '-' indicator"
		{"list:\n  - a: 1\n    b: 2\n  c: 3\n", "4:3: did not find expected '-' indicator"},
		// yaml.v3: "line 2: found a tab character that violates indentation"
		{"a: 1\nb: x\n\tc: 3\n", "3:1: found a tab character that violates indentation"},
		// yaml.v3: "line 2: mapping values are not allowed in this context"
		{"a: 1\nb: x c: 3\n", "2:7: mapping values are not allowed in this context"},
		// yaml.v3: "found character that cannot start any token", no line on the first
		{"a: @\n", "1:4: found character that cannot start any token"},
		// the column counts characters, not bytes
		{"k: é\nb: [é, @x]\n", "2:8: found character that cannot start any token"},
		{"a: 1\nb: 'x\nc: 3\n", "4:1: found unexpected end of stream; the '\\'' at 2:4 is never closed"},
		{"a: [1, {b: 2}\n", "2:1: did not find expected ',' or ']'; the '[' at 1:4 is never closed"},
		// in a flow collection, a token right after another
		{"a: [ap{, b]\nc: 1\n", "1:7: did not find expected ',' or ']'"},
		{"a: {b: c[d, e: f}\n", "1:9: did not find expected ',' or '}'"},
		{"a: 1\nb 2\n\nc: 3\n", "4:1: could not find expected ':' after the key at 2:1"},
	}
	for _, tt := range tests {
		err := decode(tt.yaml)
		if err == nil {
			t.Fatalf("%q decodes", tt.yaml)
		}
		e, ok := locate([]byte(tt.yaml), err)
		if got := fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Msg); !ok || got != tt.want {
			t.Errorf("locate(%q, %q) = %s, %v; want %s", tt.yaml, err, got, ok, tt.want)
		}
	}
}

// TestLocateNotSyntax: an error yaml.v3 reports without a line, or not an error of the data,
// is left unplaced.
func TestLocateNotSyntax(t *testing.T) {
	data := "a: *nowhere\n"
	err := decode(data)
	if err == nil {
		t.Fatal("an unknown alias decodes")
	}
	if e, ok := locate([]byte(data), err); ok || e.Msg != "unknown anchor 'nowhere' referenced" {
		t.Errorf("locate(%q) = %+v, %v; want unplaced", err, e, ok)
	}
	other := decode("a: [\n")
	if _, ok := locate([]byte("a: 1\n"), other); ok {
		t.Errorf("locate placed %q in data it is not the error of", other)
	}
}

// TestLocateLargeFile places an error at the end of a file of 64 KiB, bisecting its lines.
func TestLocateLargeFile(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("items:\n")
	for b.Len() < 64<<10 {
		fmt.Fprintf(&b, "  - name: item%d\n", b.Len())
	}
	lines := bytes.Count(b.Bytes(), []byte("\n"))
	b.WriteString(" oops: 1\n")
	err := decode(b.String())
	if err == nil {
		t.Fatal("decodes")
	}
	e, ok := locate(b.Bytes(), err)
	if !ok || e.Line != lines+1 || e.Column != 2 {
		t.Errorf("locate = %+v, %v; want line %d, column 2", e, ok, lines+1)
	}
}

func TestDocumentStart(t *testing.T) {
	for _, tt := range []struct {
		data  string
		after int
		want  int
	}{
		{"---\na: 1\n---\nb: [\n", 1, 3},
		{"a: 1\n--- # two\nb: [\n", 1, 2},
		{"a: 1\n----\n  ---\nb: [\n", 1, 0},
	} {
		if got := documentStart([]byte(tt.data), tt.after); got != tt.want {
			t.Errorf("documentStart(%q, %d) = %d; want %d", tt.data, tt.after, got, tt.want)
		}
	}
}
