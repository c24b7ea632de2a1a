// Package prometheus_test checks admit's Prometheus rules (alerts.yaml, recording.yaml) and its
// Grafana dashboard (../grafana/admit.json): promtool checks and unit-tests the rules, every
// expression of both parses, every metric and label they read is one a live admit serve exports,
// and the dashboard's model takes its data source from a variable. It is a module of its own so
// that Prometheus's query parser never becomes a dependency of admit. Docs: docs/operations.md,
// "Alerts" and "Dashboard".
package prometheus_test

import (
	"bytes"
	"os"
	"os/exec"
	"testing"

	"go.yaml.in/yaml/v3"
)

// requireEnv turns the skip of a test whose program is missing into a failure: make test sets it.
const requireEnv = "ADMIT_REQUIRE_REDIS"

// promtool returns the path of promtool, skipping t loudly without it (failing it when requireEnv
// is 1).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	if os.Getenv(requireEnv) == "1" {
		t.Fatalf("promtool not found on PATH and %s=1: install it with: apt-get install prometheus", requireEnv)
	}
	t.Skip("promtool not found: the Prometheus rules were NOT CHECKED; install it (apt-get install prometheus, or brew install prometheus) or run make test")
	return ""
}

// runPromtool runs promtool with args in this directory and returns its output, failing t when it
// exits other than 0.
func runPromtool(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool %q: %v\n%s", args, err, out.String())
	}
	return out.String()
}

// A ruleFile is a Prometheus rule file, as much of it as the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

// A rule is an alerting rule (Alert set) or a recording rule (Record set).
type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// name returns the rule's alert or record name.
func (r rule) name() string { return r.Alert + r.Record }

// rules returns the rules of the rule file at path, strictly decoded.
func rules(t *testing.T, path string) []rule {
	t.Helper()
	var f ruleFile
	decodeYAML(t, path, &f)
	var rs []rule
	for _, g := range f.Groups {
		rs = append(rs, g.Rules...)
	}
	if len(rs) == 0 {
		t.Fatalf("%s holds no rule", path)
	}
	return rs
}

// decodeYAML decodes the YAML file at path into v, failing t on an unknown field.
func decodeYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
