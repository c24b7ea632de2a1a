// Package guard holds admit.Store decorators for bad days: a circuit breaker ([Breaker]), a local
// over-limit cache ([OverLimitCache]) and a bounded fail-open fallback ([FailOpen]). Each wraps
// another Store, forwards every operation, and is itself an admit.Store, so they stack, as
// metrics → OverLimitCache → FailOpen → Breaker → backend.
//
// A Breaker fails every operation at once with [ErrOpen] while its backend keeps failing; an
// OverLimitCache answers a full key's rejections locally for at most MaxAge, and never admits; a
// FailOpen decides locally, within a local limit per process, while the backend cannot decide.
// What each does on a bad day, and what it costs, is in docs/failure-modes.md.
//
// Package guard uses admit, memstore (FailOpen's local limiter) and the standard library; package
// metrics exports the state of a Breaker and the hits of an OverLimitCache to Prometheus.
package guard
