package rlqs

import (
	"math"
	"slices"
	"time"
)

// Tuning of the shares. A new token bucket restarts full at Envoy (it replaces the bucket whose
// numbers differ), so every change costs up to one bucket of tokens: a share is sent again
// unchanged while it stays within Deadband of the one computed, and the budget split is the
// global rate divided by 1+Deadband, so that the shares sent never sum above the global rate.
const (
	// Deadband is the relative change of a share below which its Envoy keeps its token bucket.
	Deadband = 0.05
	// FloorFraction is the part of the budget split equally among the Envoys of a bucket, the
	// floor that keeps a newcomer from starving; the rest is split by demand.
	FloorFraction = 0.1
)

// Shares splits the tokens budget among the clients of demands (requests per second each, over
// their last reports): FloorFraction of it equally, the rest in proportion to demand (equally
// when no client has any). The shares are not rounded; their sum is budget.
func Shares(budget float64, demands map[string]float64) map[string]float64 {
	n := len(demands)
	out := make(map[string]float64, n)
	if n == 0 || budget <= 0 {
		return out
	}
	total := 0.0
	for _, d := range demands {
		total += d
	}
	floor := budget * FloorFraction / float64(n)
	rest := budget - floor*float64(n)
	for c, d := range demands {
		if total > 0 {
			out[c] = floor + rest*d/total
		} else {
			out[c] = budget / float64(n)
		}
	}
	return out
}

// Warmup returns how long a bucket's ledger is young after its birth (a new fleet's first report,
// or the first after the ledger was emptied) for a domain of assignment_ttl ttl: half of it. The
// TTL is configured above twice Envoy's reporting_interval, so that every Envoy of the bucket
// reports within the warm-up; until then the split of the records written so far is not trusted,
// and each Envoy is assigned its WarmShare.
func Warmup(ttl time.Duration) time.Duration { return ttl / 2 }

// WarmShare is the share of the budget of the k-th client (k from 1) of a ledger in its warm-up:
// budget/(k(k+1)), so that the shares of any number of clients sum to less than budget, in
// whatever order they report (1/2, 1/6, 1/12, ... of it: the sum of the first n is n/(n+1)).
func WarmShare(budget float64, k int) float64 {
	if k < 1 || budget <= 0 {
		return 0
	}
	return budget / (float64(k) * float64(k+1))
}

// keep reports whether a client holding tokens per fill keeps them when its computed share is
// share: within Deadband of it.
func keep(held uint32, share float64) bool {
	if held == 0 {
		return false
	}
	return math.Abs(float64(held)-share) <= Deadband*share
}

// tokens rounds a share down to whole tokens per fill, at least 1 (Envoy refuses an empty bucket).
func tokens(share float64) uint32 {
	t := math.Floor(share)
	switch {
	case t < 1:
		return 1
	case t > math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(t)
}

// burst returns the max_tokens of a bucket of perFill tokens per window of windowSeconds: one
// second of its rate, at least 1 and at most perFill, which bounds what a fresh bucket admits at
// once.
func burst(perFill uint32, windowSeconds int64) uint32 {
	b := uint32(math.Ceil(float64(perFill) / float64(windowSeconds)))
	return min(max(b, 1), perFill)
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
