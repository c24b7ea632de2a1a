// Package ratelimitfield writes the RateLimit-Policy and RateLimit header fields of
// draft-ietf-httpapi-ratelimit-headers-10 (SPEC §6) for Limits and their Decisions: the one
// serializer of httplimit's middleware and the service's JSON API.
package ratelimitfield

import (
	"net/http"
	"strconv"
	"time"

	"github.com/admit-dev/admit"
)

// The fields' names, canonical, as they are keys of an http.Header.
const (
	PolicyName = "Ratelimit-Policy"
	Name       = "Ratelimit"
)

// Policy returns the RateLimit-Policy field value that describes limits, one list member per Limit
// in order (draft-ietf-httpapi-ratelimit-headers-10 §3), such as
//
//	"per-second";q=10;w=1, "per-day";q=1000;w=86400
//
// q is the quota and w the window in whole seconds, rounded up: Rate per Period; for GCRA,
// Capacity (the burst) per the time an empty bucket takes to fill again, so that q bounds the r
// that RateLimit reports. A Concurrency Limit has q leases in flight, qu="concurrent-requests",
// and no window. A Limit in shadow mode has no member: the client is not held to it. Policy returns
// "" when every Limit is in shadow mode, and reports false if a name cannot be a structured-field
// string, which no valid Limit's can.
func Policy(limits []admit.Limit) (string, bool) {
	var buf [256]byte
	b, ok := appendPolicy(buf[:0], limits)
	if !ok {
		return "", false
	}
	return string(b), true
}

// appendPolicy appends the RateLimit-Policy field value of limits to b, as Policy returns it.
func appendPolicy(b []byte, limits []admit.Limit) ([]byte, bool) {
	start := len(b)
	for _, l := range limits {
		if l.Shadow {
			continue // not enforced: no quota of the client's
		}
		if len(b) > start {
			b = append(b, ", "...)
		}
		var ok bool
		if b, ok = appendSFString(b, l.Name); !ok {
			return b, false
		}
		b = appendInt(append(b, ";q="...), l.Capacity())
		switch l.Algorithm {
		case admit.Concurrency:
			b = append(b, `;qu="concurrent-requests"`...)
			continue
		case admit.GCRA:
			b = appendW(b, time.Duration(l.Capacity())*l.EmissionInterval())
		default:
			b = appendW(b, l.Period)
		}
	}
	return b, true
}

// appendW appends the w parameter of window d, in whole seconds, rounded up, at least 1.
func appendW(b []byte, d time.Duration) []byte {
	return appendInt(append(b, ";w="...), admit.CeilSeconds(d))
}

// maxSFInteger is the largest structured-field Integer (RFC 9651 §3.3.1): 15 digits.
const maxSFInteger = 999_999_999_999_999

// appendInt appends n as a structured-field Integer, capped at maxSFInteger: only a quota of
// admit.MaxRate, 10^15, exceeds it.
func appendInt(b []byte, n int64) []byte {
	return strconv.AppendInt(b, min(n, maxSFInteger), 10)
}

// appendSFString appends s as a structured-field String (RFC 8941 §4.1.6) and reports whether it
// could: s must be printable ASCII.
func appendSFString(b []byte, s string) ([]byte, bool) {
	b = append(b, '"')
	for i := range len(s) {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			return b, false
		}
		if c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, c)
	}
	return append(b, '"'), true
}

// AppendRateLimit appends the RateLimit field value of the Decisions ds of limits, one list member
// per policy in the Limiter's order (draft-ietf-httpapi-ratelimit-headers-10 §4), such as
//
//	"per-second";r=3;t=1, "per-day";r=997;t=86400
//
// r is the Decision's Remaining (at least 0) and t the seconds until more quota, rounded up: the
// RetryAfter of a policy that rejected, the ResetAfter of one that admitted. retryAfter is the
// Retry-After of a 429 response, 0 otherwise: no member's t is below it, so a client that waits
// for any t never retries before Retry-After. On a 429, the r of a policy that would have admitted
// is what it has left: nothing was consumed. A Limit in shadow mode has no member, as in Policy.
// Integers are capped at 15 digits, as structured fields require.
func AppendRateLimit(b []byte, limits []admit.Limit, ds []admit.Decision, retryAfter int64) []byte {
	start := len(b)
	for i := range ds {
		d := &ds[i]
		if limits[i].Shadow {
			continue
		}
		if len(b) > start {
			b = append(b, ", "...)
		}
		b, _ = appendSFString(b, limits[i].Name)
		b = appendInt(append(b, ";r="...), max(d.Remaining, 0))
		var t int64
		if d.Allowed {
			t = ceilSeconds(d.ResetAfter)
		} else {
			t = admit.CeilSeconds(d.RetryAfter)
		}
		b = appendInt(append(b, ";t="...), max(t, retryAfter))
	}
	return b
}

// Set sets the RateLimit-Policy and RateLimit fields of hdr for the Decisions ds, each of its own
// Limit (Decision.Limit); retryAfter is the Retry-After of a 429, 0 otherwise. It sets neither when
// every Limit is in shadow mode.
func Set(hdr http.Header, ds []admit.Decision, retryAfter int64) {
	var lbuf [admit.MaxRequests]admit.Limit
	limits := lbuf[:0]
	for i := range ds {
		limits = append(limits, ds[i].Limit)
	}
	var buf [512]byte
	policy, ok := appendPolicy(buf[:0], limits)
	if !ok || len(policy) == 0 {
		return
	}
	fields := AppendRateLimit(policy, limits, ds, retryAfter)
	text := string(fields)                                   // one allocation for both fields' text
	vals := []string{text[:len(policy)], text[len(policy):]} // and one for both fields' slices
	hdr[PolicyName] = vals[0:1:1]
	hdr[Name] = vals[1:2:2]
}

// ceilSeconds returns d rounded up to whole seconds, and 0 for d ≤ 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return admit.CeilSeconds(d)
}
