package envoyconf_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/admit-dev/admit/internal/mdblocks"
	"github.com/admit-dev/admit/policy/envoyconf"
)

// TestDocsExamples: every block of docs/envoy.md fenced ```yaml envoy-ratelimit is a valid
// envoyproxy/ratelimit configuration file for envoyconf.
func TestDocsExamples(t *testing.T) {
	data, err := os.ReadFile("../../docs/envoy.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := mdblocks.Fenced(string(data), "yaml envoy-ratelimit")
	if len(blocks) == 0 {
		t.Fatal("no ```yaml envoy-ratelimit block in docs/envoy.md")
	}
	for i, b := range blocks {
		if _, err := envoyconf.Parse(envoyconf.File{Name: fmt.Sprintf("block%d.yaml", i+1), Data: []byte(b)}); err != nil {
			t.Errorf("docs/envoy.md, ```yaml envoy-ratelimit block %d: %v\n%s", i+1, err, b)
		}
	}
}
