package main

import (
	"strings"
	"testing"
)

func TestSplitFollowsTheNamingRule(t *testing.T) {
	for _, c := range []struct {
		name, group, top, sub string
		callers               int
	}{
		{"BenchmarkTake/callers=16", "", "Take", "", 16},
		{"BenchmarkReferenceShardedMap/callers=1", "", "ReferenceShardedMap", "", 1},
		{"BenchmarkKeyFlood", "", "KeyFlood", "", 0},
		{"BenchmarkKeyMemory/sliding_log/entries=100", "", "KeyMemory", "sliding_log/entries=100", 0},
		{"BenchmarkScriptCost_Take/alg=gcra/callers=256", "ScriptCost", "Take", "alg=gcra", 256},
		{"BenchmarkInProcess_ReferenceShardedMap/keys=hot/callers=16", "InProcess", "ReferenceShardedMap", "keys=hot", 16},
		{"BenchmarkClient_Flush_Delay/callers=1", "Client", "Flush_Delay", "", 1},
		{"BenchmarkX/callers=16/alg=gcra", "", "X", "callers=16/alg=gcra", 0}, // callers=N counts only last
		{"Benchmarkcallers=4", "", "callers=4", "", 0},
	} {
		s, err := split(c.name)
		if err != nil {
			t.Errorf("split(%q): %v", c.name, err)
			continue
		}
		if s.group != c.group || s.top != c.top || strings.Join(s.sub, "/") != c.sub || s.callers != c.callers {
			t.Errorf("split(%q) = %+v; want group %q top %q sub %q callers %d", c.name, s, c.group, c.top, c.sub, c.callers)
		}
	}
	for _, bad := range []string{"Benchmark", "Benchmark/callers=1", "Benchmark_Take", "BenchmarkGroup_/callers=1", "BenchmarkX/callers=0"} {
		if _, err := split(bad); err == nil {
			t.Errorf("split(%q) accepted a name the rule does not allow", bad)
		}
	}
}

func mustGroups(t *testing.T, input string) []*group {
	t.Helper()
	parsed, err := parse(strings.NewReader(input))
	if err != nil {
		t.Fatal(err)
	}
	gs, err := groups(parsed.results, module)
	if err != nil {
		t.Fatal(err)
	}
	return gs
}

func find(t *testing.T, gs []*group, group, series string, callers int) *row {
	t.Helper()
	for _, g := range gs {
		for _, r := range g.rows {
			if g.name == group && r.series == series && r.callers == callers {
				return r
			}
		}
	}
	t.Fatalf("no row %s %s callers=%d", group, series, callers)
	return nil
}

// Medians over -count runs; ratios of throughputs at the same callers; ns/op stands in for a
// missing decisions/s; a row without callers is not compared with a reference that has them.
func TestMediansAndRatios(t *testing.T) {
	gs := mustGroups(t, `pkg: github.com/admit-dev/admit/memstore
BenchmarkTake/callers=1-2     100  400 ns/op  2500000 decisions/s
BenchmarkTake/callers=1-2     100  500 ns/op  2000000 decisions/s
BenchmarkTake/callers=1-2     100  900 ns/op  1111111 decisions/s
BenchmarkReferenceMap/callers=1-2  100  100 ns/op
BenchmarkReferenceMap/callers=16-2 100  50 ns/op
BenchmarkTake/callers=16-2    100  200 ns/op  5000000 decisions/s
BenchmarkKeyMemory-2          1    1000000000 ns/op  140 bytes/key
`)
	take := find(t, gs, "", "Take", 1)
	if take.runs != 3 || take.metrics[unitNs] != 500 || take.metrics[unitRate] != 2000000 {
		t.Errorf("Take callers=1: %d runs, %v", take.runs, take.metrics)
	}
	if ratio, ok := take.ratio(); !ok || ratio != 0.2 {
		t.Errorf("Take callers=1 ratio %v %v; want 2,000,000 / 10,000,000 = 0.2", ratio, ok)
	}
	if ratio, ok := find(t, gs, "", "Take", 16).ratio(); !ok || ratio != 0.25 {
		t.Errorf("Take callers=16 ratio %v %v; want 0.25", ratio, ok)
	}
	if _, ok := find(t, gs, "", "KeyMemory", 0).ratio(); ok {
		t.Error("KeyMemory, without callers, got a ratio against a reference measured with callers")
	}
	// Table order: the reference series first, then the others as they first ran, each by callers.
	var order []string
	for _, r := range gs[0].rows {
		order = append(order, r.series)
	}
	if got := strings.Join(order, " "); got != "ReferenceMap ReferenceMap Take Take KeyMemory" {
		t.Errorf("row order %q", got)
	}
}

// Several comparison groups in one package, each with its own reference; a group without one gets a
// warning and no ratios; a row that fits two references equally takes the first, with a warning.
func TestGroupsAndReferences(t *testing.T) {
	gs := mustGroups(t, `pkg: github.com/admit-dev/admit/bench
BenchmarkReferenceRueidis/callers=1-2       100  1000 ns/op
BenchmarkAdmitRedisstore/callers=1-2        100  2000 ns/op
BenchmarkInProcess_ReferenceMap/keys=hot/callers=1-2   100  100 ns/op
BenchmarkInProcess_ReferenceMap/keys=many/callers=1-2  100  50 ns/op
BenchmarkInProcess_Memstore/keys=hot/callers=1-2       100  400 ns/op
BenchmarkInProcess_Memstore/keys=many/callers=1-2      100  100 ns/op
BenchmarkTwoRefs_ReferenceA/callers=1-2  100  100 ns/op
BenchmarkTwoRefs_ReferenceB/callers=1-2  100  200 ns/op
BenchmarkTwoRefs_Thing/callers=1-2       100  400 ns/op
BenchmarkNoRef_Thing/callers=1-2         100  400 ns/op
BenchmarkMemory_Usage/alg=gcra-2         1  1000 ns/op  104 B/key
`)
	if len(gs) != 5 {
		t.Fatalf("%d groups, want 5 (default, InProcess, TwoRefs, NoRef, Memory)", len(gs))
	}
	if len(gs[4].warns) != 0 {
		t.Errorf("a group of figures without callers needs no reference, but got warnings %q", gs[4].warns)
	}
	if r := find(t, gs, "", "AdmitRedisstore", 1); r.against == nil || r.against.series != "ReferenceRueidis" {
		t.Error("the default group's row is not compared with BenchmarkReferenceRueidis")
	}
	if r, _ := find(t, gs, "InProcess", "Memstore/keys=hot", 1).ratio(); r != 0.25 {
		t.Errorf("Memstore/keys=hot ratio %v; want 0.25 (against ReferenceMap/keys=hot)", r)
	}
	if r, _ := find(t, gs, "InProcess", "Memstore/keys=many", 1).ratio(); r != 0.5 {
		t.Errorf("Memstore/keys=many ratio %v; want 0.5 (against ReferenceMap/keys=many)", r)
	}
	if r := find(t, gs, "TwoRefs", "Thing", 1); r.against == nil || r.against.series != "ReferenceA" {
		t.Error("a row fitting two references is not compared with the first")
	}
	if !strings.Contains(strings.Join(gs[2].warns, ";"), "several references") {
		t.Errorf("TwoRefs warnings %q", gs[2].warns)
	}
	if r := find(t, gs, "NoRef", "Thing", 1); r.against != nil {
		t.Error("a group without a reference compared a row with something")
	}
	if !strings.Contains(strings.Join(gs[3].warns, ";"), "no Reference") {
		t.Errorf("NoRef warnings %q", gs[3].warns)
	}
}

func TestParseReadsEveryShapeOfResultLine(t *testing.T) {
	parsed, err := parse(strings.NewReader(`goos: linux
pkg: github.com/admit-dev/admit
cpu: Some CPU @ 2.0GHz
BenchmarkA-16   1000   12.5 ns/op   3 B/op   1 allocs/op   7.25 p99-us   100 MB/s
BenchmarkB
    b_test.go:12: a log line
  2000   30 ns/op
BenchmarkC-2   some text the benchmark printed
   500   40 ns/op
--- BENCH: BenchmarkC-2
    c_test.go:3: logged
BenchmarkD   300   9 ns/op
PASS
ok   github.com/admit-dev/admit  1.0s
`))
	if err != nil {
		t.Fatal(err)
	}
	if parsed.cpu != "Some CPU @ 2.0GHz" || len(parsed.results) != 4 {
		t.Fatalf("cpu %q, %d results", parsed.cpu, len(parsed.results))
	}
	a := parsed.results[0]
	if a.name != "BenchmarkA" || a.procs != 16 || len(a.metrics) != 5 || a.metrics[3] != (metric{7.25, "p99-us"}) {
		t.Errorf("A: %+v", a)
	}
	if b := parsed.results[1]; b.name != "BenchmarkB" || b.procs != 1 || b.metrics[0] != (metric{30, "ns/op"}) {
		t.Errorf("B: %+v", b)
	}
	if c := parsed.results[2]; c.name != "BenchmarkC" || c.metrics[0].value != 40 {
		t.Errorf("C: %+v", c)
	}
	gs, err := groups(parsed.results, module)
	if err != nil {
		t.Fatal(err)
	}
	if gs[0].pkg != "admit" || strings.Join(gs[0].extras, " ") != "p99-us MB/s" {
		t.Errorf("package %q, extra units %q", gs[0].pkg, gs[0].extras)
	}
}

func TestParseRejectsBadInput(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "no benchmark results"},
		{"PASS\nok x 1s\n", "no benchmark results"},
		{"BenchmarkA-2 100 5 ns/op\n", `before any "pkg:" line`},
		{"pkg: p\nBenchmarkA-2 100 five ns/op\n", `line 2: BenchmarkA-2: value "five" of ns/op is not a number`},
		{"pkg: p\nBenchmarkA-2 100 5 ns/op 7\n", "line 2: BenchmarkA-2: want an iteration count and value-unit pairs"},
		{"pkg: p\nBenchmarkA-2 100 5 ns/op\n--- FAIL: BenchmarkB\n", "line 3: the benchmarks failed: --- FAIL: BenchmarkB"},
		{"pkg: p\nBenchmarkA-2 100 5 ns/op\nFAIL\tp\t1s\n", "the benchmarks failed"},
		{"pkg: p\npanic: boom\n", "the benchmarks failed: panic: boom"},
	} {
		_, err := parse(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parse(%q): %v; want an error with %q", c.in, err, c.want)
		}
	}
}

func TestGroupsRejectsMixedGOMAXPROCSAndBadNames(t *testing.T) {
	parsed, err := parse(strings.NewReader("pkg: p\nBenchmarkA-2 100 5 ns/op\nBenchmarkA-4 100 5 ns/op\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := groups(parsed.results, module); err == nil || !strings.Contains(err.Error(), "GOMAXPROCS 2 and 4") {
		t.Errorf("mixed -cpu: %v", err)
	}
	parsed, err = parse(strings.NewReader("pkg: p\nBenchmark_A-2 100 5 ns/op\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := groups(parsed.results, module); err == nil || !strings.Contains(err.Error(), "line 2: Benchmark_A") {
		t.Errorf("bad name: %v", err)
	}
}

func TestNumber(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{{0, "0"}, {0.0123, "0.0123"}, {1.5, "1.50"}, {8, "8"}, {12.34, "12.3"}, {6.5, "6.50"}, {287.3, "287"}, {71006, "71,006"}, {1432523722, "1,432,523,722"}, {-1234, "-1,234"}} {
		if got := number(c.v); got != c.want {
			t.Errorf("number(%v) = %q, want %q", c.v, got, c.want)
		}
	}
	for _, c := range []struct {
		v    float64
		want string
	}{{0, "0"}, {500, "500"}, {20000, "20k"}, {1.5e6, "1.5M"}, {0.6000000000000001, "0.6"}} {
		if got := si(c.v); got != c.want {
			t.Errorf("si(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}
