package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// makeEnv is the environment of a make run by a test: this one without the variables an outer
// make (make test) passes down, which would override the Makefile's defaults.
func makeEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		name, _, _ := strings.Cut(e, "=")
		switch name {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "GO",
			"DIST_DIR", "DIST_PLATFORMS", "IMAGE_TAR", "IMAGE_BIN", "IMAGE_TAG", "IMAGE_ARCH":
			continue
		}
		env = append(env, e)
	}
	return env
}

// foreignLinux is a Linux architecture other than this machine's, for make dist to cross-build.
func foreignLinux() string {
	if runtime.GOARCH == "arm64" {
		return "amd64"
	}
	return "arm64"
}

// elfMachines and machoCPUs are the machine fields of each architecture's binaries.
var (
	elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	machoCPUs   = map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}
)

// TestDist runs make dist into a temporary DIST_DIR for a foreign Linux and darwin/arm64, then
// checks each binary's header (the machine; Linux's static, with no interpreter and no shared
// library), its build info (the platform, no cgo, -trimpath, stripped) and SHA256SUMS. It
// cross-builds admit twice, about a minute each on a busy machine: -short skips it.
func TestDist(t *testing.T) {
	if testing.Short() {
		t.Skip("make dist cross-builds admit twice (about a minute each here); -short skips it")
	}
	dir := filepath.Join(t.TempDir(), "out")
	linux := "linux/" + foreignLinux()
	platforms := []string{linux, "darwin/arm64"}
	start := time.Now()
	cmd := exec.Command("make", "-C", repoRoot, "dist", "DIST_DIR="+dir, "DIST_PLATFORMS="+strings.Join(platforms, " "))
	cmd.Env = makeEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make dist: %v\n%s", err, out)
	}
	t.Logf("make dist for %q took %v", platforms, time.Since(start).Round(time.Second))

	var binaries []string
	for _, p := range platforms {
		binaries = append(binaries, "admit-"+strings.ReplaceAll(p, "/", "-"))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := append(slices.Clone(binaries), "SHA256SUMS"); !slices.Equal(names, slices.Sorted(slices.Values(want))) {
		t.Fatalf("DIST_DIR holds %q, want %q", names, slices.Sorted(slices.Values(want)))
	}

	for i, p := range platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		file := filepath.Join(dir, binaries[i])
		t.Run(binaries[i], func(t *testing.T) {
			if goos == "linux" {
				checkELF(t, file, goarch)
			} else {
				checkMachO(t, file, goarch)
			}
			checkBuildInfo(t, file, goos, goarch)
		})
	}
	checkSums(t, dir, binaries)
}

// checkELF checks that file is a static 64-bit ELF executable for goarch, stripped of its symbols.
func checkELF(t *testing.T, file, goarch string) {
	f, err := elf.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 || f.Machine != elfMachines[goarch] || f.Type != elf.ET_EXEC {
		t.Errorf("ELF class %v machine %v type %v, want ELFCLASS64 %v ET_EXEC", f.Class, f.Machine, f.Type, elfMachines[goarch])
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("a %v program header: the binary is not static", p.Type)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("shared libraries %q (%v), want none", libs, err)
	}
	if _, err := f.Symbols(); !errors.Is(err, elf.ErrNoSymbols) {
		t.Errorf("symbols: %v, want none (-ldflags=-s)", err)
	}
}

// checkMachO checks that file is a Mach-O executable for goarch.
func checkMachO(t *testing.T, file, goarch string) {
	f, err := macho.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Cpu != machoCPUs[goarch] || f.Type != macho.TypeExec {
		t.Errorf("Mach-O cpu %v type %v, want %v an executable", f.Cpu, f.Type, machoCPUs[goarch])
	}
}

// checkBuildInfo checks the Go build info of file: admit's command, built for goos/goarch
// without cgo and with -trimpath.
func checkBuildInfo(t *testing.T, file, goos, goarch string) {
	bi, err := buildinfo.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if bi.Path != "github.com/admit-dev/admit/cmd/admit" {
		t.Errorf("main package %q, want github.com/admit-dev/admit/cmd/admit", bi.Path)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	for k, v := range map[string]string{"GOOS": goos, "GOARCH": goarch, "CGO_ENABLED": "0", "-trimpath": "true"} {
		if settings[k] != v {
			t.Errorf("build setting %s = %q, want %q", k, settings[k], v)
		}
	}
}

// checkSums checks that dir's SHA256SUMS has one line per binary, in sha256sum's format, each
// sum that of the file; and, where sha256sum is installed, that sha256sum -c agrees.
func checkSums(t *testing.T, dir string, binaries []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			t.Errorf("SHA256SUMS line %q, want a SHA-256 in hex, two spaces, a file name", sc.Text())
			continue
		}
		listed = append(listed, name)
		body, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("SHA256SUMS lists %s: %v", name, err)
			continue
		}
		if h := sha256.Sum256(body); hex.EncodeToString(h[:]) != sum {
			t.Errorf("SHA256SUMS gives %s the sum %s, the file's is %x", name, sum, h)
		}
	}
	if !slices.Equal(slices.Sorted(slices.Values(listed)), slices.Sorted(slices.Values(binaries))) {
		t.Errorf("SHA256SUMS lists %q, want %q", listed, binaries)
	}
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Log("sha256sum not found: SHA256SUMS checked by the test alone")
		return
	}
	cmd := exec.Command("sha256sum", "-c", "--strict", "SHA256SUMS")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("sha256sum -c SHA256SUMS: %v\n%s", err, out)
	}
}

// makeDryRun returns what make -n prints for target in the repository, with the Makefile's
// defaults but for vars (NAME=value).
func makeDryRun(t *testing.T, target string, vars ...string) string {
	t.Helper()
	cmd := exec.Command("make", append([]string{"-n", "-C", repoRoot, target}, vars...)...)
	cmd.Env = makeEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n %s: %v\n%s", target, err, out)
	}
	return string(out)
}

// absRepo returns the repository's absolute path, as the Makefile's abspath writes it.
func absRepo(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDistDefaultDir checks that make dist writes to dist/ when DIST_DIR is not set: TestDist
// sets it.
func TestDistDefaultDir(t *testing.T) {
	out := makeDryRun(t, "dist", "DIST_PLATFORMS=linux/amd64")
	for _, want := range []string{
		"rm -rf dist && mkdir -p dist\n",
		" -o " + absRepo(t) + "/dist/admit-${p%/*}-${p#*/} ./cmd/admit",
		"cd dist && ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("make -n dist lacks %q:\n%s", want, out)
		}
	}
}
