package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata from the current output")

const module = "github.com/admit-dev/admit"

// fixedHeader stands in for what main finds out about the machine, so the golden file depends on
// the input alone.
var fixedHeader = header{
	date:    "2026-11-30",
	machine: "2 cores, Intel(R) Xeon(R) Processor, 23 GiB",
	goVer:   "go1.26.8 linux/amd64",
	redis:   "7.0.15",
	commands: []string{
		"ADMIT_REQUIRE_REDIS=1 go test -run '^$' -bench . -benchmem -benchtime 2s -count 1 ./memstore ./httplimit",
		"cd bench && ADMIT_REQUIRE_REDIS=1 go test -run '^$' -bench . -benchmem -benchtime 2s -count 1 .",
	},
	chart: "docs/bench-throughput.svg",
}

// report renders testdata/sample.txt (real output of memstore, httplimit, redisstore and bench,
// then made-up comparison groups for the bench module) as main would.
func report(t *testing.T) (md, svg []byte) {
	t.Helper()
	in, err := os.Open("testdata/sample.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	parsed, err := parse(in)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := groups(parsed.results, module)
	if err != nil {
		t.Fatal(err)
	}
	d, err := readDocs("testdata/module", gs)
	if err != nil {
		t.Fatal(err)
	}
	var m, s bytes.Buffer
	renderMarkdown(&m, fixedHeader, gs, d)
	renderSVG(&s, chartPanels(gs))
	return m.Bytes(), s.Bytes()
}

// The report of the sample is the checked-in one (go test -run Golden -update rewrites it after a
// deliberate change; look at the diff).
func TestGolden(t *testing.T) {
	md, svg := report(t)
	for _, g := range []struct {
		path string
		have []byte
	}{{"testdata/sample.md", md}, {"testdata/sample.svg", svg}} {
		if *update {
			if err := os.WriteFile(g.path, g.have, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(g.path)
		if err != nil {
			t.Fatalf("%v (run go test -update once to create it)", err)
		}
		if !bytes.Equal(g.have, want) {
			t.Errorf("%s differs from what benchreport writes now (go test -update rewrites it); now:\n%s", g.path, g.have)
		}
	}
}

// The chart is well-formed XML with one panel (group) per comparison group that has a curve.
func TestChartIsWellFormed(t *testing.T) {
	_, svg := report(t)
	dec := xml.NewDecoder(bytes.NewReader(svg))
	panels := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "g" {
			panels++
		}
	}
	if panels != 5 { // memstore, httplimit, bench, bench: InProcess, bench: ScriptCost
		t.Errorf("%d panels, want 5", panels)
	}
}

// The same input gives the same bytes, every time.
func TestDeterministic(t *testing.T) {
	md1, svg1 := report(t)
	for range 5 {
		md2, svg2 := report(t)
		if !bytes.Equal(md1, md2) || !bytes.Equal(svg1, svg2) {
			t.Fatal("two reports of the same input differ")
		}
	}
}

// The sample's report shows what the brief asks for: a table per comparison group, extra units as
// columns of their group only, ratios against the right reference, and each group in the chart.
func TestReportContents(t *testing.T) {
	md, svg := report(t)
	text := string(md)
	for _, want := range []string{
		"### memstore\n", "### httplimit\n", "### redisstore\n", "### bench\n",
		"### bench: InProcess\n", "### bench: ScriptCost\n", "### bench: FlushDelay\n",
		"| benchmark | callers | ns/op | decisions/s | B/op | allocs/op | peak-entries | peak-heap-MiB | bytes/key | vs reference |",
		"| benchmark | callers | ns/op | decisions/s | B/op | allocs/op | redis-cpu-us/op | vs reference |",
		"| ReferenceShardedMap | 16 | 144 | 6,931,016 | 0 | 0 | — | — | — | (reference) |",
		// 3,607,282 / 6,931,016 decisions/s
		"| Take | 16 | 277 | 3,607,282 | 6 | 0 | — | — | — | 0.52 |",
		"| KeyMemory/sliding_log | — |",
		"- **ReferenceShardedMap** is the reference: a bare map in 64 shards, each behind a mutex, with the same keys.",
		"- **Memstore** runs admit's memstore on many keys or one hot key.",
		"- **KeyMemory** reports the live heap per key.\n",
		// A group of figures without callers and without a reference: no ratio column, no complaint.
		"### redisstore\n\n| benchmark | callers | ns/op | decisions/s | B/op | allocs/op | bytes/key |\n",
		"No reference in this group (no `BenchmarkFlushDelay_Reference…`): no ratios.",
		"- **ReferenceMinimal**: A doc comment that does not start with the function's name.",
		"- command", "`cd bench && ADMIT_REQUIRE_REDIS=1 go test",
		"Each figure is the median of its runs (1 to 2).",
		"![Decisions per second against callers, one panel per comparison group](docs/bench-throughput.svg)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if strings.Contains(text, "\n## ") {
		t.Error(`the generated part has a "## " heading, which the next run would keep as hand-written`)
	}
	if strings.Contains(text, "This second paragraph") || strings.Contains(text, "**TakeHotKey**") {
		t.Error("a note shows more than the first paragraph of a doc comment, or a benchmark without one")
	}
	for _, want := range []string{">memstore<", ">bench: InProcess<", ">bench: ScriptCost<", ">Memstore/keys=hot<", ">ReferenceShardedMap/keys=many (reference)<"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("the chart lacks %q", want)
		}
	}
	// One callers value only, no curve: FlushDelay and the benchmarks without callers get no panel.
	for _, unwanted := range []string{"FlushDelay", "redisstore", "KeyMemory"} {
		if bytes.Contains(svg, []byte(unwanted)) {
			t.Errorf("the chart has %q, which has no line to draw", unwanted)
		}
	}
}

// Every row of a group with a reference is compared with it at its own callers; in InProcess each
// keys=… series with the reference of the same keys, and the ratios are the medians' ratios.
func TestRatiosPairTheRightRows(t *testing.T) {
	in, _ := os.ReadFile("testdata/sample.txt")
	parsed, err := parse(bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	gs, err := groups(parsed.results, module)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, g := range gs {
		if g.pkg != "bench" || g.name != "InProcess" {
			continue
		}
		if len(g.warns) > 0 {
			t.Errorf("warnings: %q", g.warns)
		}
		for _, r := range g.rows {
			if r.ref {
				continue
			}
			seen++
			if r.against == nil {
				t.Fatalf("%s callers=%d has no reference", r.series, r.callers)
			}
			if r.against.callers != r.callers || r.against.sub[0] != r.sub[0] || r.runs != 2 {
				t.Errorf("%s callers=%d (%d runs) compared with %s callers=%d", r.series, r.callers, r.runs, r.against.series, r.against.callers)
			}
		}
	}
	if seen != 18 {
		t.Errorf("checked %d InProcess rows, want 18", seen)
	}
}

// A failed run must not become a BENCHMARKS.md with rows missing: the output of a go test whose
// benchmark failed (captured from the bench module) is refused.
func TestFailedRunIsRefused(t *testing.T) {
	in, err := os.Open("testdata/failed.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	_, err = parse(in)
	if err == nil || !strings.Contains(err.Error(), "the benchmarks failed") || !strings.Contains(err.Error(), "BenchmarkPreviousScriptRueidis") {
		t.Fatalf("parse of a failed run: %v; want an error naming the failed benchmark", err)
	}
}

// End to end, as scripts/bench.sh calls it: the hand-written sections of an existing BENCHMARKS.md
// survive byte for byte, run after run; the chart is written beside it; a bad input leaves both
// files alone.
func TestRunKeepsHandWrittenSections(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "BENCHMARKS.md")
	chart := filepath.Join(dir, "docs", "chart.svg")
	if err := os.MkdirAll(filepath.Dir(chart), 0o755); err != nil {
		t.Fatal(err)
	}
	hand := "## memstore under a key flood\n\nMeasured by hand.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n## Another section\n\n```sh\ngo test\n```\n"
	old := "# Benchmarks\n\nan old generated table\n\n| x |\n|---|\n\n" + hand
	if err := os.WriteFile(out, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-in", "testdata/sample.txt", "-o", out, "-svg", chart, "-module", module, "-src", "testdata/module",
		"-cmd", "go test -bench . ./memstore"}
	var stderr bytes.Buffer
	for i := range 2 {
		if err := run(args, nil, &stderr); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, stderr.String())
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(got), "# Benchmarks\n") || !strings.HasSuffix(string(got), "\n\n"+hand) {
			t.Fatalf("run %d: BENCHMARKS.md does not end with the hand-written sections:\n%s", i, got)
		}
		if strings.Contains(string(got), "an old generated table") {
			t.Fatalf("run %d: the old generated part survived", i)
		}
		if !strings.Contains(string(got), "](docs/chart.svg)") || !strings.Contains(string(got), "- command: `go test -bench . ./memstore`") {
			t.Fatalf("run %d: no link to the chart or no command:\n%s", i, got)
		}
	}
	if _, err := os.Stat(chart); err != nil {
		t.Fatalf("no chart: %v", err)
	}
	before, _ := os.ReadFile(out)
	bad := append([]string{}, args...)
	bad[1] = "testdata/failed.txt"
	if err := run(bad, nil, &stderr); err == nil {
		t.Fatal("run on a failed benchmark output succeeded")
	}
	after, _ := os.ReadFile(out)
	if !bytes.Equal(before, after) {
		t.Fatal("a failed run changed BENCHMARKS.md")
	}
}

func TestKeptPart(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"# Benchmarks\n\n| x |\n", ""},
		{"# Benchmarks\n\n### memstore\n\n## Kept\ntext\n", "## Kept\ntext\n"},
		{"## Only hand-written\n", "## Only hand-written\n"},
		{"# B\n##no space\n## Real\n", "## Real\n"},
	} {
		if got := keptPart(c.in); got != c.want {
			t.Errorf("keptPart(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestRunRejectsBadArguments(t *testing.T) {
	var stderr bytes.Buffer
	if err := run([]string{"-module", module, "stray"}, nil, &stderr); err == nil || !strings.Contains(err.Error(), "unexpected arguments") {
		t.Errorf("a stray argument: %v", err)
	}
	if err := run([]string{"-module", module, "-in", filepath.Join(t.TempDir(), "missing.txt")}, nil, &stderr); err == nil {
		t.Error("a missing input file was accepted")
	}
	if err := run([]string{"-src", t.TempDir(), "-in", "testdata/sample.txt"}, nil, &stderr); err == nil || !strings.Contains(err.Error(), "-module") {
		t.Errorf("no go.mod and no -module: %v", err)
	}
}

func TestMachineFacts(t *testing.T) {
	if got := parseRedisVersion("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=2260280010e18db8\n"); got != "7.0.15" {
		t.Errorf("parseRedisVersion = %q", got)
	}
	if got := memTotal("24576000 kB"); got != "23 GiB" {
		t.Errorf("memTotal = %q", got)
	}
	if got := memTotal("garbage"); got != "" {
		t.Errorf("memTotal(garbage) = %q", got)
	}
	if got := machine("Some CPU"); !strings.Contains(got, "cores, Some CPU") {
		t.Errorf("machine = %q", got)
	}
}
