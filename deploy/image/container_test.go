package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// limits are the rlimits the container is given: ones any process may set. podman run as root
// raises the open files limit by default, which a sandbox without CAP_SYS_RESOURCE refuses.
var limits = []string{"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"}

// podman runs podman with args and returns its standard output, trimmed.
func podman(args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := exec.Command("podman", args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("podman %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// runtimeFlags returns the podman flags of an OCI runtime that runs image on this machine: the
// default one, else runc. It reports why none does.
func runtimeFlags(image string) ([]string, error) {
	var errs []string
	for _, rt := range [][]string{nil, {"--runtime", "runc"}} {
		if len(rt) > 0 {
			if _, err := exec.LookPath(rt[1]); err != nil {
				errs = append(errs, rt[1]+" not found")
				continue
			}
		}
		args := append(append(append([]string{"run", "--rm", "--read-only"}, rt...), limits...), image, "version")
		out, err := podman(args...)
		if err == nil && strings.HasPrefix(out, "admit ") {
			return rt, nil
		}
		errs = append(errs, fmt.Sprintf("%v %q", err, out))
	}
	return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
}

// requireEnv names the environment variable that turns the skip of a missing podman into a
// failure, as it does for redis-server: make test sets it, and installs podman.
const requireEnv = "ADMIT_REQUIRE_REDIS"

// runContainer loads the image tarball into podman and runs it as podman run alone would (its
// own command: the demo on memory), read-only, with the HTTP port on a free loopback port, and
// checks the demo. Where podman is missing or cannot run a container here, it skips loudly.
func runContainer(t *testing.T, tarball, tag string) {
	if _, err := exec.LookPath("podman"); err != nil {
		if os.Getenv(requireEnv) == "1" {
			t.Fatalf("podman not found on PATH and %s=1: install it with: apt-get install podman runc (make test does)", requireEnv)
		}
		t.Skip("podman not found: the image was NOT RUN in a container (only its binary, outside one); install podman (make test does)")
	}
	loaded, err := podman("load", "-q", "-i", tarball)
	if err != nil {
		t.Fatal(err)
	}
	image := "localhost/" + tag
	if !strings.Contains(loaded, image) {
		t.Fatalf("podman load: %q, want it to name %s", loaded, image)
	}
	t.Cleanup(func() { podman("rmi", "-f", image) })
	rt, err := runtimeFlags(image)
	if err != nil {
		t.Skipf("podman cannot run a container on this machine: the image was NOT RUN in a container (only its binary, outside one): %v", err)
	}
	args := append(append(append([]string{"run", "-d", "--rm", "--read-only", "-p", "127.0.0.1::8080"}, rt...), limits...), image)
	id, err := podman(args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		logs, err := exec.Command("podman", "logs", id).CombinedOutput() // the container's stderr is podman's
		t.Logf("container log (%v):\n%s", err, logs)
		podman("rm", "-f", "-t", "0", id)
	})
	port, err := podman("port", id, "8080/tcp")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + port
	t.Logf("podman run %s %q: %s", image, rt, base)
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(base + "/healthz")
		if err == nil {
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == 200 {
				if !strings.HasPrefix(string(body), "ok ") {
					t.Errorf("GET /healthz in the container: %q, want ok VERSION", body)
				}
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the container did not answer /healthz within 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	checkDemo(t, base)
}
