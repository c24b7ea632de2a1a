package main

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Units every table has a column for; any other unit a benchmark reports (b.ReportMetric, b.SetBytes)
// becomes a column of its own after these.
const (
	unitNs     = "ns/op"
	unitRate   = "decisions/s"
	unitBytes  = "B/op"
	unitAllocs = "allocs/op"
)

var fixedUnits = []string{unitNs, unitRate, unitBytes, unitAllocs}

var callersElem = regexp.MustCompile(`^callers=([0-9]+)$`)

// A row is one benchmark at one concurrency level: the median of its runs (several with -count).
type row struct {
	series  string   // name shown in the table: the top-level name after the group, plus sub-benchmark elements
	top     string   // the top-level name after "Benchmark" and the group, e.g. "ReferenceRueidis"
	sub     []string // sub-benchmark elements other than callers=N, e.g. ["alg=gcra"]
	callers int      // the N of a final "/callers=N"; 0 when the benchmark has none
	ref     bool     // the row belongs to one of its group's references
	runs    int      // how many results the medians are over
	metrics map[string]float64
	order   int // first appearance in the input

	// Filled in by compare: the reference row this row is measured against, if any.
	against *row
}

// rate is the row's throughput: its decisions/s metric, or 10⁹ / ns/op for benchmarks that report
// none. ok is false when neither is there.
func (r *row) rate() (float64, bool) {
	if v, ok := r.metrics[unitRate]; ok {
		return v, true
	}
	if ns, ok := r.metrics[unitNs]; ok && ns > 0 {
		return 1e9 / ns, true
	}
	return 0, false
}

// ratio is the row's throughput divided by its reference's, when both are known.
func (r *row) ratio() (float64, bool) {
	if r.against == nil {
		return 0, false
	}
	a, ok1 := r.rate()
	b, ok2 := r.against.rate()
	if !ok1 || !ok2 || b == 0 {
		return 0, false
	}
	return a / b, true
}

// A group is one comparison group of one package: one table and one panel of the chart.
type group struct {
	pkg    string // package path relative to the module, e.g. "memstore", "bench"
	name   string // "" for the package's default group
	rows   []*row // in table order: the reference series first, then the others, each by callers
	extras []string
	warns  []string
}

// title names the group in headings and in the chart.
func (g *group) title() string {
	if g.name == "" {
		return g.pkg
	}
	return g.pkg + ": " + g.name
}

// concurrent reports whether the group has a benchmark run from several callers (/callers=N), which
// is meant to be compared with a reference; a group of other figures (memory per key) may have none.
func (g *group) concurrent() bool {
	for _, r := range g.rows {
		if r.callers > 0 {
			return true
		}
	}
	return false
}

// references lists the distinct reference series of the group, in table order.
func (g *group) references() []string {
	var names []string
	for _, r := range g.rows {
		if r.ref && !slices.Contains(names, r.series) {
			names = append(names, r.series)
		}
	}
	return names
}

// A splitName is a benchmark name taken apart by the naming rule.
type splitName struct {
	group   string
	top     string
	sub     []string
	callers int
}

// split applies the naming rule to a benchmark name without its -GOMAXPROCS suffix:
// Benchmark<Group>_<Series>[/element…][/callers=N], or Benchmark<Series>[/element…][/callers=N] for
// the package's default group.
func split(name string) (splitName, error) {
	elems := strings.Split(strings.TrimPrefix(name, "Benchmark"), "/")
	var s splitName
	if elems[0] == "" {
		return s, fmt.Errorf("%s: no name after \"Benchmark\"", name)
	}
	if m := callersElem.FindStringSubmatch(elems[len(elems)-1]); m != nil && len(elems) > 1 {
		n, err := strconv.Atoi(m[1])
		if err != nil || n <= 0 {
			return s, fmt.Errorf("%s: callers must be a positive integer", name)
		}
		s.callers = n
		elems = elems[:len(elems)-1]
	}
	s.top = elems[0]
	if g, series, ok := strings.Cut(elems[0], "_"); ok {
		if g == "" || series == "" {
			return s, fmt.Errorf("%s: a comparison group's benchmark is named Benchmark<Group>_<Series>, both non-empty", name)
		}
		s.group, s.top = g, series
	}
	s.sub = elems[1:]
	return s, nil
}

// groups sorts the results into comparison groups, package by package in the order they ran, each
// row the median of its runs, and pairs every row with its reference (compare).
func groups(results []result, module string) ([]*group, error) {
	type key struct{ pkg, name string }
	var (
		order  []*group
		byKey  = map[key]*group{}
		rowsOf = map[key]*row{} // by package and full name
		procs  = map[key]int{}
		values = map[*row]map[string][]float64{}
	)
	for i, res := range results {
		pkg := relativePackage(res.pkg, module)
		s, err := split(res.name)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", res.line, err)
		}
		full := key{pkg, res.name}
		if p, ok := procs[full]; ok && p != res.procs {
			return nil, fmt.Errorf("line %d: %s ran with GOMAXPROCS %d and %d; benchreport compares one -cpu setting per run", res.line, res.name, p, res.procs)
		}
		procs[full] = res.procs
		g := byKey[key{pkg, s.group}]
		if g == nil {
			g = &group{pkg: pkg, name: s.group}
			byKey[key{pkg, s.group}] = g
			order = append(order, g)
		}
		r := rowsOf[full]
		if r == nil {
			series := strings.Join(append([]string{s.top}, s.sub...), "/")
			r = &row{series: series, top: s.top, sub: s.sub, callers: s.callers, ref: strings.HasPrefix(s.top, "Reference"), order: i}
			rowsOf[full] = r
			values[r] = map[string][]float64{}
			g.rows = append(g.rows, r)
		}
		r.runs++
		for _, m := range res.metrics {
			values[r][m.unit] = append(values[r][m.unit], m.value)
			if !slices.Contains(fixedUnits, m.unit) && !slices.Contains(g.extras, m.unit) {
				g.extras = append(g.extras, m.unit)
			}
		}
	}
	for r, byUnit := range values {
		r.metrics = make(map[string]float64, len(byUnit))
		for unit, vs := range byUnit {
			r.metrics[unit] = median(vs)
		}
	}
	for _, g := range order {
		arrange(g)
		compare(g)
	}
	return order, nil
}

// relativePackage names a package by its path inside the module: "memstore", "bench"; the module's
// root package is "admit" (the last element of the module path).
func relativePackage(path, module string) string {
	if module == "" {
		return path
	}
	if path == module {
		return module[strings.LastIndex(module, "/")+1:]
	}
	if rest, ok := strings.CutPrefix(path, module+"/"); ok {
		return rest
	}
	return path
}

// arrange puts a group's rows in table order: series by series, the references first, each series
// in the order it first ran, and within a series by callers (none first).
func arrange(g *group) {
	first := map[string]int{}
	for _, r := range g.rows {
		if o, ok := first[r.series]; !ok || r.order < o {
			first[r.series] = r.order
		}
	}
	sort.SliceStable(g.rows, func(i, j int) bool {
		a, b := g.rows[i], g.rows[j]
		if a.ref != b.ref {
			return a.ref
		}
		if first[a.series] != first[b.series] {
			return first[a.series] < first[b.series]
		}
		return a.callers < b.callers
	})
}

// compare pairs each row that is not a reference with the reference row of its group at the same
// callers. When the group has several reference series, the row takes the one whose sub-benchmark
// elements it shares most specifically: a reference's elements must all be among the row's (so
// ".../keys=hot" rows go with a ".../keys=hot" reference, and a reference without elements fits
// every row); of equally specific ones the first wins, with a warning.
func compare(g *group) {
	warned := map[string]bool{}
	haveRef := false
	for _, r := range g.rows {
		if r.ref {
			haveRef = true
			break
		}
	}
	if !haveRef {
		if g.concurrent() {
			g.warns = append(g.warns, fmt.Sprintf("%s has benchmarks with callers but no Reference benchmark: its rows have no ratio", g.title()))
		}
		return
	}
	for _, r := range g.rows {
		if r.ref {
			continue
		}
		var best []*row
		for _, c := range g.rows {
			if !c.ref || c.callers != r.callers || !subset(c.sub, r.sub) {
				continue
			}
			switch {
			case len(best) == 0 || len(c.sub) > len(best[0].sub):
				best = []*row{c}
			case len(c.sub) == len(best[0].sub):
				best = append(best, c)
			}
		}
		if len(best) == 0 {
			continue
		}
		r.against = best[0]
		if len(best) > 1 && !warned[r.series] {
			warned[r.series] = true
			g.warns = append(g.warns, fmt.Sprintf("%s: %s fits several references equally; compared with %s", g.title(), r.series, best[0].series))
		}
	}
}

func subset(small, big []string) bool {
	for _, e := range small {
		if !slices.Contains(big, e) {
			return false
		}
	}
	return true
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
