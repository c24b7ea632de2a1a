package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/admit-dev/admit/internal/redistest"
)

// A metricDoc is one row of the metrics table of docs/operations.md.
type metricDoc struct {
	names   []string // the metric names of the row, such as admit_decisions_total, or a pattern go_*
	typ     string   // counter, gauge, histogram; empty for a pattern's row
	labels  []string // the label names
	meaning string   // the meaning column, which names the values of the enumerated labels
}

// enumeratedLabels are the labels whose values are a fixed set, each of which the docs must name.
var enumeratedLabels = []string{"result", "kind", "operation", "state", "answer", "action"}

// readMetricsTable parses the metrics table of docs/operations.md.
func readMetricsTable(t *testing.T) []metricDoc {
	t.Helper()
	data, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile("`([^`]+)`")
	var rows []metricDoc
	in := false
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "| metric | type | labels | meaning |"):
			in = true
			continue
		case !in:
			continue
		case !strings.HasPrefix(line, "|"):
			in = false
			continue
		case strings.HasPrefix(line, "|---"):
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 4 {
			t.Fatalf("docs/operations.md: a metrics row of %d cells, want 4: %s", len(cells), line)
		}
		var row metricDoc
		for _, m := range code.FindAllStringSubmatch(cells[0], -1) {
			row.names = append(row.names, m[1])
		}
		row.typ = strings.TrimSpace(cells[1])
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			row.labels = append(row.labels, m[1])
		}
		row.meaning = cells[3]
		if len(row.names) == 0 {
			t.Fatalf("docs/operations.md: a metrics row names no metric: %s", line)
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		t.Fatal("docs/operations.md has no metrics table (| metric | type | labels | meaning |)")
	}
	return rows
}

// exposedFamily is one metric family of a /metrics page.
type exposedFamily struct {
	typ    string
	labels map[string]map[string]bool // label name → the values seen
}

// parseExposition reads the metric families of a Prometheus text exposition: their types from the
// # TYPE lines, their labels and values from the samples (a histogram's le and a summary's
// quantile aside).
func parseExposition(t *testing.T, page string) map[string]*exposedFamily {
	t.Helper()
	families := map[string]*exposedFamily{}
	sample := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? `)
	label := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
	for line := range strings.Lines(page) {
		line = strings.TrimRight(line, "\n")
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			families[name] = &exposedFamily{typ: typ, labels: map[string]map[string]bool{}}
			continue
		}
		m := sample.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(line, "#") {
			continue
		}
		name := m[1]
		f := families[name]
		if f == nil {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok && families[base] != nil && (families[base].typ == "histogram" || families[base].typ == "summary") {
					f = families[base]
				}
			}
		}
		if f == nil {
			t.Fatalf("/metrics: a sample of no declared family: %s", line)
		}
		for _, l := range label.FindAllStringSubmatch(m[2], -1) {
			if l[1] == "le" || l[1] == "quantile" {
				continue
			}
			if f.labels[l[1]] == nil {
				f.labels[l[1]] = map[string]bool{}
			}
			f.labels[l[1]][l[2]] = true
		}
	}
	if len(families) == 0 {
		t.Fatalf("/metrics exposes no metric family:\n%s", page)
	}
	return families
}

// TestMetricsDocumented compares the metrics table of docs/operations.md with what /metrics of
// admit serve on Redis with the admin API exports (the breaker's, the over-limit cache's and the
// admin API's series included), with admit proxy's /metrics beside it, both ways: every exported
// family is documented, with its type and labels, and every value of an enumerated label (result,
// kind, operation, state, answer, action) is named in its row; every documented name is exported.
func TestMetricsDocumented(t *testing.T) {
	useSecret(t)
	t.Setenv(adminTokenEnv, testAdminToken) // the admin API on: its counter is exported
	redis := redistest.Start(t)
	cfg := filepath.Join(t.TempDir(), "rlqs.yaml") // the RLQS service on, with a policy to label its series
	if err := os.WriteFile(cfg, []byte("policies:\n  - {name: api-global, algorithm: token_bucket, limit: 100, window: 1s}\nrlqs:\n  - {domain: mesh, buckets: [{match: {name: api}, policy: api-global}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base, _, _ := serveInProcess(t, "--redis", redis.URL(), "--admin-listen", "127.0.0.1:0", "--config", cfg, "--rlqs-listen", "127.0.0.1:0")
	checkDemo(t, base, 200) // a decision, so that the demo policy's series exist
	r := get(t, base+"/metrics")
	if r.status != 200 {
		t.Fatalf("GET /metrics: %d\n%s", r.status, r.body)
	}
	exposed := parseExposition(t, r.body)
	// admit proxy's /metrics, on its --metrics-listen, adds the proxy's own series.
	for name, f := range parseExposition(t, proxyMetrics(t, redis)) {
		if exposed[name] == nil {
			exposed[name] = f
			continue
		}
		for l, values := range f.labels {
			if exposed[name].labels[l] == nil {
				exposed[name].labels[l] = map[string]bool{}
			}
			for v := range values {
				exposed[name].labels[l][v] = true
			}
		}
	}
	// admit serve --metrics-mode envoy_compat adds envoyproxy/ratelimit's series, once a rule decided.
	for name, f := range parseExposition(t, envoyMetrics(t, redis)) {
		if strings.HasPrefix(name, "ratelimit_") {
			exposed[name] = f
		}
	}
	docs := readMetricsTable(t)

	documented := map[string]metricDoc{}
	var patterns []string
	for _, row := range docs {
		for _, name := range row.names {
			if prefix, ok := strings.CutSuffix(name, "*"); ok {
				patterns = append(patterns, prefix)
				continue
			}
			documented[name] = row
		}
	}

	names := make([]string, 0, len(exposed))
	for name := range exposed {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		f := exposed[name]
		row, ok := documented[name]
		if !ok {
			if !slices.ContainsFunc(patterns, func(p string) bool { return strings.HasPrefix(name, p) }) {
				t.Errorf("/metrics exports %s (%s), which docs/operations.md's metrics table does not list", name, f.typ)
			}
			continue
		}
		if row.typ != f.typ {
			t.Errorf("%s: docs/operations.md says type %q, /metrics %q", name, row.typ, f.typ)
		}
		var labels []string
		for l := range f.labels {
			labels = append(labels, l)
		}
		sort.Strings(labels)
		want := slices.Sorted(slices.Values(row.labels))
		if !slices.Equal(labels, want) {
			t.Errorf("%s: docs/operations.md gives the labels %q, /metrics %q", name, want, labels)
		}
		for _, l := range enumeratedLabels {
			for v := range f.labels[l] {
				if !strings.Contains(row.meaning, "`"+v+"`") {
					t.Errorf("%s{%s=%q} is exported, and docs/operations.md does not name `%s` in its row", name, l, v, v)
				}
			}
		}
	}
	for name := range documented {
		if exposed[name] == nil {
			t.Errorf("docs/operations.md lists %s, which /metrics does not export", name)
		}
	}
	for _, p := range patterns {
		if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, p) }) {
			t.Errorf("docs/operations.md lists %s*, and /metrics exports no such metric", p)
		}
	}
}

// proxyMetrics starts admit proxy on redis with --metrics-listen, sends it one request of a route
// and one of none (so that its answer series exist), and returns the page of its /metrics.
func proxyMetrics(t *testing.T, redis *redistest.Server) string {
	t.Helper()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer upstream.Close()
	p, ops := startProxyWithMetrics(t, upstream.URL, redis)
	get(t, p.base+"/api/items")
	get(t, p.base+"/unrouted")
	r := get(t, ops+"/metrics")
	if r.status != 200 {
		t.Fatalf("admit proxy's GET /metrics: %d\n%s", r.status, r.body)
	}
	return r.body
}

// envoyMetrics starts admit serve on redis with --envoy-config and --metrics-mode envoy_compat, asks its rate
// limit service one descriptor of a rule, and returns the page of its /metrics.
func envoyMetrics(t *testing.T, redis *redistest.Server) string {
	t.Helper()
	dir := t.TempDir()
	yaml := "domain: mongo_cps\ndescriptors:\n  - key: database\n    value: users\n    rate_limit:\n      unit: day\n      requests_per_unit: 2\n"
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	base, logs, _ := serveInProcess(t, "--redis", redis.URL(), "--envoy-config", dir, "--grpc-listen", "127.0.0.1:0", "--metrics-mode", "envoy_compat")
	logs.waitLine(t, "listening for gRPC")
	m := grpcListeningRE.FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no gRPC address in the log:\n%s", logs)
	}
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "mongo_cps", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "database", Value: "users"}},
	}}})
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	r := get(t, base+"/metrics")
	if r.status != 200 {
		t.Fatalf("GET /metrics: %d\n%s", r.status, r.body)
	}
	return r.body
}
