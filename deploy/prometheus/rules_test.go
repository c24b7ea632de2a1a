package prometheus_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// ruleFiles are the shipped rule files, and their promtool unit tests.
var (
	ruleFiles     = []string{"alerts.yaml", "recording.yaml"}
	ruleTestFiles = []string{"alerts_test.yaml", "recording_test.yaml"}
)

// TestPromtoolCheckRules runs promtool check rules on the rule files: they parse, their
// expressions parse, and no rule is malformed.
func TestPromtoolCheckRules(t *testing.T) {
	out := runPromtool(t, append([]string{"check", "rules"}, ruleFiles...)...)
	if strings.Count(out, "SUCCESS") != len(ruleFiles) {
		t.Errorf("promtool check rules: want SUCCESS for each of %q:\n%s", ruleFiles, out)
	}
}

// TestPromtoolTestRules runs the rules' unit tests with promtool test rules.
func TestPromtoolTestRules(t *testing.T) {
	out := runPromtool(t, append([]string{"test", "rules"}, ruleTestFiles...)...)
	if strings.Count(out, "SUCCESS") != len(ruleTestFiles) {
		t.Errorf("promtool test rules: want SUCCESS for each of %q:\n%s", ruleTestFiles, out)
	}
}

// A ruleTests is a promtool unit test file, as much of it as the tests read.
type ruleTests struct {
	RuleFiles          []string `yaml:"rule_files"`
	EvaluationInterval string   `yaml:"evaluation_interval"`
	Tests              []struct {
		Name        string `yaml:"name"`
		Interval    string `yaml:"interval"`
		InputSeries []struct {
			Series string `yaml:"series"`
			Values string `yaml:"values"`
		} `yaml:"input_series"`
		AlertRuleTest []struct {
			EvalTime  string `yaml:"eval_time"`
			Alertname string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `yaml:"exp_labels"`
				ExpAnnotations map[string]string `yaml:"exp_annotations"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
		PromqlExprTest []struct {
			Expr       string `yaml:"expr"`
			EvalTime   string `yaml:"eval_time"`
			ExpSamples []struct {
				Labels string  `yaml:"labels"`
				Value  float64 `yaml:"value"`
			} `yaml:"exp_samples"`
		} `yaml:"promql_expr_test"`
	} `yaml:"tests"`
}

// TestEveryRuleTested checks that the unit tests cover every rule both ways: each alert has a case
// where it fires and one where it stays silent, and each recording rule an expression test with
// samples.
func TestEveryRuleTested(t *testing.T) {
	var alerts ruleTests
	decodeYAML(t, "alerts_test.yaml", &alerts)
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, c := range alerts.Tests {
		for _, a := range c.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for _, r := range rules(t, "alerts.yaml") {
		if r.Alert == "" {
			t.Errorf("alerts.yaml: a rule that is no alert: %+v", r)
			continue
		}
		if !fires[r.Alert] {
			t.Errorf("alerts_test.yaml has no case where %s fires", r.Alert)
		}
		if !silent[r.Alert] {
			t.Errorf("alerts_test.yaml has no case where %s stays silent", r.Alert)
		}
	}

	var recorded ruleTests
	decodeYAML(t, "recording_test.yaml", &recorded)
	tested := map[string]bool{}
	for _, c := range recorded.Tests {
		for _, e := range c.PromqlExprTest {
			if len(e.ExpSamples) > 0 {
				tested[strings.TrimSpace(e.Expr)] = true
			}
		}
	}
	for _, r := range rules(t, "recording.yaml") {
		if r.Record == "" {
			t.Errorf("recording.yaml: a rule that records nothing: %+v", r)
			continue
		}
		if !tested[r.Record] {
			t.Errorf("recording_test.yaml has no expression test of %s with samples", r.Record)
		}
	}
}

// runbookPrefix is where every alert's runbook_url points: a section of docs/operations.md.
const runbookPrefix = "https://github.com/admit-dev/admit/blob/main/docs/operations.md#"

// TestAlertsHaveRunbooks checks that every alert has a severity, a summary, a description and a
// runbook_url into a section of docs/operations.md that exists.
func TestAlertsHaveRunbooks(t *testing.T) {
	anchors := headingAnchors(t, "../../docs/operations.md")
	for _, r := range rules(t, "alerts.yaml") {
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q; want critical or warning", r.Alert, s)
		}
		for _, a := range []string{"summary", "description"} {
			if r.Annotations[a] == "" {
				t.Errorf("%s has no %s annotation", r.Alert, a)
			}
		}
		url := r.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(url, runbookPrefix)
		switch {
		case !ok:
			t.Errorf("%s: runbook_url %q; want %sANCHOR", r.Alert, url, runbookPrefix)
		case !anchors[anchor]:
			t.Errorf("%s: runbook_url %q: docs/operations.md has no heading whose anchor is %q", r.Alert, url, anchor)
		}
	}
}

// headingAnchors returns the anchors GitHub gives the headings of the Markdown file at path: lower
// case, punctuation but '-' and '_' dropped, spaces as '-'; a repeated one numbered -1, -2, ...
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	anchors, seen := map[string]bool{}, map[string]int{}
	inFence := false
	for line := range strings.Lines(string(data)) {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		title, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "#")
		if inFence || !ok {
			continue
		}
		title = strings.TrimSpace(strings.TrimLeft(title, "#"))
		a := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(strings.ReplaceAll(title, "`", "")), ""), " ", "-")
		if n := seen[a]; n > 0 {
			seen[a]++
			a += "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		anchors[a] = true
	}
	return anchors
}
