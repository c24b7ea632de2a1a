package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/internal/syncbuf"
	"github.com/admit-dev/admit/redisstore"
)

// A Redis user lacking a permission the scripts need (TIME) makes serve refuse to start, exit 2,
// naming the command.
func TestPreflightRefusesToStart(t *testing.T) {
	useSecret(t)
	srv := redistest.Start(t)
	rules := strings.Replace(redisstore.ACLRules(), " +time", "", 1)
	args := append([]string{"ACL", "SETUSER", "admit", "on", ">s3cret"}, strings.Fields(rules)...)
	if err := srv.Do(t, args...).Error(); err != nil {
		t.Fatal(err)
	}
	var code int
	var out string
	for attempt := 1; ; attempt++ {
		var slow bool
		code, out, slow = serveUntilRefused(t, "redis://admit:s3cret@"+srv.Addr())
		t.Logf("exit %d, stderr:\n%s", code, out)
		if !slow {
			break
		}
		// A loaded machine: the first preflight's 200 ms command timeout passed before Redis
		// answered, so serve started, to retry the preflight later. Start it again.
		if attempt == 3 {
			t.Fatalf("in %d attempts, Redis never answered serve's first preflight in time", attempt)
		}
	}
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	for _, s := range []string{"level=ERROR", "lacks a permission", "'time'"} {
		if !strings.Contains(out, s) {
			t.Errorf("stderr lacks %q", s)
		}
	}
	if strings.Contains(out, "s3cret") {
		t.Error("stderr holds the password")
	}
}

// serveUntilRefused runs serve on url until it exits, and returns its exit code and stderr; slow
// reports that it did not exit because its first preflight found Redis not answering in time (serve
// then starts, and was stopped).
func serveUntilRefused(t *testing.T, url string) (code int, stderr string, slow bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var buf syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--redis", url}, io.Discard, &buf)
	}()
	for hang := time.After(30 * time.Second); ; {
		select {
		case code := <-done:
			return code, buf.String(), false
		case <-hang:
			t.Fatalf("serve neither exited nor started within 30s; stderr:\n%s", buf.String())
		case <-time.After(10 * time.Millisecond):
		}
		if strings.Contains(buf.String(), "the preflight will be retried") {
			cancel()
			return <-done, buf.String(), true
		}
	}
}

// A maxmemory-policy other than noeviction is a warning; serve starts.
func TestPreflightWarnsOfEviction(t *testing.T) {
	useSecret(t)
	// On a loaded machine the first preflight may not get an answer in time: the retry warns then.
	old := preflightRetryInterval
	preflightRetryInterval = 100 * time.Millisecond
	t.Cleanup(func() { preflightRetryInterval = old })
	srv := redistest.Start(t, "--maxmemory-policy", "allkeys-lru")
	// The unrestricted default user: the least-privilege one may not read maxmemory-policy.
	base, logs, stop := serveInProcess(t, "--redis", srv.AdminURL())
	checkDemo(t, base, 200)
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(logs.String(), "maxmemory-policy is allkeys-lru") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if code := stop(); code != 0 {
		t.Errorf("run returned %d, want 0", code)
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "maxmemory-policy is allkeys-lru") {
		t.Errorf("no warning of allkeys-lru in the log:\n%s", out)
	}
}

// While Redis is down serve starts, says the preflight will be retried, and runs it once Redis is up.
func TestPreflightRetriedWhileDown(t *testing.T) {
	useSecret(t)
	old := preflightRetryInterval
	preflightRetryInterval = 100 * time.Millisecond
	t.Cleanup(func() { preflightRetryInterval = old })
	srv := redistest.Start(t)
	srv.Stop(t)
	base, logs, stop := serveInProcess(t, "--redis", srv.URL())
	checkDemo(t, base, 503)
	if !strings.Contains(logs.String(), "the preflight will be retried") {
		t.Errorf("the log does not say the preflight will be retried:\n%s", logs)
	}
	srv.Restart(t)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "Redis preflight passed") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if code := stop(); code != 0 {
		t.Errorf("run returned %d, want 0", code)
	}
	if !strings.Contains(logs.String(), "Redis preflight passed") {
		t.Errorf("the preflight did not pass once Redis was up:\n%s", logs)
	}
}
