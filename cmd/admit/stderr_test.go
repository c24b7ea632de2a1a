package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/redistest"
)

// The tests here check that logging cannot take the service down: undecided requests are logged at
// a bounded rate, and a stderr that stops draining costs log lines, never requests or the exit.

// stallingWriter passes writes on to logs until one holds after, and then blocks every write until
// the test ends: a stderr whose reader stopped reading once the server was up.
type stallingWriter struct {
	logs    *logWatch
	after   string
	release chan struct{} // closed at the test's cleanup

	mu      sync.Mutex
	stalled bool
	blocked int // writes waiting, now or in the past
}

func (w *stallingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	if !w.stalled {
		w.stalled = strings.Contains(string(p), w.after)
		w.mu.Unlock()
		return w.logs.Write(p)
	}
	w.blocked++
	w.mu.Unlock()
	<-w.release
	return len(p), nil
}

func (w *stallingWriter) blockedWrites() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.blocked
}

// TestServeStalledStderr serves many undecided requests with a stderr that stalled once the server
// was listening: each is answered 503, and the server still stops promptly and exits 0.
func TestServeStalledStderr(t *testing.T) {
	useSecret(t)
	logs := &logWatch{}
	stderr := &stallingWriter{logs: logs, after: "msg=listening", release: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := make(chan int, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		code <- run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--redis", "redis://" + redistest.ClosedPort(t)}, io.Discard, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		<-exited
	})
	// Cleanups run last-in first-out: if the test fails with run stuck on stderr, this one
	// unblocks it before the one above waits for it.
	t.Cleanup(func() { close(stderr.release) })
	base := "http://" + logs.waitAddr(t, exited)

	for i := range 200 {
		if r := get(t, base+"/demo"); r.status != http.StatusServiceUnavailable {
			t.Fatalf("request %d: GET /demo = %d, want 503", i+1, r.status)
		}
	}
	if stderr.blockedWrites() == 0 {
		t.Error("no write reached the stalled stderr: the test proves nothing")
	}

	cancel()
	select {
	case c := <-code:
		if c != exitOK {
			t.Errorf("run = %d after cancel, want %d", c, exitOK)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return within 15s of cancel with stderr stalled")
	}
	t.Logf("log before the stall:\n%s", logs)
}

// TestServeLogsUndecidedAtBoundedRate sends many undecided requests: they are logged once, plus at
// most a summary per 10s, not once each.
func TestServeLogsUndecidedAtBoundedRate(t *testing.T) {
	useSecret(t)
	base, logs, stop := serveInProcess(t, "--redis", "redis://"+redistest.ClosedPort(t))
	start := time.Now()
	const n = 500
	for i := range n {
		if r := get(t, base+"/demo"); r.status != http.StatusServiceUnavailable {
			t.Fatalf("request %d: GET /demo = %d, want 503", i+1, r.status)
		}
	}
	elapsed := time.Since(start)
	if code := stop(); code != exitOK {
		t.Errorf("run = %d, want %d", code, exitOK)
	}
	records := strings.Count(logs.String(), `msg="limiter unavailable"`)
	t.Logf("%d undecided requests in %v: %d log records\n%s", n, elapsed, records, logs)
	if limit := 2 + int(elapsed/(10*time.Second)); records < 1 || records > limit {
		t.Errorf("%d records of %d undecided requests in %v, want 1…%d", records, n, elapsed, limit)
	}
}
