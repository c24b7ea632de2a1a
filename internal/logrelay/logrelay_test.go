package logrelay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/logrelay"
	"github.com/admit-dev/admit/internal/syncbuf"
)

// hangGuard bounds how long a test waits for something that must not block. It is a guard against
// a hang, not a claim about speed.
const hangGuard = 5 * time.Second

// steppedWriter hands each Write to the test on entered, and finishes it when the test sends on
// proceed; closing proceed lets every Write through.
type steppedWriter struct {
	entered chan string
	proceed chan struct{}
	out     syncbuf.Buffer
}

func newSteppedWriter() *steppedWriter {
	return &steppedWriter{entered: make(chan string), proceed: make(chan struct{})}
}

func (w *steppedWriter) Write(p []byte) (int, error) {
	w.entered <- string(p)
	<-w.proceed
	return w.out.Write(p)
}

// next waits for the next Write to start, checks it is want, and lets it finish.
func (w *steppedWriter) next(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-w.entered:
		if got != want {
			t.Errorf("written %q, want %q", got, want)
		}
	case <-time.After(hangGuard):
		t.Fatalf("no Write of %q within %v", want, hangGuard)
	}
	w.proceed <- struct{}{}
}

// returnsPromptly runs f and fails t if it has not returned within hangGuard.
func returnsPromptly(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(hangGuard):
		t.Fatalf("%s did not return within %v", what, hangGuard)
	}
}

func dropped(n int64) []byte { return fmt.Appendf(nil, "dropped %d\n", n) }

func TestRelayWritesInOrder(t *testing.T) {
	var out syncbuf.Buffer
	r := logrelay.New(&out, logrelay.Options{})
	var want strings.Builder
	for i := range 100 {
		line := fmt.Sprintf("line %d\n", i)
		want.WriteString(line)
		if n, err := fmt.Fprint(r, line); n != len(line) || err != nil {
			t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(line))
		}
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if out.String() != want.String() {
		t.Errorf("written:\n%s\nwant:\n%s", out.String(), want.String())
	}
	if r.Dropped() != 0 {
		t.Errorf("Dropped = %d, want 0", r.Dropped())
	}
}

// TestRelayStalledDestination writes a burst while the destination is stalled: every Write
// returns, the lines beyond the queue are dropped and counted, and once the destination drains the
// count is reported where the lines went missing.
func TestRelayStalledDestination(t *testing.T) {
	w := newSteppedWriter()
	r := logrelay.New(w, logrelay.Options{MaxLines: 4, DroppedLine: dropped})
	defer close(w.proceed)

	fmt.Fprint(r, "first\n")
	select {
	case got := <-w.entered: // the copying goroutine now waits on the destination
		if got != "first\n" {
			t.Fatalf("written %q first", got)
		}
	case <-time.After(hangGuard):
		t.Fatal("nothing written")
	}
	returnsPromptly(t, "a burst of 10000 Writes to a stalled destination", func() {
		for i := range 10000 {
			fmt.Fprintf(r, "burst %d\n", i)
		}
	})
	if got := r.Dropped(); got != 10000-4 {
		t.Errorf("Dropped = %d, want %d (all but the 4 queued)", got, 10000-4)
	}

	w.proceed <- struct{}{} // "first" is written
	w.next(t, "burst 0\n")  // now queued: burst 1…3
	fmt.Fprint(r, "after\n")
	w.next(t, "burst 1\n")
	w.next(t, "burst 2\n")
	w.next(t, "burst 3\n")
	w.next(t, "dropped 9996\n") // reported where the lines went missing: before "after"
	w.next(t, "after\n")

	fmt.Fprint(r, "last\n")
	w.next(t, "last\n")
	if err := r.Close(context.Background()); err != nil {
		t.Errorf("Close = %v", err)
	}
}

// TestRelayReportsDropsWhenDrained checks that dropped lines are reported as soon as the
// destination drains, without waiting for another line.
func TestRelayReportsDropsWhenDrained(t *testing.T) {
	w := newSteppedWriter()
	r := logrelay.New(w, logrelay.Options{MaxLines: 1, DroppedLine: dropped})
	defer close(w.proceed)
	fmt.Fprint(r, "a\n")
	<-w.entered
	fmt.Fprint(r, "b\n") // queued
	fmt.Fprint(r, "c\n") // dropped
	fmt.Fprint(r, "d\n") // dropped
	w.proceed <- struct{}{}
	w.next(t, "b\n")
	w.next(t, "dropped 2\n")
	if err := r.Close(context.Background()); err != nil {
		t.Errorf("Close = %v", err)
	}
}

func TestRelayMaxBytes(t *testing.T) {
	var out syncbuf.Buffer
	r := logrelay.New(&out, logrelay.Options{MaxBytes: 8, DroppedLine: dropped})
	fmt.Fprint(r, "this line is too long\n")
	fmt.Fprint(r, "short\n")
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "dropped 1\nshort\n"; got != want {
		t.Errorf("written %q, want %q", got, want)
	}
}

// TestRelayCloseStalled checks that Close gives up on a destination that never drains, once its
// context is done, and that Writes after it still return.
func TestRelayCloseStalled(t *testing.T) {
	stalled := make(chan struct{})
	defer close(stalled)
	r := logrelay.New(writerFunc(func(p []byte) (int, error) { <-stalled; return len(p), nil }), logrelay.Options{})
	for i := range 100 {
		fmt.Fprintf(r, "line %d\n", i)
	}
	var err error
	returnsPromptly(t, "Close with a 50ms deadline on a stalled destination", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		err = r.Close(ctx)
	})
	t.Logf("Close = %v", err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want an error matching context.DeadlineExceeded", err)
	}
	returnsPromptly(t, "Write after Close", func() { fmt.Fprint(r, "late\n") })
}

// TestRelayConcurrent writes from many goroutines to a slow destination: every line is either
// written, whole, or counted as dropped.
func TestRelayConcurrent(t *testing.T) {
	var out syncbuf.Buffer
	r := logrelay.New(writerFunc(func(p []byte) (int, error) {
		time.Sleep(time.Microsecond)
		return out.Write(p)
	}), logrelay.Options{MaxLines: 16, DroppedLine: func(int64) []byte { return nil }})
	const goroutines, lines = 32, 200
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range lines {
				fmt.Fprintf(r, "g%d line %d\n", g, i)
			}
		})
	}
	wg.Wait()
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	written := strings.Count(out.String(), "\n")
	t.Logf("%d written, %d dropped", written, r.Dropped())
	if int64(written)+r.Dropped() != goroutines*lines {
		t.Errorf("%d written + %d dropped, want %d", written, r.Dropped(), goroutines*lines)
	}
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		var g, i int
		if _, err := fmt.Sscanf(line, "g%d line %d", &g, &i); err != nil {
			t.Errorf("torn line %q", line)
		}
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
