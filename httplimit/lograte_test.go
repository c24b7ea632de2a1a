package httplimit_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/httplimit"
	"github.com/admit-dev/admit/internal/syncbuf"
)

// The log-rate tests run in a synctest bubble: time.Sleep advances a fake clock at once, and the
// summary timers fire at exactly the fake time they are due.

// countingStore fails every Take with ErrUnavailable, numbering the attempts in the error.
func countingStore() admit.Store {
	var n atomic.Int64
	return storeFunc(func(context.Context, admit.Request) (admit.Decision, error) {
		return admit.Decision{}, fmt.Errorf("teststore: attempt %d: %w", n.Add(1), admit.ErrUnavailable)
	})
}

// burst sends n GET requests through h and checks that each is answered 503.
func burst(t *testing.T, h http.Handler, n int) {
	t.Helper()
	for i := range n {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
		if rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("request %d: status %d, want 503", i+1, rec.Code)
		}
	}
}

// wantLines checks that the log holds len(want) lines, the i-th holding every substring of want[i].
func wantLines(t *testing.T, logs *syncbuf.Buffer, want ...[]string) {
	t.Helper()
	lines := logs.Lines()
	if len(lines) != len(want) {
		t.Fatalf("%d log lines, want %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for i, subs := range want {
		for _, s := range subs {
			if !strings.Contains(lines[i], s) {
				t.Errorf("log line %d lacks %q: %s", i+1, s, lines[i])
			}
		}
	}
}

// TestLogRateBurst sends bursts of undecided requests: the first of a burst is logged at once, and
// the rest are reported by one summary record per interval with their count and the last error.
func TestLogRateBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncbuf.Buffer
		m := &httplimit.Middleware{
			Limiter: newLimiter(t, countingStore(), demoLimit),
			Subject: httplimit.Constant("k"),
			Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
		}
		h := m.Wrap(http.NotFoundHandler())
		first := []string{`level=WARN msg="limiter unavailable"`, "attempt 1:", "method=GET path=/x"}

		burst(t, h, 1000)
		wantLines(t, &logs, first)

		time.Sleep(httplimit.DefaultLogInterval - time.Millisecond)
		synctest.Wait()
		wantLines(t, &logs, first) // not a moment early

		time.Sleep(time.Millisecond)
		synctest.Wait()
		summary1 := []string{`level=WARN msg="limiter unavailable"`, "suppressed=999 ", "interval=10s", "attempt 1000:"}
		wantLines(t, &logs, first, summary1)

		// The summary started a new interval: its records are counted, and summed up at its end.
		time.Sleep(time.Second)
		burst(t, h, 500)
		wantLines(t, &logs, first, summary1)
		time.Sleep(httplimit.DefaultLogInterval)
		synctest.Wait()
		summary2 := []string{"suppressed=500 ", "attempt 1500:"}
		wantLines(t, &logs, first, summary1, summary2)

		// Quiet for a while: nothing more is written, and the next record is logged at once.
		time.Sleep(time.Minute)
		synctest.Wait()
		wantLines(t, &logs, first, summary1, summary2)
		burst(t, h, 1)
		wantLines(t, &logs, first, summary1, summary2, []string{`msg="limiter unavailable"`, "attempt 1501:"})
		if strings.Contains(logs.Lines()[3], "suppressed=") {
			t.Error("a fresh record after a quiet interval carries a suppressed count")
		}
	})
}

// TestLogRateConfigurable checks that LogInterval sets the interval.
func TestLogRateConfigurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncbuf.Buffer
		m := &httplimit.Middleware{
			Limiter:     newLimiter(t, countingStore(), demoLimit),
			Subject:     httplimit.Constant("k"),
			Logger:      slog.New(slog.NewTextHandler(&logs, nil)),
			LogInterval: time.Minute,
		}
		h := m.Wrap(http.NotFoundHandler())
		burst(t, h, 10)
		time.Sleep(59 * time.Second)
		synctest.Wait()
		wantLines(t, &logs, []string{"attempt 1:"})
		time.Sleep(time.Second)
		synctest.Wait()
		wantLines(t, &logs, []string{"attempt 1:"}, []string{"suppressed=9 ", "interval=1m0s", "attempt 10:"})
	})
}

// TestLogRateNegativeLogsAll checks that a negative LogInterval logs every record.
func TestLogRateNegativeLogsAll(t *testing.T) {
	var logs syncbuf.Buffer
	m := &httplimit.Middleware{
		Limiter:     newLimiter(t, countingStore(), demoLimit),
		Subject:     httplimit.Constant("k"),
		Logger:      slog.New(slog.NewTextHandler(&logs, nil)),
		LogInterval: -1,
	}
	burst(t, m.Wrap(http.NotFoundHandler()), 100)
	if n := len(logs.Lines()); n != 100 {
		t.Errorf("%d log lines for 100 undecided requests, want 100", n)
	}
}

// TestLogRateKinds checks that each kind of record (level and message) has its own rate.
func TestLogRateKinds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncbuf.Buffer
		var n atomic.Int64
		store := storeFunc(func(context.Context, admit.Request) (admit.Decision, error) {
			if n.Add(1)%2 == 0 {
				return admit.Decision{}, fmt.Errorf("teststore: %w", admit.ErrCorruptState)
			}
			return admit.Decision{}, fmt.Errorf("teststore: %w", admit.ErrUnavailable)
		})
		m := &httplimit.Middleware{
			Limiter: newLimiter(t, store, demoLimit),
			Subject: httplimit.Constant("k"),
			Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
		}
		burst(t, m.Wrap(http.NotFoundHandler()), 100)
		unavailable, corrupt := []string{`level=WARN msg="limiter unavailable"`}, []string{`level=ERROR msg="corrupt limiter state"`}
		wantLines(t, &logs, unavailable, corrupt)
		time.Sleep(httplimit.DefaultLogInterval)
		synctest.Wait()
		lines := logs.Lines()
		if len(lines) != 4 {
			t.Fatalf("%d log lines, want 4:\n%s", len(lines), strings.Join(lines, "\n"))
		}
		// The two summaries are due at the same instant, in either order.
		if !strings.Contains(lines[2]+lines[3], `level=WARN msg="limiter unavailable" limit=demo suppressed=49 `) ||
			!strings.Contains(lines[2]+lines[3], `level=ERROR msg="corrupt limiter state" limit=demo suppressed=49 `) {
			t.Errorf("want one summary of 49 per kind:\n%s", strings.Join(lines[2:], "\n"))
		}
	})
}

// TestLogRateConcurrent checks the count when many goroutines fail at once.
func TestLogRateConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncbuf.Buffer
		m := &httplimit.Middleware{
			Limiter: newLimiter(t, countingStore(), demoLimit),
			Subject: httplimit.Constant("k"),
			Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
		}
		h := m.Wrap(http.NotFoundHandler())
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() { burst(t, h, 50) })
		}
		wg.Wait()
		time.Sleep(httplimit.DefaultLogInterval)
		synctest.Wait()
		wantLines(t, &logs, []string{`msg="limiter unavailable"`}, []string{"suppressed=3199 "})
	})
}

// blockingWriter blocks every Write until release is closed, then writes to w.
type blockingWriter struct {
	release <-chan struct{}
	w       io.Writer
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	<-b.release
	return b.w.Write(p)
}

// TestLogRateBlockedLogger checks that a logger that blocks holds up only the request writing the
// first record: the others are counted and answered, and the count is reported once it unblocks.
func TestLogRateBlockedLogger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncbuf.Buffer
		release := make(chan struct{})
		m := &httplimit.Middleware{
			Limiter: newLimiter(t, countingStore(), demoLimit),
			Subject: httplimit.Constant("k"),
			Logger:  slog.New(slog.NewTextHandler(&blockingWriter{release: release, w: &logs}, nil)),
		}
		h := m.Wrap(http.NotFoundHandler())
		firstDone := make(chan struct{})
		go func() {
			defer close(firstDone)
			burst(t, h, 1)
		}()
		synctest.Wait() // the first request is writing its record, blocked

		burst(t, h, 1000) // would deadlock the bubble if any of them waited on the logger
		time.Sleep(3 * httplimit.DefaultLogInterval)
		synctest.Wait()
		wantLines(t, &logs)

		close(release)
		<-firstDone
		synctest.Wait()
		wantLines(t, &logs, []string{"attempt 1:"})
		time.Sleep(httplimit.DefaultLogInterval)
		synctest.Wait()
		wantLines(t, &logs, []string{"attempt 1:"}, []string{"suppressed=1000 ", "attempt 1001:"})
	})
}

// TestLogRateDisabledLevel checks that records below the logger's level are neither written nor
// summed up.
func TestLogRateDisabledLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncbuf.Buffer
		m := &httplimit.Middleware{
			Limiter: newLimiter(t, countingStore(), demoLimit),
			Subject: httplimit.Constant("k"),
			Logger:  slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelError})),
		}
		burst(t, m.Wrap(http.NotFoundHandler()), 100)
		time.Sleep(time.Minute)
		synctest.Wait()
		wantLines(t, &logs)
	})
}
