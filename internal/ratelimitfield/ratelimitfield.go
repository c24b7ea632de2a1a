// Package ratelimitfield writes the RateLimit-Policy and RateLimit header fields of
// draft-ietf-httpapi-ratelimit-headers-11 (docs/http.md) for Limits and their Decisions: the one
// serializer of httplimit's middleware and the service's JSON API. [Set] and [AppendRateLimit]
// serve any Decisions; a [Fields], for the fixed Limits of a middleware, computes what does not
// change once and writes the same bytes faster (tested against AppendRateLimit).
package ratelimitfield

import (
	"math/bits"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
)

// The fields' names, canonical, as they are keys of an http.Header.
const (
	PolicyName = "Ratelimit-Policy"
	Name       = "Ratelimit"
)

// Policy returns the RateLimit-Policy field value that describes limits, one list member per Limit
// in order (draft-ietf-httpapi-ratelimit-headers-11), such as
//
//	"per-second";q=10;w=1, "per-day";q=1000;w=86400
//
// q is the quota, [admit.Limit.Capacity], and w its window, [Window], in whole
// seconds, rounded up: Rate per Period; for GCRA, the bucket (Burst, or Rate) per the time an empty
// bucket takes to fill again at the nominal rate, Burst × Period / Rate, so that q bounds the r
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
		if l.Algorithm == admit.Concurrency {
			b = append(b, `;qu="concurrent-requests"`...)
			continue
		}
		b = appendW(b, Window(l))
	}
	return b, true
}

// appendW appends the w parameter of window d, in whole seconds, rounded up, at least 1.
func appendW(b []byte, d time.Duration) []byte {
	return appendInt(append(b, ";w="...), CeilSeconds(d))
}

// maxSFInteger is the largest structured-field Integer (RFC 9651 §3.3.1): 15 digits.
const maxSFInteger = 999_999_999_999_999

// appendInt appends n as a structured-field Integer, capped at maxSFInteger: only a quota of
// bound.MaxRate, 10^15, exceeds it.
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
// per policy in the Limiter's order (draft-ietf-httpapi-ratelimit-headers-11), such as
//
//	"per-second";r=3;t=1, "per-day";r=997;t=86400
//
// r is the available quota, the Decision's Remaining (at least 0), and t the effective window: the
// seconds, rounded up, within which no more than r can be used, because no quota beyond r comes
// back before them. For a policy that rejected it is its RetryAfter. For one that admitted it is
// its ResetAfter, when the whole quota comes back — for GCRA, whose bucket regains one unit every
// emission interval, the time until the first unit beyond r comes back once r is used, at most
// one emission interval (so 3 per 10 s that has just admitted its third unit says r=0;t=4, not
// t=10, and the 429 that follows says Retry-After: 4). retryAfter is the Retry-After of a 429
// response, 0 otherwise: no member's t is below it, so a client that waits for any t never
// retries before Retry-After. On a 429, the r of a policy that would have admitted is what it has
// left: nothing was consumed. A Limit in shadow mode has no member, as in Policy. Integers are
// capped at 15 digits, as structured fields require.
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
		b = appendInt(append(b, ";t="...), effectiveWindow(limits[i], d, retryAfter))
	}
	return b
}

// Fields writes the RateLimit-Policy and RateLimit fields of one list of Limits, with what does
// not change from one response to the next computed once, by [NewFields]: the RateLimit-Policy
// value, and each member's name and separators in RateLimit. A Fields is immutable, and safe for
// concurrent use.
type Fields struct {
	limits  []admit.Limit
	policy  string   // the RateLimit-Policy field value
	members []string // per Limit: `"name";r=`, after ", " but for the first member; "" in shadow mode
	maxLen  int      // the longest RateLimit value AppendRateLimit can append
}

// maxSFIntegerLen is the length of the longest structured-field Integer appendInt writes.
const maxSFIntegerLen = 15

// NewFields returns the Fields of limits, in order. It reports false if a name cannot be a
// structured-field string, which no valid Limit's can, and returns a Fields whose Policy is ""
// when every Limit is in shadow mode.
func NewFields(limits []admit.Limit) (*Fields, bool) {
	policy, ok := Policy(limits)
	if !ok {
		return nil, false
	}
	f := &Fields{limits: slices.Clone(limits), policy: policy, members: make([]string, len(limits))}
	var b []byte
	for i, l := range limits {
		if l.Shadow {
			continue
		}
		b = b[:0]
		if f.maxLen > 0 {
			b = append(b, ", "...)
		}
		b, _ = appendSFString(b, l.Name) // Policy has checked every name
		b = append(b, ";r="...)
		f.members[i] = string(b)
		f.maxLen += len(b) + maxSFIntegerLen + len(";t=") + maxSFIntegerLen
	}
	return f, true
}

// Policy returns the RateLimit-Policy field value, as the function Policy makes it; "" when every
// Limit is in shadow mode.
func (f *Fields) Policy() string { return f.policy }

// MaxRateLimitLen returns the length of the longest RateLimit field value that
// [Fields.AppendRateLimit] can append.
func (f *Fields) MaxRateLimitLen() int { return f.maxLen }

// AppendRateLimit appends the RateLimit field value of the Decisions ds, one per Limit of f in
// order, as the function AppendRateLimit does.
func (f *Fields) AppendRateLimit(b []byte, ds []admit.Decision, retryAfter int64) []byte {
	for i := range ds {
		m := f.members[i]
		if m == "" {
			continue // in shadow mode
		}
		d := &ds[i]
		b = appendUint(append(b, m...), d.Remaining)
		b = appendUint(append(b, ';', 't', '='), effectiveWindow(f.limits[i], d, retryAfter))
	}
	return b
}

// digitPairs holds "00" to "99", two bytes each, for appendUint.
const digitPairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// powersOf10 holds 10⁰ to 10¹⁵, for appendUint's count of digits.
var powersOf10 = [16]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// appendUint appends n as appendInt does, and a negative n as 0: what strconv.AppendInt writes,
// with the digits written in place, four at a time from the right, for the integers of every
// response.
func appendUint(b []byte, n int64) []byte {
	if n < 10 {
		return append(b, byte('0'+max(n, 0)))
	}
	u := uint64(min(n, maxSFInteger))
	digits := bits.Len64(u) * 1233 >> 12 // ⌊log₁₀ 2^Len⌋: the digits of u, or one less
	if u >= powersOf10[digits&15] {
		digits++
	}
	start := len(b)
	b = slices.Grow(b, digits)[:start+digits]
	d := b[start:]
	i := len(d)
	for ; i >= 4; i -= 4 {
		q := u / 10000
		r := u - 10000*q
		hi, lo := 2*(r/100), 2*(r%100)
		_ = d[i-4] // one bounds check for the four
		d[i-4], d[i-3], d[i-2], d[i-1] = digitPairs[hi], digitPairs[hi+1], digitPairs[lo], digitPairs[lo+1]
		u = q
	}
	switch i {
	case 3:
		r := 2 * (u % 100)
		d[0], d[1], d[2] = byte('0'+u/100), digitPairs[r], digitPairs[r+1]
	case 2:
		d[0], d[1] = digitPairs[2*u], digitPairs[2*u+1]
	case 1:
		d[0] = byte('0' + u)
	}
	return b
}

// Set sets the RateLimit-Policy and RateLimit fields of hdr for the Decisions ds, each of its own
// Limit (Decision.Limit); retryAfter is the Retry-After of a 429, 0 otherwise. It sets neither when
// every Limit is in shadow mode.
func Set(hdr http.Header, ds []admit.Decision, retryAfter int64) {
	var lbuf [bound.MaxRequests]admit.Limit
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

// effectiveWindow returns the t of the RateLimit member of d, a Decision under lim (or under the
// local Limit that decided it, d.Limit, when the Decision is Degraded), as AppendRateLimit
// describes it: in whole seconds, rounded up, and at least retryAfter.
func effectiveWindow(lim admit.Limit, d *admit.Decision, retryAfter int64) int64 {
	var t int64
	switch {
	case !d.Allowed:
		t = CeilSeconds(d.RetryAfter)
	default:
		if d.Degraded && d.Limit.Rate > 0 {
			lim = d.Limit
		}
		if lim.Algorithm == admit.GCRA {
			t = ceilSeconds(gcraNextUnit(lim, d))
		} else {
			t = ceilSeconds(d.ResetAfter)
		}
	}
	return max(t, retryAfter)
}

// gcraNextUnit returns, for a Decision d that a GCRA Limit lim admitted, the time until the bucket
// holds a unit beyond the d.Remaining it has now, once those are used: with T the emission
// interval, τ = Capacity × T the time a full bucket takes to empty, and D = d.ResetAfter the time
// until the bucket is full again, D + (Remaining + 1) × T − τ, which lies in (0, T] (for a full
// bucket, T: the unit that comes back after the first one used). Figures out of range (no Decision
// of a valid Limit has them) are clamped, and a Limit without an emission interval falls back to
// ResetAfter.
func gcraNextUnit(lim admit.Limit, d *admit.Decision) time.Duration {
	interval, c := lim.EmissionInterval(), lim.Capacity()
	if interval <= 0 || c < 1 || c > int64(bound.MaxTolerance/interval) {
		return d.ResetAfter
	}
	tolerance := time.Duration(c) * interval
	backlog := min(max(d.ResetAfter, 0), tolerance)
	r := min(max(d.Remaining, 0), c)
	t := backlog - (tolerance - time.Duration(r)*interval) + interval
	return min(max(t, 0), interval)
}

// ceilSeconds returns d rounded up to whole seconds, and 0 for d ≤ 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return CeilSeconds(d)
}

// CeilSeconds returns d rounded up to whole seconds, and at least 1: the seconds of a Retry-After
// field or of a window, which never tell a client to retry at once.
func CeilSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(1, s)
}

// RetryAfter returns the whole seconds of an HTTP Retry-After field for d: 0 when d is Allowed
// (there is nothing to wait for, and no Retry-After to send); otherwise CeilSeconds of its
// RetryAfter, max(1, ceil(RetryAfter in seconds)), so that a rejection never tells a client to retry
// at once.
func RetryAfter(d admit.Decision) int64 {
	if d.Allowed {
		return 0
	}
	return CeilSeconds(d.RetryAfter)
}
