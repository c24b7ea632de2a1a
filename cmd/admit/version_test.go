package main

import (
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFormatVersion(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/admit-dev/admit", Version: "v1.2.0"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "8d26005683d1b40e0daee6cd61c0042f85b4cc52"}, {Key: "vcs.modified", Value: "false"}}}
	modified := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261202103404-8d26005683d1+dirty"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "8d26005683d1b40e0daee6cd61c0042f85b4cc52"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		info *debug.BuildInfo
		want string
	}{
		{stamped, "admit v1.2.0 commit 8d26005683d1b40e0daee6cd61c0042f85b4cc52 go1.26.8 linux/arm64"},
		{modified, "admit v0.0.0-20261202103404-8d26005683d1+dirty commit 8d26005683d1b40e0daee6cd61c0042f85b4cc52 (modified) go1.26.8 linux/arm64"},
		{&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "admit (devel) commit unknown go9.9 linux/arm64"},
		{nil, "admit (devel) commit unknown go9.9 linux/arm64"},
	} {
		if got := formatVersion(tc.info, "go9.9", "linux/arm64"); got != tc.want {
			t.Errorf("formatVersion = %q\nwant            %q", got, tc.want)
		}
	}
}

// TestVersionOfBinary checks admit version of the built binary against what go version -m reads
// from the same file: the module version, the commit (or "unknown" when the build stamped none)
// and the Go version.
func TestVersionOfBinary(t *testing.T) {
	bin := admitBinary(t)
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("admit version: %v", err)
	}
	meta, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	goVersion, version, commit, modified := "", "", "unknown", ""
	for i, line := range strings.Split(string(meta), "\n") {
		f := strings.Fields(line)
		switch {
		case i == 0 && len(f) == 2:
			goVersion = f[1] // "PATH: go1.26.8"
		case len(f) >= 3 && f[0] == "mod":
			version = f[2]
		case len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision="):
			commit = strings.TrimPrefix(f[1], "vcs.revision=")
		case len(f) == 2 && f[0] == "build" && f[1] == "vcs.modified=true":
			modified = " (modified)"
		}
	}
	want := "admit " + version + " commit " + commit + modified + " " + goVersion + " "
	if got := string(out); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "\n") {
		t.Errorf("admit version = %q, want %q OS/ARCH\ngo version -m:\n%s", got, want, meta)
	}
	t.Logf("admit version: %s", out)
}
