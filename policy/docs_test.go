package policy_test

import (
	"fmt"
	"os"
	"path/filepath"
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
