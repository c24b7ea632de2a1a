package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// A header is what BENCHMARKS.md says about the run before its tables.
type header struct {
	date     string   // YYYY-MM-DD, UTC
	machine  string   // cores, CPU model, memory
	goVer    string   // e.g. "go1.26.8 linux/amd64"
	redis    string   // e.g. "7.0.15", or why it is unknown
	commands []string // the exact commands that produced the input, in order
	chart    string   // path of the chart relative to BENCHMARKS.md; "" for none
}

// docs maps a package (relative, as in group.pkg) and a benchmark function name to the first
// paragraph of the function's doc comment.
type docs map[string]map[string]string

// renderMarkdown writes the generated part of BENCHMARKS.md: the header, then one table per
// comparison group. It writes no "## " heading: every "## " section of BENCHMARKS.md is a
// hand-written one that the next run keeps.
func renderMarkdown(w io.Writer, h header, gs []*group, d docs) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("# Benchmarks\n\n")
	p("Written by `make bench` (scripts/bench.sh, through internal/tools/benchreport) on %s, from one run on one\n", h.date)
	p("machine: compare ratios, not absolute figures, across machines. Everything above the first hand-written\n")
	p("section (a \"## \" heading) is generated; those sections are kept as they are.\n\n")
	p("- machine: %s\n", h.machine)
	p("- go: %s\n", h.goVer)
	p("- redis-server: %s, started by the test harness on loopback, no persistence, on the same machine as the\n", h.redis)
	p("  benchmarks (so Redis-bound rows measure both)\n")
	if len(h.commands) == 1 {
		p("- command: `%s`\n", h.commands[0])
	} else if len(h.commands) > 1 {
		p("- commands:\n")
		for _, c := range h.commands {
			p("  - `%s`\n", c)
		}
	}
	p("\n")
	p("Benchmarks are grouped by package and by comparison group: `Benchmark<Group>_<Series>` belongs to group\n")
	p("<Group>, measured against `Benchmark<Group>_Reference<Name>`; a name without an underscore belongs to the\n")
	p("package's default group, measured against `BenchmarkReference<Name>`. *callers* is the number of goroutines\n")
	p("calling at once (`/callers=N`). *vs reference* is the row's throughput (decisions/s, or 10⁹ ÷ ns/op) divided by\n")
	p("its reference's at the same callers, measured in the same run: 1.00 is as fast as the reference, 2.00 twice as\n")
	p("fast.")
	switch lo, hi := runsRange(gs); {
	case lo == hi && hi > 1:
		p(" Each figure is the median of %d runs.", hi)
	case lo != hi:
		p(" Each figure is the median of its runs (%d to %d).", lo, hi)
	}
	p("\n")
	if h.chart != "" {
		p("\n![Decisions per second against callers, one panel per comparison group](%s)\n", h.chart)
	}
	for _, g := range gs {
		renderGroup(w, g, d[g.pkg])
	}
}

// runsRange returns the fewest and the most runs a row's figures are the medians of (-count).
func runsRange(gs []*group) (lo, hi int) {
	for _, g := range gs {
		for _, r := range g.rows {
			if lo == 0 || r.runs < lo {
				lo = r.runs
			}
			hi = max(hi, r.runs)
		}
	}
	return lo, hi
}

func renderGroup(w io.Writer, g *group, d map[string]string) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("\n### %s\n\n", g.title())
	refs := g.references()
	switch len(refs) {
	case 0:
		if g.concurrent() {
			p("No reference in this group (no `Benchmark%sReference…`): no ratios.\n\n", groupPrefix(g))
		}
	case 1:
		p("Reference: `%s`.\n\n", refs[0])
	default:
		p("References: `%s`; each row is measured against the one whose sub-benchmark elements it shares.\n\n", strings.Join(refs, "`, `"))
	}
	cols := append([]string{"benchmark", "callers"}, fixedUnits...)
	cols = append(cols, g.extras...)
	// A throughput ratio compares callers at work; a group without them (memory, or script cost
	// measured interleaved with its reference) states its own ratios, if any, as metrics.
	showRatio := len(refs) > 0 && g.concurrent()
	if showRatio {
		cols = append(cols, "vs reference")
	}
	p("| %s |\n", strings.Join(cols, " | "))
	p("|---|%s\n", strings.Repeat("---:|", len(cols)-1))
	for _, r := range g.rows {
		cells := []string{cell(r.series), "—"}
		if r.callers > 0 {
			cells[1] = strconv.Itoa(r.callers)
		}
		for _, u := range append(append([]string{}, fixedUnits...), g.extras...) {
			v, ok := r.metrics[u]
			if u == unitRate && !ok {
				v, ok = r.rate()
			}
			if ok {
				cells = append(cells, number(v))
			} else {
				cells = append(cells, "—")
			}
		}
		switch ratio, ok := r.ratio(); {
		case !showRatio:
		case r.ref:
			cells = append(cells, "(reference)")
		case ok:
			cells = append(cells, fmt.Sprintf("%.2f", ratio))
		default:
			cells = append(cells, "—")
		}
		p("| %s |\n", strings.Join(cells, " | "))
	}
	var notes []string
	seen := map[string]bool{}
	for _, r := range g.rows {
		fn := "Benchmark" + groupPrefix(g) + r.top
		if seen[fn] || d[fn] == "" {
			continue
		}
		seen[fn] = true
		text := d[fn]
		if rest, ok := strings.CutPrefix(text, fn+" "); ok {
			text = "**" + r.top + "** " + rest
		} else {
			text = "**" + r.top + "**: " + text
		}
		notes = append(notes, "- "+text)
	}
	if len(notes) > 0 {
		p("\n%s\n", strings.Join(notes, "\n"))
	}
}

func groupPrefix(g *group) string {
	if g.name == "" {
		return ""
	}
	return g.name + "_"
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// number formats a figure for a table: whole numbers (and every figure from 100 up, rounded) with
// thousands separators; three significant digits for the others.
func number(v float64) string {
	switch a := math.Abs(v); {
	case v == 0:
		return "0"
	case a >= 100 || v == math.Trunc(v):
		return thousands(strconv.FormatFloat(math.Round(v), 'f', 0, 64))
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

func thousands(digits string) string {
	neg := strings.HasPrefix(digits, "-")
	digits = strings.TrimPrefix(digits, "-")
	var b strings.Builder
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
