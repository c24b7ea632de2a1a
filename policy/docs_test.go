package policy_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/admit-dev/admit/internal/mdblocks"
	"github.com/admit-dev/admit/policy"
)

// TestDocsExamplesParse parses every YAML example in the README and docs/: a block fenced
// ```yaml is an admit configuration file, and must be valid. (A YAML block of another format is
// fenced with more words, such as ```yaml envoy, and is not parsed here.)
func TestDocsExamplesParse(t *testing.T) {
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../README.md")
	found := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, block := range mdblocks.Fenced(string(data), "yaml") {
			found++
			name := fmt.Sprintf("%s#%d", filepath.Base(file), i+1)
			if _, err := policy.Parse(name, []byte(block)); err != nil {
				t.Errorf("%s: YAML example %d:\n%s\n%v", file, i+1, block, err)
			}
		}
	}
	if found == 0 {
		t.Fatal("no YAML example found: the test reads nothing")
	}
	t.Logf("%d YAML examples parsed", found)
}

// probeField is a field name no parser table holds, nor any name within two edits of one, so that
// the parser's error for it lists every field it accepts where it stands.
const probeField = "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"

// acceptedFields returns every field the parser accepts, as dotted paths from the top of the file
// ("server.redis_tls.ca_file", "policies.name", "routes.subject.from"): the lists its errors give
// for an unknown field (want one of …). It starts at the top of the file, and goes into every
// field that is a mapping, or a list of mappings, by the parser's own word, so that a field added
// to the parser is found without a change here.
func acceptedFields(t *testing.T) []string {
	t.Helper()
	var fields []string
	var walk func(path []string, lists []bool)
	walk = func(path []string, lists []bool) {
		known, ok := probe(path, lists)
		if !ok && len(path) > 0 {
			lists = append(slices.Clone(lists[:len(lists)-1]), true)
			known, ok = probe(path, lists)
		}
		if !ok {
			return
		}
		for _, f := range known {
			sub := append(slices.Clone(path), f)
			fields = append(fields, strings.Join(sub, "."))
			walk(sub, append(slices.Clone(lists), false))
		}
	}
	walk(nil, nil)
	if len(fields) == 0 {
		t.Fatal("the parser names no field it accepts: is the unknown-field message still \"(want one of …)\"?")
	}
	return fields
}

// probe parses a file with probeField at path (where lists[i] makes path[i] a list of one mapping,
// else a mapping) and returns the fields the parser says it wants there, or false when the parser
// does not take path for a mapping.
func probe(path []string, lists []bool) ([]string, bool) {
	doc := probeField + ": 1"
	for i := len(path) - 1; i >= 0; i-- {
		if lists[i] {
			doc = "[{" + doc + "}]"
		} else {
			doc = "{" + doc + "}"
		}
		doc = path[i] + ": " + doc
	}
	_, err := policy.Parse("probe.yaml", []byte(doc))
	var errs policy.ErrorList
	if !errors.As(err, &errs) {
		return nil, false
	}
	for _, e := range errs {
		_, rest, ok := strings.Cut(e.Msg, probeField+": unknown field (want one of ")
		if !ok {
			continue
		}
		return strings.Split(strings.TrimSuffix(rest, ")"), ", "), true
	}
	return nil, false
}

// documentedFields returns the fields docs/configuration.md documents, as dotted paths: the top
// level's named in backquotes, then the first column of each section's tables, under the section's
// top-level field ("| `redis_tls.ca_file` |" under "## Server settings" is server.redis_tls.ca_file).
func documentedFields(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{"Policies": "policies", "Server settings": "server", "Routes": "routes", "RLQS": "rlqs"}
	row := regexp.MustCompile("^\\| `([a-z0-9_.]+)` \\|")
	var fields []string
	prefix := ""
	for line := range strings.Lines(string(data)) {
		if title, ok := strings.CutPrefix(line, "## "); ok {
			prefix = sections[strings.TrimSpace(title)]
			if prefix != "" {
				fields = append(fields, prefix)
			}
			continue
		}
		if m := row.FindStringSubmatch(line); m != nil && prefix != "" {
			fields = append(fields, prefix+"."+m[1])
		}
	}
	if len(fields) == 0 {
		t.Fatal("docs/configuration.md has no field table under ## Policies, ## Server settings, ## Routes or ## RLQS")
	}
	return fields
}

// TestConfigFieldsDocumented compares the fields the parser accepts with those
// docs/configuration.md documents, both ways.
func TestConfigFieldsDocumented(t *testing.T) {
	accepted := acceptedFields(t)
	documented := documentedFields(t)
	t.Logf("the parser accepts %d fields: %s", len(accepted), strings.Join(accepted, " "))
	for _, f := range accepted {
		if !slices.Contains(documented, f) {
			t.Errorf("the parser accepts %s, which docs/configuration.md does not document", f)
		}
	}
	for _, f := range documented {
		if !slices.Contains(accepted, f) {
			t.Errorf("docs/configuration.md documents %s, which the parser does not accept", f)
		}
	}
}
