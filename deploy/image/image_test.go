package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// repoRoot is the admit repository, two levels up.
const repoRoot = "../.."

// caFile is the CA bundle the image carries, where the Dockerfile's build stage has it.
const caFile = "/etc/ssl/certs/ca-certificates.crt"

// makeImage runs make image in the repository with the make variables vars (NAME=value).
func makeImage(t *testing.T, vars ...string) {
	t.Helper()
	cmd := exec.Command("make", append([]string{"-C", repoRoot, "image"}, vars...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
}

// caBundle returns this machine's CA bundle, or a stand-in where it has none.
func caBundle(t *testing.T) string {
	if _, err := os.Stat(caFile); err == nil {
		return caFile
	}
	t.Logf("%s not found: the image gets a stand-in", caFile)
	f := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(f, []byte("# no CA bundle on the test machine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestImage builds admit's image with make image (its binary and tarball in a temporary
// directory), reads it back, checks its configuration against the Dockerfile and the pins and its
// one layer's files, then runs it: in a container where podman works, and always as the binary
// taken out of the layer.
func TestImage(t *testing.T) {
	dir := t.TempDir()
	bin, out, ca := filepath.Join(dir, "admit"), filepath.Join(dir, "admit-image.tar"), caBundle(t)
	tag := "admit-test:" + randomHex(t)
	args := map[string]string{"VERSION": "v9.9.9-test"}
	makeImage(t, "IMAGE_BIN="+bin, "IMAGE_TAR="+out, "IMAGE_TAG="+tag, "CA_BUNDLE="+ca, "VERSION="+args["VERSION"])
	o := options{dockerfile: filepath.Join(repoRoot, "Dockerfile"), files: map[string]string{"/admit": bin, caFile: ca}}
	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	want, err := readSpec(o.dockerfile, args)
	if err != nil {
		t.Fatal(err)
	}
	checkConfig(t, cf, want)
	binary := checkLayer(t, img, o.files)

	t.Run("container", func(t *testing.T) { runContainer(t, out, tag) })
	t.Run("layer_binary", func(t *testing.T) { runBinary(t, binary, cf.Config) })
}

// checkConfig checks the image's configuration against the Dockerfile's spec want, and the
// Dockerfile against what deploy/image pins: the user, the entrypoint, the demo, the ports, the labels.
func checkConfig(t *testing.T, cf *v1.ConfigFile, want spec) {
	t.Helper()
	c := cf.Config
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s, this machine's", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	if c.User != want.User || c.WorkingDir != want.WorkingDir {
		t.Errorf("User %q WorkingDir %q, want the Dockerfile's %q %q", c.User, c.WorkingDir, want.User, want.WorkingDir)
	}
	if !slices.Equal(c.Entrypoint, want.Entrypoint) || !slices.Equal(c.Cmd, want.Cmd) || !slices.Equal(c.Env, want.Env) {
		t.Errorf("Entrypoint %q Cmd %q Env %q, want the Dockerfile's %q %q %q", c.Entrypoint, c.Cmd, c.Env, want.Entrypoint, want.Cmd, want.Env)
	}
	if got := slices.Sorted(maps.Keys(c.ExposedPorts)); !slices.Equal(got, slices.Sorted(slices.Values(want.Exposed))) {
		t.Errorf("ExposedPorts %q, want the Dockerfile's %q", got, want.Exposed)
	}
	if !maps.Equal(c.Labels, want.Labels) {
		t.Errorf("Labels %q, want the Dockerfile's %q", c.Labels, want.Labels)
	}

	// The pins: a non-root user, the binary as entrypoint, the demo on every interface, the ports.
	if want.User != "65532:65532" || !slices.Equal(want.Entrypoint, []string{"/admit"}) || !slices.Equal(want.Cmd, []string{"serve"}) {
		t.Errorf("the Dockerfile has USER %q ENTRYPOINT %q CMD %q, want 65532:65532, /admit, serve", want.User, want.Entrypoint, want.Cmd)
	}
	if !slices.Contains(want.Env, "ADMIT_LISTEN=:8080") {
		t.Errorf("the Dockerfile's ENV %q lacks ADMIT_LISTEN=:8080", want.Env)
	}
	if !slices.Equal(want.Exposed, []string{"8080/tcp", "8081/tcp", "8082/tcp"}) {
		t.Errorf("the Dockerfile exposes %q, want HTTP 8080, gRPC 8081 and admin 8082", want.Exposed)
	}
	license, err := os.ReadFile(filepath.Join(repoRoot, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.source":   "https://github.com/admit-dev/admit",
		"org.opencontainers.image.version":  "v9.9.9-test",
		"org.opencontainers.image.licenses": "Apache-2.0",
	} {
		if want.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, want.Labels[k], v)
		}
	}
	if !bytes.Contains(license, []byte("Apache License")) || !bytes.Contains(license, []byte("Version 2.0")) {
		t.Error("LICENSE is not the Apache License 2.0 that the licenses label names")
	}
}

// checkLayer checks that img has one layer holding exactly files (destination: source), with
// their directories, and returns the bytes of /admit in it.
func checkLayer(t *testing.T, img v1.Image, files map[string]string) []byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v; want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s is owned by %d:%d, want root: the user of the image cannot change it", h.Name, h.Uid, h.Gid)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		default:
			t.Errorf("%s: type %c, want a file or a directory", h.Name, h.Typeflag)
		}
		if h.Name == "admit" && h.Mode != 0o755 {
			t.Errorf("/admit has mode %o, want 755", h.Mode)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		got["/"+h.Name] = data
	}
	if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, slices.Sorted(maps.Keys(files))) {
		t.Fatalf("the layer holds %q, want exactly %q: nothing else (no secret) belongs in it", names, slices.Sorted(maps.Keys(files)))
	}
	for dest, src := range files {
		if data, err := os.ReadFile(src); err != nil || !bytes.Equal(data, got[dest]) {
			t.Errorf("%s in the layer differs from %s (%v)", dest, src, err)
		}
	}
	return got["/admit"]
}

// TestImageIsReproducible builds one image twice and compares the tarballs.
func TestImageIsReproducible(t *testing.T) {
	dir := t.TempDir()
	bin, ca := filepath.Join(dir, "bin"), filepath.Join(dir, "ca")
	os.WriteFile(bin, []byte("#!/bin/false\n"), 0o755)
	os.WriteFile(ca, []byte("ca\n"), 0o644)
	var tarballs [2][]byte
	for i := range tarballs {
		out := filepath.Join(dir, fmt.Sprint(i, ".tar"))
		o := options{dockerfile: filepath.Join(repoRoot, "Dockerfile"), arch: "arm64", tag: "admit:x", out: out,
			files: map[string]string{"/admit": bin, caFile: ca}}
		if err := build(o); err != nil {
			t.Fatal(err)
		}
		var err error
		if tarballs[i], err = os.ReadFile(out); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(tarballs[0], tarballs[1]) {
		t.Error("two builds of the same files wrote different tarballs")
	}
}

// TestImageFilesMatchCopies checks that build refuses files other than the Dockerfile's COPYs.
func TestImageFilesMatchCopies(t *testing.T) {
	o := options{dockerfile: filepath.Join(repoRoot, "Dockerfile"), arch: "amd64", tag: "admit:x", out: filepath.Join(t.TempDir(), "x.tar"),
		files: map[string]string{"/admit": "/dev/null", "/secret": "/dev/null"}}
	if err := build(o); err == nil || !strings.Contains(err.Error(), "COPY destinations") {
		t.Errorf("build with a file the Dockerfile does not copy: %v, want an error naming the COPY destinations", err)
	}
}

// randomHex returns 8 random hex digits.
func randomHex(t *testing.T) string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// checkDemo sends GET /demo to base four times and checks 200, 200, 200, 429.
func checkDemo(t *testing.T, base string) {
	t.Helper()
	var got []int
	for range 4 {
		res, err := http.Get(base + "/demo")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		got = append(got, res.StatusCode)
	}
	if !slices.Equal(got, []int{200, 200, 200, 429}) {
		t.Errorf("GET /demo x4 = %v, want [200 200 200 429]", got)
	}
}

// listeningRE matches the log line of admit serve's HTTP address.
var listeningRE = regexp.MustCompile(`msg=listening addr=(\S+)`)

// runBinary runs the admit binary taken out of the image's layer with the image's Cmd and Env,
// ADMIT_LISTEN moved to loopback, and checks the demo.
func runBinary(t *testing.T, binary []byte, c v1.Config) {
	bin := filepath.Join(t.TempDir(), "admit")
	if err := os.WriteFile(bin, binary, 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"ADMIT_LISTEN=127.0.0.1:0"} // the image's :8080 is every interface of the test machine
	for _, e := range c.Env {
		if !strings.HasPrefix(e, "ADMIT_LISTEN=") {
			env = append(env, e)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, c.Cmd...)
	cmd.Env, cmd.Dir = env, t.TempDir()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr, read := make(chan string, 1), make(chan struct{})
	defer func() { cmd.Process.Kill(); <-read; cmd.Wait() }()
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Log(sc.Text())
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		checkDemo(t, "http://"+a)
	case <-ctx.Done():
		t.Fatal("the binary of the image did not listen within a minute")
	}
}

// TestImageDefaultTarball checks that make image writes the pinned bin/admit-image.tar when
// IMAGE_TAR is not set (TestImage sets it), from the binary it builds under bin/.
func TestImageDefaultTarball(t *testing.T) {
	out := makeDryRun(t, "image")
	root := absRepo(t)
	bin := root + "/bin/admit-linux-" + runtime.GOARCH
	for _, want := range []string{
		" -o " + bin + " ./cmd/admit\n",
		" -o " + root + "/bin/admit-image.tar ",
		" -file /admit=" + bin + " ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("make -n image lacks %q:\n%s", want, out)
		}
	}
}
