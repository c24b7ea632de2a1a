package main

import (
	"context"
	"os"
	"time"

	"github.com/admit-dev/admit/internal/tracing"
	"github.com/admit-dev/admit/service"
	"go.opentelemetry.io/otel"
)

// traceFlushTimeout is how long admit waits, as it stops, for the spans not yet exported.
const traceFlushTimeout = 5 * time.Second

// startTracing turns on the tracing of d's decisions when the OTel environment asks for it
// (tracing.FromEnv: OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint), and registers its flush among d's closers. On a
// bad variable it logs why and returns exitUsage and the error.
func (d *daemon) startTracing(ctx context.Context) (int, error) {
	t, err := tracing.FromEnv(ctx, os.Getenv, moduleVersion())
	if err != nil {
		d.logger.Error("cannot start tracing", "error", err)
		return exitUsage, err
	}
	if t == nil {
		return exitOK, nil
	}
	d.tracing = t
	logger := d.logger
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { logger.Warn("tracing", "error", err) }))
	backend := "memory"
	if d.cfg.redisURL != "" {
		backend = "redis"
	}
	d.svc.Trace(service.Tracing{Tracer: t.Tracer(), Backend: backend})
	d.closers = append(d.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
		defer cancel()
		if err := t.Shutdown(ctx); err != nil {
			logger.Warn("spans not exported", "error", err)
		}
	})
	logger.Info("tracing", "exporter", "otlp", "protocol", "grpc")
	return exitOK, nil
}
