package admit_test

import (
	"bufio"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The test programs: scripts/test-programs.txt lists the programs the tests run, and
// scripts/test-deps.sh installs the missing ones for `make test` and .ci/run. These tests keep the
// list, the Makefile, .ci/run and the README in agreement, and run the installer's branches
// against a fake apt-get, never the real one.

// testProgram is one line of scripts/test-programs.txt.
type testProgram struct {
	name   string            // the program, looked up on PATH
	debian string            // the Debian/Ubuntu package that ships it
	others map[string]string // another system's package, by system (brew, dnf, …)
}

// readTestPrograms parses scripts/test-programs.txt.
func readTestPrograms(t *testing.T) []testProgram {
	t.Helper()
	f, err := os.Open("scripts/test-programs.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ps []testProgram
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			t.Fatalf("scripts/test-programs.txt:%d: %q: want a program and its Debian package", n, line)
		}
		p := testProgram{name: fields[0], debian: fields[1], others: map[string]string{}}
		for _, f := range fields[2:] {
			system, pkg, ok := strings.Cut(f, "=")
			if !ok || system == "" || pkg == "" {
				t.Fatalf("scripts/test-programs.txt:%d: %q: want SYSTEM=PACKAGE", n, f)
			}
			p.others[system] = pkg
		}
		ps = append(ps, p)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ps, func(p testProgram) bool { return p.name == "redis-server" }) {
		t.Fatalf("scripts/test-programs.txt lists no redis-server: %+v", ps)
	}
	return ps
}

// TestTestProgramsAgree checks that the README's test prerequisites name every program of
// scripts/test-programs.txt and its Debian package, and that `make test` and .ci/run both install
// them with scripts/test-deps.sh rather than a list of their own.
func TestTestProgramsAgree(t *testing.T) {
	programs := readTestPrograms(t)

	readme := readFile(t, "README.md")
	var prereq string
	for para := range strings.SplitSeq(readme, "\n\n") {
		if strings.Contains(para, "scripts/test-programs.txt") && strings.Contains(para, "make test") {
			prereq = para
		}
	}
	if prereq == "" {
		t.Fatal("README.md has no paragraph on make test's prerequisites that points at scripts/test-programs.txt")
	}
	for _, p := range programs {
		for _, name := range []string{p.name, p.debian} {
			if !strings.Contains(prereq, "`"+name+"`") {
				t.Errorf("README.md's test prerequisites do not name `%s` (%s in scripts/test-programs.txt):\n%s", name, p.name, prereq)
			}
		}
	}
	if !strings.Contains(prereq, "ADMIT_NO_INSTALL=1") {
		t.Errorf("README.md's test prerequisites do not say how to refuse the install (ADMIT_NO_INSTALL=1):\n%s", prereq)
	}

	// make test reaches the installer through its prerequisites.
	makefile := readFile(t, "Makefile")
	if !makeReaches(makefile, "test", "sh scripts/test-deps.sh") {
		t.Error("make test does not run scripts/test-deps.sh before the tests")
	}
	ci := readFile(t, ".ci/run")
	if !strings.Contains(ci, "scripts/test-deps.sh") {
		t.Error(".ci/run does not install the test programs with scripts/test-deps.sh")
	}
	for _, f := range []struct{ name, text string }{{"Makefile", makefile}, {".ci/run", ci}} {
		if strings.Contains(f.text, "apt-get") {
			t.Errorf("%s calls apt-get itself: only scripts/test-deps.sh installs, from scripts/test-programs.txt", f.name)
		}
		for _, p := range programs {
			if regexp.MustCompile(`command -v\s+` + regexp.QuoteMeta(p.name)).MatchString(f.text) {
				t.Errorf("%s looks %s up itself: only scripts/test-deps.sh does, from scripts/test-programs.txt", f.name, p.name)
			}
		}
	}
}

// makeReaches reports whether running target of makefile runs a recipe line containing cmd, in
// its own recipe or that of a prerequisite, transitively.
func makeReaches(makefile, target, cmd string) bool {
	rules := map[string][]string{} // target → prerequisites
	recipes := map[string]string{} // target → its recipe lines
	var current string
	for line := range strings.Lines(makefile) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "\t") {
			recipes[current] += line + "\n"
			continue
		}
		if strings.HasPrefix(line, "#") || strings.Contains(line, "=") {
			continue
		}
		name, prereqs, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		current = strings.TrimSpace(name)
		rules[current] = strings.Fields(prereqs)
	}
	seen := map[string]bool{}
	var reach func(string) bool
	reach = func(t string) bool {
		if seen[t] {
			return false
		}
		seen[t] = true
		if strings.Contains(recipes[t], cmd) {
			return true
		}
		return slices.ContainsFunc(rules[t], reach)
	}
	return reach(target)
}

// readFile returns the content of the file at path, relative to the module root.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fakeSystem is a directory to use as the whole of PATH: the few real programs the installer
// needs, and fakes of the package managers that record each call in a log.
type fakeSystem struct {
	bin, log string
}

// newFakeSystem makes a fakeSystem without any of programs, and with the fake package managers
// managers (each a shell script that logs its arguments and DEBIAN_FRONTEND). A fake apt-get's
// install also puts a stub of every program listed into bin, as the real one would.
func newFakeSystem(t *testing.T, programs []testProgram, managers ...string) *fakeSystem {
	t.Helper()
	dir := t.TempDir()
	sys := &fakeSystem{bin: filepath.Join(dir, "bin"), log: filepath.Join(dir, "calls.log")}
	if err := os.Mkdir(sys.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, real := range []string{"sh", "dirname", "id", "env"} {
		path, err := exec.LookPath(real)
		if err != nil {
			t.Fatalf("the installer's test needs %s: %v", real, err)
		}
		if err := os.Symlink(path, filepath.Join(sys.bin, real)); err != nil {
			t.Fatal(err)
		}
	}
	chmod, err := exec.LookPath("chmod")
	if err != nil {
		t.Fatalf("the installer's test needs chmod: %v", err)
	}
	var stubs strings.Builder
	for _, p := range programs {
		stub := filepath.Join(sys.bin, p.name)
		stubs.WriteString("printf '#!/bin/sh\\n' >'" + stub + "'; " + chmod + " +x '" + stub + "'\n")
	}
	for _, m := range managers {
		script := "#!/bin/sh\necho \"" + m + " $* DEBIAN_FRONTEND=${DEBIAN_FRONTEND:-}\" >>'" + sys.log + "'\n"
		if m == "apt-get" {
			script += "if [ \"$1\" = install ]; then\n" + stubs.String() + "fi\n"
		}
		sys.write(t, m, script)
	}
	return sys
}

// write puts an executable script of the given name into the fake system's bin.
func (sys *fakeSystem) write(t *testing.T, name, script string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(sys.bin, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// calls returns the lines the fake package managers logged.
func (sys *fakeSystem) calls(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(sys.log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// run runs scripts/test-deps.sh with PATH the fake system's bin and the extra environment, and
// returns its output and exit code.
func (sys *fakeSystem) run(t *testing.T, extra ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(sys.bin, "sh"), "scripts/test-deps.sh")
	cmd.Env = append([]string{"PATH=" + sys.bin, "HOME=" + t.TempDir()}, extra...)
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("scripts/test-deps.sh: %v\n%s", err, out)
		}
		code = ee.ExitCode()
	}
	return string(out), code
}

// TestTestDepsInstaller runs scripts/test-deps.sh on fake systems that lack the test programs.
func TestTestDepsInstaller(t *testing.T) {
	programs := readTestPrograms(t)
	var debs []string
	for _, p := range programs {
		if !slices.Contains(debs, p.debian) {
			debs = append(debs, p.debian)
		}
	}
	pkgs := strings.Join(debs, " ")
	fakeID := func(sys *fakeSystem, uid string) {
		os.Remove(filepath.Join(sys.bin, "id"))
		sys.write(t, "id", "#!/bin/sh\necho "+uid+"\n")
	}

	t.Run("AllPresent", func(t *testing.T) {
		sys := newFakeSystem(t, programs, "apt-get")
		for _, p := range programs {
			sys.write(t, p.name, "#!/bin/sh\n")
		}
		out, code := sys.run(t)
		if code != 0 || out != "" || sys.calls(t) != nil {
			t.Errorf("every program present: exit %d, output %q, calls %q; want 0, silent, no call", code, out, sys.calls(t))
		}
	})

	t.Run("DebianAsRoot", func(t *testing.T) {
		sys := newFakeSystem(t, programs, "apt-get")
		fakeID(sys, "0")
		out, code := sys.run(t)
		if code != 0 {
			t.Fatalf("exit %d, want 0; output:\n%s", code, out)
		}
		wantCalls := []string{"apt-get update DEBIAN_FRONTEND=", "apt-get install -y " + pkgs + " DEBIAN_FRONTEND=noninteractive"}
		if got := sys.calls(t); !slices.Equal(got, wantCalls) {
			t.Errorf("apt-get was called %q, want %q", got, wantCalls)
		}
		for _, printed := range []string{"+ apt-get update\n", "+ env DEBIAN_FRONTEND=noninteractive apt-get install -y " + pkgs + "\n"} {
			if !strings.Contains(out, printed) {
				t.Errorf("the output does not print %q before running it:\n%s", printed, out)
			}
		}
		if strings.Index(out, "+ apt-get update") > strings.Index(out, "apt-get install") {
			t.Errorf("install printed before update:\n%s", out)
		}
	})

	t.Run("DebianThroughSudo", func(t *testing.T) {
		sys := newFakeSystem(t, programs, "apt-get")
		fakeID(sys, "1000")
		sys.write(t, "sudo", "#!/bin/sh\necho \"sudo $*\" >>'"+sys.log+"'\nexec \"$@\"\n")
		out, code := sys.run(t)
		if code != 0 {
			t.Fatalf("exit %d, want 0; output:\n%s", code, out)
		}
		wantCalls := []string{
			"sudo apt-get update",
			"apt-get update DEBIAN_FRONTEND=",
			"sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y " + pkgs,
			"apt-get install -y " + pkgs + " DEBIAN_FRONTEND=noninteractive",
		}
		if got := sys.calls(t); !slices.Equal(got, wantCalls) {
			t.Errorf("calls %q, want %q", got, wantCalls)
		}
		if !strings.Contains(out, "+ sudo apt-get update\n") || !strings.Contains(out, "+ sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y "+pkgs+"\n") {
			t.Errorf("the output does not print the sudo commands it runs:\n%s", out)
		}
	})

	t.Run("NotRootWithoutSudo", func(t *testing.T) {
		sys := newFakeSystem(t, programs, "apt-get")
		fakeID(sys, "1000")
		out, code := sys.run(t)
		if code == 0 || sys.calls(t) != nil {
			t.Errorf("exit %d, calls %q; want a failure and no call", code, sys.calls(t))
		}
		if !strings.Contains(out, "apt-get update && apt-get install -y "+pkgs) {
			t.Errorf("the output lacks the install line to run as root:\n%s", out)
		}
	})

	t.Run("NoInstall", func(t *testing.T) {
		sys := newFakeSystem(t, programs, "apt-get")
		fakeID(sys, "1000")
		out, code := sys.run(t, "ADMIT_NO_INSTALL=1")
		if code == 0 {
			t.Errorf("ADMIT_NO_INSTALL=1 with programs missing: exit 0; want a failure")
		}
		if calls := sys.calls(t); calls != nil {
			t.Errorf("ADMIT_NO_INSTALL=1 ran %q; want nothing run", calls)
		}
		for _, want := range []string{"ADMIT_NO_INSTALL=1", "sudo apt-get update && sudo apt-get install -y " + pkgs} {
			if !strings.Contains(out, want) {
				t.Errorf("the output lacks %q:\n%s", want, out)
			}
		}
		for _, p := range programs {
			if !strings.Contains(out, p.name) {
				t.Errorf("the output does not name the missing %s:\n%s", p.name, out)
			}
		}
	})

	for _, other := range []struct{ manager, line string }{
		{"brew", "brew install"},
		{"dnf", "sudo dnf install -y"},
		{"apk", "sudo apk add"},
	} {
		t.Run("Other/"+other.manager, func(t *testing.T) {
			sys := newFakeSystem(t, programs, other.manager)
			fakeID(sys, "1000")
			out, code := sys.run(t)
			if code == 0 || sys.calls(t) != nil {
				t.Errorf("on a %s system: exit %d, calls %q; want a failure and nothing run", other.manager, code, sys.calls(t))
			}
			var want []string
			for _, p := range programs {
				pkg := p.debian
				if o, ok := p.others[other.manager]; ok {
					pkg = o
				}
				if !slices.Contains(want, pkg) {
					want = append(want, pkg)
				}
			}
			if line := other.line + " " + strings.Join(want, " "); !strings.Contains(out, line) {
				t.Errorf("on a %s system the output lacks the install line %q:\n%s", other.manager, line, out)
			}
		})
	}

	t.Run("Unknown", func(t *testing.T) {
		sys := newFakeSystem(t, programs)
		out, code := sys.run(t)
		if code == 0 {
			t.Errorf("without a package manager: exit 0; want a failure")
		}
		if !strings.Contains(out, pkgs) {
			t.Errorf("without a package manager the output does not name the packages %q:\n%s", pkgs, out)
		}
	})
}

// TestGuaranteesCiteRealTests checks that docs/guarantees.md defines G1 … G9, and that every test
// it names as a proof is a Test or Fuzz function of this repository, so that a renamed or deleted
// test cannot leave a guarantee proven by nothing.
func TestGuaranteesCiteRealTests(t *testing.T) {
	doc := readFile(t, "docs/guarantees.md")
	for i := 1; i <= 9; i++ {
		if !regexp.MustCompile(`(?m)^## G` + strconv.Itoa(i) + ` `).MatchString(doc) {
			t.Errorf("docs/guarantees.md has no heading ## G%d", i)
		}
	}
	defined := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)\w*)\(`).FindAllStringSubmatch(string(src), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cited := regexp.MustCompile("`((?:Test|Fuzz)[A-Za-z0-9_]+)`").FindAllStringSubmatch(doc, -1)
	if len(cited) == 0 {
		t.Fatal("docs/guarantees.md names no test")
	}
	for _, m := range cited {
		if !defined[m[1]] {
			t.Errorf("docs/guarantees.md cites %s, which no _test.go file defines", m[1])
		}
	}
}

// TestDocLinksResolve checks every relative link of the README, BENCHMARKS.md and docs/: the file
// it names exists, and so does the heading its #anchor names (as GitHub derives anchors), so that
// a reference moved into the repository points at something.
func TestDocLinksResolve(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "README.md", "BENCHMARKS.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	anchors := map[string]map[string]bool{} // file → its anchors
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := map[string]bool{}
		seen := map[string]int{}
		for _, line := range proseLines(readFile(t, path)) {
			heading, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
			if !ok || !strings.HasPrefix(line, "#") {
				continue
			}
			id := githubAnchor(heading)
			if n := seen[id]; n > 0 {
				a[id+"-"+strconv.Itoa(n)] = true
			} else {
				a[id] = true
			}
			seen[id]++
		}
		anchors[path] = a
		return a
	}
	checked := 0
	for _, file := range files {
		for i, line := range proseLines(readFile(t, file)) {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				resolved := file
				if path != "" {
					resolved = filepath.Join(filepath.Dir(file), path)
				}
				checked++
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s:%d: link %s: no such file %s", file, i+1, target, resolved)
					continue
				}
				if anchor != "" && strings.HasSuffix(resolved, ".md") && !anchorsOf(resolved)[anchor] {
					t.Errorf("%s:%d: link %s: %s has no heading with the anchor #%s", file, i+1, target, resolved, anchor)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no relative link: the test reads nothing")
	}
}

// proseLines returns the lines of a Markdown text, with those of fenced code blocks blanked (so
// that line numbers stay right): a # there is a comment, not a heading.
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	fenced := false
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			lines[i] = ""
			continue
		}
		if fenced {
			lines[i] = ""
		}
	}
	return lines
}

// githubAnchor returns the anchor GitHub gives a heading: lower case, without the characters other
// than letters, digits, spaces, hyphens and underscores, spaces made hyphens.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
