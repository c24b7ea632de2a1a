// Command benchreport turns the raw output of `go test -bench` into BENCHMARKS.md and a chart.
//
// scripts/bench.sh (`make bench`) runs the benchmarks, saves their output and calls:
//
//	benchreport -in raw.txt -o BENCHMARKS.md -svg docs/bench-throughput.svg -cmd '<command 1>' -cmd '<command 2>'
//
// BENCHMARKS.md gets a header (machine, go and redis-server versions, date, the commands), then one
// table per comparison group of each package, every row beside its reference's throughput at the
// same callers as a ratio, with a column for every unit the benchmarks report; the chart plots
// decisions/s against callers for each group. How names form groups (the naming rule) is described
// at the top of scripts/bench.sh and in docs/development.md. Everything from the first "## " heading
// of the existing BENCHMARKS.md on is written by hand and kept as it is. The same input gives the
// same output, but for the date and the machine.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// commands collects the repeated -cmd flag.
type commands []string

func (c *commands) String() string     { return strings.Join(*c, "; ") }
func (c *commands) Set(s string) error { *c = append(*c, s); return nil }

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stderr io.Writer) error {
	fs := flag.NewFlagSet("benchreport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "-", "the output of go test -bench (\"-\": standard input)")
	out := fs.String("o", "BENCHMARKS.md", "the Markdown file to write; its hand-written \"## \" sections are kept")
	svg := fs.String("svg", "docs/bench-throughput.svg", "the chart to write (\"\": none)")
	module := fs.String("module", "", "the module path package names are shown relative to (default: ./go.mod's)")
	src := fs.String("src", ".", "the module's root directory, where the benchmarks' doc comments are read")
	var cmds commands
	fs.Var(&cmds, "cmd", "a command that produced the input, for the header (repeatable, in order)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (the input is -in)", fs.Args())
	}
	if *module == "" {
		m, err := modulePath(filepath.Join(*src, "go.mod"))
		if err != nil {
			return err
		}
		*module = m
	}

	r := stdin
	if *in != "-" {
		file, err := os.Open(*in)
		if err != nil {
			return err
		}
		defer file.Close()
		r = file
	}
	parsed, err := parse(r)
	if err != nil {
		return err
	}
	gs, err := groups(parsed.results, *module)
	if err != nil {
		return err
	}
	for _, g := range gs {
		for _, w := range g.warns {
			fmt.Fprintln(stderr, "benchreport: warning:", w)
		}
	}
	d, err := readDocs(*src, gs)
	if err != nil {
		return err
	}

	h := header{
		date:     time.Now().UTC().Format("2006-01-02"),
		machine:  machine(parsed.cpu),
		goVer:    runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		redis:    redisVersion(),
		commands: cmds,
	}
	panels := chartPanels(gs)
	if *svg != "" && len(panels) > 0 {
		var b bytes.Buffer
		renderSVG(&b, panels)
		if err := writeAtomically(*svg, b.Bytes()); err != nil {
			return err
		}
		rel, err := filepath.Rel(filepath.Dir(*out), *svg)
		if err != nil {
			return err
		}
		h.chart = filepath.ToSlash(rel)
	}

	kept, err := handWritten(*out)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	renderMarkdown(&b, h, gs, d)
	if kept != "" {
		b.WriteString("\n")
		b.WriteString(kept)
	}
	return writeAtomically(*out, b.Bytes())
}

// handWritten returns the hand-written part of an existing BENCHMARKS.md: everything from its first
// line that starts with "## ". A missing file has none.
func handWritten(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return keptPart(string(b)), nil
}

func keptPart(s string) string {
	if strings.HasPrefix(s, "## ") {
		return s
	}
	if i := strings.Index(s, "\n## "); i >= 0 {
		return s[i+1:]
	}
	return ""
}

// writeAtomically replaces path with data, so a failure never leaves half a file.
func writeAtomically(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func modulePath(gomod string) (string, error) {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", fmt.Errorf("finding the module path (or pass -module): %w", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("%s has no module line (or pass -module)", gomod)
}

// machine describes the computer: cores, CPU model (as go test printed it, else /proc/cpuinfo's),
// memory.
func machine(cpu string) string {
	if cpu == "" {
		cpu = procField("/proc/cpuinfo", "model name")
	}
	parts := []string{strconv.Itoa(runtime.NumCPU()) + " cores"}
	if cpu != "" {
		parts = append(parts, cpu)
	}
	if mem := memTotal(procField("/proc/meminfo", "MemTotal")); mem != "" {
		parts = append(parts, mem)
	}
	return strings.Join(parts, ", ")
}

// procField returns the value of the first "name: value" line of a /proc file, or "".
func procField(path, name string) string {
	file, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// memTotal turns /proc/meminfo's "24576000 kB" into "23 GiB".
func memTotal(v string) string {
	n, err := strconv.ParseFloat(strings.TrimSuffix(v, " kB"), 64)
	if err != nil || n <= 0 {
		return ""
	}
	return fmt.Sprintf("%.0f GiB", n/(1<<20))
}

// redisVersion asks the redis-server on PATH, which the test harness starts, for its version.
func redisVersion() string {
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		return "version unknown (redis-server --version: " + err.Error() + ")"
	}
	return parseRedisVersion(string(out))
}

// parseRedisVersion takes "v=7.0.15" out of `redis-server --version`'s line.
func parseRedisVersion(s string) string {
	for _, f := range strings.Fields(s) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return v
		}
	}
	return strings.TrimSpace(s)
}
