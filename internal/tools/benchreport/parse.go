package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// A result is one line of `go test -bench` output: one run of one benchmark.
type result struct {
	pkg     string // import path from the preceding "pkg:" line
	name    string // full name without the -GOMAXPROCS suffix, e.g. "BenchmarkTake/callers=16"
	procs   int    // GOMAXPROCS the benchmark ran with (the -N suffix; 1 when absent)
	line    int    // line number in the input, for error messages
	metrics []metric
}

// A metric is one value-unit pair of a result line: "459.0 ns/op", "142.8 bytes/key".
type metric struct {
	value float64
	unit  string
}

// A benchOutput is everything benchreport reads from the raw output of one or more `go test -bench`
// invocations.
type benchOutput struct {
	results []result
	cpu     string // the first "cpu:" line go test printed, if any
}

var procsSuffix = regexp.MustCompile(`-([0-9]+)$`)

// parse reads the concatenated output of `go test -bench` runs. Lines that are not results (PASS,
// ok, logs) are skipped; a failed benchmark or package, or a result line that cannot be read, is an
// error, so that a broken run never becomes a BENCHMARKS.md with rows quietly missing.
func parse(r io.Reader) (benchOutput, error) {
	var (
		out     benchOutput
		pkg     string
		pending string // a benchmark name printed alone on its line; its figures follow on a later line
		pendAt  int
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "pkg: "):
			pkg = strings.TrimSpace(strings.TrimPrefix(line, "pkg: "))
			pending = ""
		case strings.HasPrefix(line, "cpu: "):
			if out.cpu == "" {
				out.cpu = strings.TrimSpace(strings.TrimPrefix(line, "cpu: "))
			}
		case strings.HasPrefix(trimmed, "--- FAIL:"), strings.HasPrefix(line, "FAIL"), strings.HasPrefix(trimmed, "panic:"):
			return benchOutput{}, fmt.Errorf("line %d: the benchmarks failed: %s", n, trimmed)
		case strings.HasPrefix(line, "Benchmark"):
			fields := strings.Fields(line)
			if len(fields) == 1 || !isCount(fields[1]) {
				// The name alone (anything after it was printed by the benchmark itself): its figures
				// follow on a later line.
				pending, pendAt = fields[0], n
				continue
			}
			res, err := parseResult(pkg, fields[0], fields[1:], n)
			if err != nil {
				return benchOutput{}, err
			}
			out.results = append(out.results, res)
			pending = ""
		case pending != "" && looksLikeFigures(trimmed):
			res, err := parseResult(pkg, pending, strings.Fields(trimmed), pendAt)
			if err != nil {
				return benchOutput{}, err
			}
			out.results = append(out.results, res)
			pending = ""
		}
	}
	if err := sc.Err(); err != nil {
		return benchOutput{}, fmt.Errorf("reading the benchmark output: %w", err)
	}
	if len(out.results) == 0 {
		return benchOutput{}, fmt.Errorf("no benchmark results in the input (expected lines like \"BenchmarkX-2  1000  123 ns/op\")")
	}
	return out, nil
}

// looksLikeFigures reports whether s starts with an iteration count followed by a value: the second
// half of a result line whose benchmark name was printed on a line of its own.
func looksLikeFigures(s string) bool {
	f := strings.Fields(s)
	if len(f) < 3 || !isCount(f[0]) {
		return false
	}
	_, err := strconv.ParseFloat(f[1], 64)
	return err == nil
}

func isCount(s string) bool {
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil
}

func parseResult(pkg, name string, fields []string, line int) (result, error) {
	if pkg == "" {
		return result{}, fmt.Errorf("line %d: %s comes before any \"pkg:\" line; pass benchreport the whole output of go test", line, name)
	}
	res := result{pkg: pkg, name: name, procs: 1, line: line}
	if m := procsSuffix.FindStringSubmatch(name); m != nil {
		res.procs, _ = strconv.Atoi(m[1])
		res.name = strings.TrimSuffix(name, m[0])
	}
	if len(fields) < 3 || len(fields)%2 != 1 {
		return result{}, fmt.Errorf("line %d: %s: want an iteration count and value-unit pairs, got %q", line, name, strings.Join(fields, " "))
	}
	for i := 1; i < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return result{}, fmt.Errorf("line %d: %s: value %q of %s is not a number", line, name, fields[i], fields[i+1])
		}
		res.metrics = append(res.metrics, metric{value: v, unit: fields[i+1]})
	}
	return res, nil
}
