package envoy_test

import (
	"strings"
	"testing"

	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rate_limit_quota/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/admit-dev/admit/internal/mdblocks"
)

// decodeRLQSFilter decodes an HTTP filter strictly, every Any resolved and validated.
func decodeRLQSFilter(block string) error {
	docs, err := yamlDocuments([]byte(block))
	if err != nil {
		return err
	}
	f := &hcmv3.HttpFilter{}
	if err := decodeStrict(docs[0], f); err != nil {
		return err
	}
	return validateAnys(f.ProtoReflect())
}

// TestRLQSFilterDecodesStrictly decodes the Envoy filter of docs/rlqs.md into Envoy's types,
// every Any resolved and validated, and checks that broken copies fail.
func TestRLQSFilterDecodesStrictly(t *testing.T) {
	blocks := mdblocks.Fenced(string(readFile(t, "../../docs/rlqs.md")), "yaml envoy-rlqs")
	if len(blocks) != 1 {
		t.Fatalf("docs/rlqs.md has %d yaml envoy-rlqs blocks, want 1", len(blocks))
	}
	if err := decodeRLQSFilter(blocks[0]); err != nil {
		t.Fatalf("docs/rlqs.md's filter: %v", err)
	}
	for _, broken := range []struct{ from, to string }{
		{"reporting_interval: 1s", "reporting_intervals: 1s"},             // an unknown field
		{"reuse_last_assignment: {}", "reuse_last_assignment: {ttl: 1s}"}, // unknown inside
		{"blanket_rule: ALLOW_ALL", "blanket_rule: ALLOW_SOME"},           // a bad enum
		{"HttpRequestHeaderMatchInput", "HttpRequestHeaderMatchInputs"},   // an unresolvable Any
		{"reporting_interval: 1s\n", ""},                                  // required: fails validation
	} {
		if !strings.Contains(blocks[0], broken.from) {
			t.Fatalf("the filter has no %q to break", broken.from)
		}
		if err := decodeRLQSFilter(strings.Replace(blocks[0], broken.from, broken.to, 1)); err == nil {
			t.Errorf("the filter with %q for %q decoded", broken.to, broken.from)
		}
	}
}
