package syncbuf_test

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/admit-dev/admit/internal/syncbuf"
)

// A Buffer collects the log of concurrent goroutines; the test reads it when they are done.
func Example() {
	var logs syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // for a stable Output
			}
			return a
		},
	}))
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { logger.Info("done") })
	}
	wg.Wait()
	fmt.Println(len(logs.Lines()), "lines")
	fmt.Print(logs.Lines()[0])
	// Output:
	// 3 lines
	// level=INFO msg=done
}

func TestLines(t *testing.T) {
	for _, tc := range []struct {
		written string
		want    []string
	}{
		{"", nil},
		{" \n\n", nil},
		{"a\n", []string{"a"}},
		{"a\nb", []string{"a", "b"}},
		{"\na\n\nb\n\n", []string{"a", "", "b"}},
	} {
		var b syncbuf.Buffer
		fmt.Fprint(&b, tc.written)
		if got := b.Lines(); !slices.Equal(got, tc.want) {
			t.Errorf("Lines of %q = %q, want %q", tc.written, got, tc.want)
		}
		if b.String() != tc.written {
			t.Errorf("String = %q, want %q", b.String(), tc.written)
		}
	}
}

// TestConcurrentWrites writes from many goroutines while another reads; run it with -race.
func TestConcurrentWrites(t *testing.T) {
	var b syncbuf.Buffer
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 100 {
				fmt.Fprintln(&b, "line")
				_ = b.Lines()
			}
		})
	}
	wg.Wait()
	if n := len(b.Lines()); n != 1600 {
		t.Errorf("%d lines, want 1600", n)
	}
}
