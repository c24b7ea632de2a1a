package main

import (
	"log/slog"
	"runtime/debug"
)

// redisGCPercent is the garbage collector's target (GOGC) of a service on Redis when the
// environment sets no GOGC. Its heap is then connections, buffers and each request's short-lived
// objects, a few MiB live: at Go's default of 100 the collector ran tens of times a second under
// load, and each cycle shrank the stacks of the idle gRPC workers, which the next request grew
// again. At 400 the heap may reach five times the live one; the service's CPU per decision fell by
// about a sixth (BENCHMARKS.md, "Service"). On the memory backend the heap is the counters, so Go's
// default stays.
const redisGCPercent = 400

// tuneGC sets the collector's target to redisGCPercent unless getenv("GOGC") sets one: for admit
// serve and admit proxy on Redis.
func tuneGC(getenv func(string) string, logger *slog.Logger) {
	if getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(redisGCPercent)
	logger.Info("garbage collector", "gogc", redisGCPercent, "note", "the default on Redis; GOGC sets another")
}
