package helm

import (
	"strings"
	"testing"
)

// TestDecodeRefusesBrokenObjects shows that the decoding every rendering goes through can fail:
// each edit of what the chart renders with ci/full.yaml (every kind it renders) breaks one rule
// of strict decoding, and decode must refuse it.
func TestDecodeRefusesBrokenObjects(t *testing.T) {
	good, _, err := renderValues(t, ciValues(t, "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decode(good); err != nil {
		t.Fatalf("the unedited rendering: %v", err)
	}
	const pod = "\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: admit\nspec:\n  containers: []\n"
	for _, c := range []struct{ name, old, new string }{
		{"misspelled field of a Kubernetes type", "readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true"},
		{"misspelled field of the ServiceMonitor", "interval: 30s", "intervall: 30s"},
		{"wrong type (a string for a bool)", "readOnlyRootFilesystem: true", `readOnlyRootFilesystem: "yes"`},
		{"wrong type (a word for an int)", "maxReplicas: 12", "maxReplicas: twelve"},
		{"duplicate key", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: true\n            readOnlyRootFilesystem: false"},
		{"unknown kind", "kind: ServiceMonitor\n", "kind: ServiceMonitors\n"},
		{"a kind the chart never renders", "---\n# Source: admit/templates/pdb.yaml\n", strings.TrimPrefix(pod, "\n") + "---\n# Source: admit/templates/pdb.yaml\n"},
		{"a known kind at another API version", "apiVersion: policy/v1\nkind: PodDisruptionBudget", "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if n := strings.Count(good, c.old); n != 1 {
				t.Fatalf("the rendering holds %q %d times, want once: update the test", c.old, n)
			}
			m, err := decode(strings.Replace(good, c.old, c.new, 1))
			if err == nil {
				t.Fatalf("the broken rendering decoded: kinds %q", m.kinds)
			}
			t.Log(err)
		})
	}
}
