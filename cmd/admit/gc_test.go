package main

import (
	"io"
	"log/slog"
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	tuneGC(func(string) string { return "" }, logger)
	if got := debug.SetGCPercent(100); got != redisGCPercent {
		t.Errorf("without GOGC: the target is %d, want %d", got, redisGCPercent)
	}
	tuneGC(func(name string) string {
		if name == "GOGC" {
			return "50"
		}
		return ""
	}, logger)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set: the target changed to %d, want it left alone", got)
	}
}
