// Package guard holds admit.Store decorators for bad days: a circuit breaker, a local over-limit
// cache, and a fail-open fallback. Each wraps another Store, forwards every operation, and is itself
// an admit.Store, so they stack (metrics → guard → backend).
//
// [Breaker] is a circuit breaker. After a number of consecutive backend failures it opens: for a
// cool-off period every operation fails at once with [ErrOpen], which matches admit.ErrUnavailable,
// so a fail-closed caller answers 503 in well under a microsecond instead of waiting for its own
// timeout. Then one probe goes through; its success closes the breaker, its failure reopens it.
// Corrupt state (one key's problem), invalid requests and the caller's own cancellation do not
// count as failures.
//
// [OverLimitCache] remembers rejections. When the backend rejects a Request with a RetryAfter, a
// later Request of the same key under the same Limit and cost (or a larger cost, under a fixed
// window) is rejected locally until then, but never from a rejection older than MaxAge (a second
// by default), so a client hammering a full key costs at most one round trip per MaxAge, and a
// change made in the backend — a key deleted to give a quota back, corrupt state, a flush — is
// seen within MaxAge. It never caches what could be admitted earlier than the backend said: not
// Concurrency Limits (a release frees capacity), not shadow Limits, not peeks, not requests with
// an ID, and not a key after a refund. Its table has a fixed maximum number of entries.
//
// [FailOpen] is the bounded fail-open fallback (docs/failure-modes.md; G7 of docs/guarantees.md): while the backend cannot decide, a
// local in-process limiter decides the Requests whose Limits have a local limit, and its Decisions
// are marked Degraded. Each process then admits at most its local limit per window per key, so P
// processes admit at most P × local limit × (windows of the outage + 1); the local table has a fixed
// maximum number of keys.
//
// The decorators stack as metrics → OverLimitCache → FailOpen → Breaker → backend. Package guard
// uses admit, memstore (FailOpen's local limiter) and the standard library; package metrics exports
// the state of a Breaker and the hits of an OverLimitCache to Prometheus.
package guard
