// Package bound holds the numbers that bound a Limit, a Request and a key: the one place package
// admit, its Stores and its adapters read them from. It imports only the standard library, so the
// root package may stand on it. Library users learn the bounds from the doc comments of the fields
// they bound and from the errors, which name them.
package bound

import "time"

// Bounds on a Limit, enforced by admit's Limit.Validate.
const (
	// MaxRate is the largest Rate: 10^15, inside the structured-field integer range and exact in the
	// doubles that Redis's Lua uses.
	MaxRate int64 = 1_000_000_000_000_000
	// MinPeriod is the shortest Period.
	MinPeriod = time.Millisecond
	// MaxPeriod is the longest Period: 366 days.
	MaxPeriod = 366 * 24 * time.Hour
	// MaxSlidingLogRate is the largest Rate of a SlidingLog: the log keeps one timestamp per
	// admitted unit, so a key's memory grows with its Rate — in Redis about 129 bytes per unit,
	// 1.23 MiB for a full log at this Rate (docs/sliding-log.md).
	MaxSlidingLogRate int64 = 10_000
	// MaxConcurrency is the largest Rate of a Concurrency Limit: a key keeps every lease in flight,
	// so its memory grows with the leases held, up to this many.
	MaxConcurrency int64 = 100_000
	// MaxNameLen is the longest policy name, and the longest key version.
	MaxNameLen = 64
	// MaxReplicas is the most replicas a replicated Limit may wait for.
	MaxReplicas = 16
	// MaxReplicaTimeout is the longest a replicated Limit may wait for its replicas.
	MaxReplicaTimeout = time.Minute
)

// Bounds on a GCRA Limit (docs/gcra.md), enforced by admit's Limit.Validate.
const (
	// MaxTolerance is the longest time a full GCRA bucket may take to empty, Capacity ×
	// EmissionInterval: 2^52 µs, about 142 years. A stored TAT is then at most now + MaxTolerance,
	// an integer below 2^53 µs, exact in Lua's doubles, until the year 2112.
	MaxTolerance = (1 << 52) * time.Microsecond
	// MaxIntervalRounding bounds how much rounding the emission interval up to the microsecond may
	// slow a GCRA Limit's rate: less than 1/MaxIntervalRounding, 1%.
	MaxIntervalRounding = 100
)

// Bounds on a request, enforced by admit's Request.Validate and ValidateAll.
const (
	// MaxKeyLen is the longest key, in bytes.
	MaxKeyLen = 512
	// MaxIDLen is the longest request ID, in bytes.
	MaxIDLen = 128
	// MaxRequests is the most Requests one TakeAll decides together.
	MaxRequests = 16
	// MaxResetKeys is the most keys one Store.Reset deletes.
	MaxResetKeys = 1024
)

// Bounds on a KeyBuilder's inputs, and the shape of its keys.
const (
	// MinSecretLen is the shortest HMAC secret a KeyBuilder accepts, in bytes.
	MinSecretLen = 16
	// MaxSubjectLen is the longest subject (and slot subject), in bytes.
	MaxSubjectLen = 1 << 20
	// DigestLen is the length of a digest in a key: hex characters of a truncated HMAC-SHA256.
	DigestLen = 32
	// DefaultVersion is the key version of a Limiter made by admit's NewLimiter.
	DefaultVersion = "1"
)

// SlotCount is the number of Redis Cluster hash slots.
const SlotCount = 16384
