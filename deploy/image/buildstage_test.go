package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// releaseBuildRE matches the release build of admit in a make -n image line or a Dockerfile
// RUN: the environment and flags of go build, its output, its package.
var releaseBuildRE = regexp.MustCompile(`(CGO_ENABLED=0 go build .*?) -o (\S+) (\S+)`)

// TestBuildStage checks what no test can run, the Dockerfile's build stage (it pulls its Go
// image from a registry): it builds ./cmd/admit with the Makefile's release build, on the Go
// release go.mod names, into the file the final stage copies to /admit.
func TestBuildStage(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var from, run string
	for _, in := range instructions(string(text)) {
		word, rest, _ := strings.Cut(in.text, " ")
		switch strings.ToUpper(word) {
		case "FROM":
			if from == "" {
				from = rest
			}
		case "RUN":
			if strings.Contains(rest, "go build") {
				run = rest
			}
		}
	}
	gomod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if goVersion == nil {
		t.Fatal("go.mod has no go line")
	}
	if want := "docker.io/library/golang:" + string(goVersion[1]) + " AS build"; from != want {
		t.Errorf("the build stage is FROM %q, want %q: go.mod's Go release, the name fully qualified", from, want)
	}

	docker := releaseBuildRE.FindStringSubmatch(run)
	if docker == nil {
		t.Fatalf("the build stage's go build %q is not the release build", run)
	}
	mk := releaseBuildRE.FindStringSubmatch(makeDryRun(t, "image"))
	if mk == nil {
		t.Fatal("make -n image runs no release build")
	}
	if docker[1] != mk[1] || docker[3] != mk[3] {
		t.Errorf("the build stage runs %q on %s, make image %q on %s", docker[1], docker[3], mk[1], mk[3])
	}
	if copyLine := "COPY --from=build " + docker[2] + " /admit"; !strings.Contains(string(text), copyLine) {
		t.Errorf("the Dockerfile has no %q: the final stage does not take the binary the build stage writes", copyLine)
	}
}
