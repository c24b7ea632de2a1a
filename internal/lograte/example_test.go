package lograte_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/admit-dev/admit/internal/lograte"
)

func Example() {
	// A text log without times, so that the output is the same at every run.
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: noTime}))
	const unavailable = 0
	log := lograte.New(logger, 50*time.Millisecond, lograte.Kind{Level: slog.LevelWarn, Msg: "limiter unavailable"})

	for range 100 { // an outage: a hundred failures at once
		log.Log(context.Background(), unavailable, errors.New("connection refused"), slog.String("path", "/v1/check"))
	}
	time.Sleep(200 * time.Millisecond) // the interval ends: one summary of the 99 counted
	// Output:
	// level=WARN msg="limiter unavailable" path=/v1/check error="connection refused"
	// level=WARN msg="limiter unavailable" suppressed=99 interval=50ms error="connection refused"
}
