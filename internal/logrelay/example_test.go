package logrelay_test

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/admit-dev/admit/internal/logrelay"
)

func Example() {
	// Log to stdout through a relay: logging never waits for stdout, and at exit the relay gets
	// a second to flush.
	relay := logrelay.New(os.Stdout, logrelay.Options{})
	logger := slog.New(slog.NewTextHandler(relay, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // for a stable output
			}
			return a
		},
	}))
	logger.Info("listening", "addr", "127.0.0.1:8080")
	logger.Warn("limiter unavailable")

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := relay.Close(ctx); err != nil {
		logger.Error("log lines lost", "error", err)
	}
	// Output:
	// level=INFO msg=listening addr=127.0.0.1:8080
	// level=WARN msg="limiter unavailable"
}
