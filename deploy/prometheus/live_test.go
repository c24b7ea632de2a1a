package prometheus_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/redistest"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
)

// targetLabels are the labels a Prometheus scrape adds to every series it takes.
var targetLabels = []string{"job", "instance"}

// liveConfig is the configuration admit serve runs with: two policies, the top-subjects sketch on.
const liveConfig = `
server:
  top: {size: 10}
policies:
  - {name: api, algorithm: fixed_window, limit: 2, window: 1h}
  - {name: login, algorithm: gcra, limit: 5, window: 1m, failure: open, local_limit: 2}
`

// liveMetrics builds admit, runs admit serve on a real Redis with the admin API on, makes a few
// decisions (allowed and limited), and returns the metric families of its /metrics: every series
// name it exports (a histogram's _bucket, _sum and _count too) and their label names.
func liveMetrics(t *testing.T) map[string][]string {
	t.Helper()
	redis := redistest.Start(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "admit")
	build := exec.Command("go", "build", "-o", bin, "./cmd/admit")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/admit: %v\n%s", err, out)
	}
	config := filepath.Join(dir, "admit.yaml")
	if err := os.WriteFile(config, []byte(liveConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
		"--redis", redis.URL(), "--config", config)
	cmd.Env = append(os.Environ(), "ADMIT_HMAC_SECRET=live-metrics-secret-0123456789abcdef", "ADMIT_ADMIN_TOKEN=live-metrics-admin-token-5e1f9c2b")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	addr := make(chan string, 1)
	var log strings.Builder
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		listening := regexp.MustCompile(`msg=listening addr=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-logDone:
		t.Fatalf("admit serve exited before listening:\n%s", log.String())
	case <-time.After(60 * time.Second):
		t.Fatal("admit serve did not log its address within 60 s")
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for i, want := range []int{200, 200, 429} {
		res, err := client.Post(base+"/v1/check", "application/json", strings.NewReader(`{"policies":["api","login"],"key":"alice"}`))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Fatalf("check %d: %d; want %d", i+1, res.StatusCode, want)
		}
	}
	res, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	page, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d, %v", res.StatusCode, err)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	families, err := p.TextToMetricFamilies(strings.NewReader(string(page)))
	if err != nil {
		t.Fatalf("/metrics: %v\n%s", err, page)
	}
	exported := map[string][]string{}
	for name, f := range families {
		var labels []string
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(labels, l.GetName()) {
					labels = append(labels, l.GetName())
				}
			}
		}
		exported[name] = labels
		if f.GetType() == dto.MetricType_HISTOGRAM {
			exported[name+"_bucket"] = append(slices.Clone(labels), "le")
			exported[name+"_sum"] = labels
			exported[name+"_count"] = labels
		}
	}
	return exported
}

// An exprUse is what one expression reads: for each metric, the labels its selectors match on;
// and every label it groups or matches by.
type exprUse struct {
	selectors map[string][]string // metric name → label names of its matchers
	grouping  []string            // by, without, on, ignoring and group_left/right labels
}

// inspect parses expr and returns what it reads.
func inspect(expr string) (exprUse, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return exprUse{}, err
	}
	use := exprUse{selectors: map[string][]string{}}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch x := n.(type) {
		case *parser.VectorSelector:
			var labels []string
			for _, m := range x.LabelMatchers {
				if m.Name != model.MetricNameLabel {
					labels = append(labels, m.Name)
				}
			}
			use.selectors[x.Name] = append(use.selectors[x.Name], labels...)
		case *parser.AggregateExpr:
			use.grouping = append(use.grouping, x.Grouping...)
		case *parser.BinaryExpr:
			if x.VectorMatching != nil {
				use.grouping = append(use.grouping, x.VectorMatching.MatchingLabels...)
				use.grouping = append(use.grouping, x.VectorMatching.Include...)
			}
		}
		return nil
	})
	return use, nil
}

// TestExpressionsParse parses every expression of the rules and the dashboard with Prometheus's
// own parser.
func TestExpressionsParse(t *testing.T) {
	for where, expr := range allExprs(t) {
		if _, err := inspect(expr); err != nil {
			t.Errorf("%s: %v\n%s", where, err, expr)
		}
	}
}

// allExprs returns every expression of the rule files and the dashboard, by where it is.
func allExprs(t *testing.T) map[string]string {
	t.Helper()
	exprs := dashboardExprs(t)
	for _, f := range ruleFiles {
		for _, r := range rules(t, f) {
			exprs[f+" "+r.name()] = r.Expr
		}
	}
	return exprs
}

// TestNamesExported checks every metric and label the rules and the dashboard read against the
// /metrics of a live admit serve on Redis: each metric is one it exports (a histogram's series by
// their suffixes) or one recording.yaml records; each label one that metric has, or a scrape's
// job and instance; each label grouped or matched by one of the metrics the expression reads has.
// A recorded series has the labels its rule keeps.
func TestNamesExported(t *testing.T) {
	exported := liveMetrics(t)
	known := map[string][]string{}
	for name, labels := range exported {
		known[name] = append(slices.Clone(labels), targetLabels...)
	}
	recorded := map[string]exprUse{}
	for _, r := range rules(t, "recording.yaml") {
		use, err := inspect(r.Expr)
		if err != nil {
			t.Fatalf("recording.yaml %s: %v", r.Record, err)
		}
		recorded[r.Record] = use
		var kept []string
		for l := range r.Labels {
			kept = append(kept, l)
		}
		known[r.Record] = slices.Compact(slices.Sorted(slices.Values(append(kept, use.grouping...))))
	}

	exprs := allExprs(t)
	places := make([]string, 0, len(exprs))
	for where := range exprs {
		places = append(places, where)
	}
	sort.Strings(places)
	for _, where := range places {
		use, err := inspect(exprs[where])
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		var readable []string
		for name, labels := range use.selectors {
			have, ok := known[name]
			if !ok {
				t.Errorf("%s reads %s, which admit does not export and no recording rule records", where, name)
				continue
			}
			readable = append(readable, have...)
			for _, l := range labels {
				if !slices.Contains(have, l) {
					t.Errorf("%s matches %s on label %q; it has %q", where, name, l, have)
				}
			}
		}
		for _, l := range use.grouping {
			if len(use.selectors) > 0 && !slices.Contains(readable, l) {
				t.Errorf("%s groups or matches by %q, a label of none of the series it reads (%q)", where, l, readable)
			}
		}
	}
	dashboard := dashboardExprs(t)
	reads := familiesRead(t, dashboard, recorded, exported)
	for _, want := range requiredMetrics {
		if !reads[want] {
			t.Errorf("the dashboard does not read %s, directly or through a recording rule", want)
		}
	}
	for name := range exported {
		if strings.HasPrefix(name, "admit_") && familyOf(name, exported) == name && !reads[name] {
			t.Logf("note: the dashboard does not show %s", name)
		}
	}
}

// requiredMetrics are the families the dashboard must show: decisions, latency, the breaker, the
// over-limit cache, reloads, errors, admin changes, the sketches.
var requiredMetrics = []string{
	"admit_decisions_total", "admit_decision_duration_seconds", "admit_breaker_state",
	"admit_overlimit_cache_hits_total", "admit_config_reloads_total", "admit_backend_errors_total",
	"admit_admin_changes_total", "admit_top_subjects_entries",
}

// familiesRead returns the families exprs read, directly (a histogram's by any of its series) or
// through the recording rules of recorded, which they read by name.
func familiesRead(t *testing.T, exprs map[string]string, recorded map[string]exprUse, exported map[string][]string) map[string]bool {
	t.Helper()
	reads := map[string]bool{}
	var add func(name string)
	add = func(name string) {
		if use, ok := recorded[name]; ok {
			for inner := range use.selectors {
				add(inner)
			}
			return
		}
		reads[familyOf(name, exported)] = true
	}
	for where, expr := range exprs {
		use, err := inspect(expr)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		for name := range use.selectors {
			add(name)
		}
	}
	return reads
}

// familyOf returns the family of the series name: name less a histogram's suffix, when exported
// has that histogram.
func familyOf(name string, exported map[string][]string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && exported[base] != nil && exported[base+"_bucket"] != nil {
			return base
		}
	}
	return name
}
