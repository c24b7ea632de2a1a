package envoyrl

import (
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/admit-dev/admit/policy/envoyconf"
)

// TestOracleReportsDifferences checks the comparison of TestRequestSequences on statuses made up
// here: equal statuses agree, each field that differs is reported, duration_until_reset within the
// tolerance only, and no allowed difference explains a difference none of them describes.
func TestOracleReportsDifferences(t *testing.T) {
	cfg, err := referenceLoad([]envoyconf.File{{Name: "t.yaml", Data: []byte("domain: t\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 5}\n")}})
	if err != nil {
		t.Fatal(err)
	}
	o := &oracle{t: t, cfg: cfg, seen: &sightings{seen: map[string]int{}}, counters: map[string]*counter{}}
	limit := &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 5, Unit: rlsv3.RateLimitResponse_RateLimit_HOUR}
	status := func(code rlsv3.RateLimitResponse_Code, remaining uint32, reset time.Duration) *rlsv3.RateLimitResponse_DescriptorStatus {
		return &rlsv3.RateLimitResponse_DescriptorStatus{Code: code, CurrentLimit: limit, LimitRemaining: remaining, DurationUntilReset: durationpb.New(reset)}
	}
	ok, over := rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	base := status(ok, 3, 100*time.Second)
	for _, c := range []struct {
		admit *rlsv3.RateLimitResponse_DescriptorStatus
		want  string
	}{
		{status(ok, 3, 100*time.Second), ""},
		{status(ok, 3, 100*time.Second-1500*time.Millisecond), ""}, // within 1 s + elapsed
		{status(over, 3, 100*time.Second), "code"},
		{status(ok, 2, 100*time.Second), "limit_remaining"},
		{status(ok, 3, 97*time.Second), "duration_until_reset (3s apart, 1.5s allowed)"},
		{&rlsv3.RateLimitResponse_DescriptorStatus{Code: ok, LimitRemaining: 3, DurationUntilReset: durationpb.New(100 * time.Second)}, "current_limit"},
		{&rlsv3.RateLimitResponse_DescriptorStatus{Code: ok, CurrentLimit: limit, LimitRemaining: 3}, "duration_until_reset"},
	} {
		if got := o.compareStatus(base, c.admit, 500*time.Millisecond); got != c.want {
			t.Errorf("compareStatus(%v, %v) = %q, want %q", base, c.admit, got, c.want)
		}
	}
	req := request("t", 1, []string{"k", "v"})
	key := counterKey("t", req.Descriptors[0], "HOUR")
	if got := o.explain(req, req.Descriptors[0], base, status(ok, 2, 100*time.Second), key, key, time.Second); got != "" {
		t.Errorf("explain of a limit_remaining off by one = %q, want none", got)
	}
	// A descriptor's hits_addend of 0 (a check) must agree: no difference explains its answers.
	zero := &rlsv3.RateLimitRequest{Domain: "t", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: req.Descriptors[0].Entries, HitsAddend: wrapUint(0)}}}
	noReset := &rlsv3.RateLimitResponse_DescriptorStatus{Code: ok, CurrentLimit: limit, LimitRemaining: 3}
	if got := o.explain(zero, zero.Descriptors[0], base, noReset, key, key, time.Second); got != "" {
		t.Errorf("explain of a check without duration_until_reset = %q, want none", got)
	}
	// A check counts nothing in either: the counter does not differ afterwards.
	o.count(zero, zero.Descriptors[0], base, base, key, key, "")
	if got := o.explain(req, req.Descriptors[0], base, status(ok, 2, 100*time.Second), key, key, time.Second); got != "" {
		t.Errorf("explain after hits_addend 0 = %q, want none", got)
	}
	// Hits above the limit: envoyproxy/ratelimit counts them, admit does not, and the counter's
	// later differences are allowed.
	six := request("t", 6, []string{"k", "v"})
	o.count(six, six.Descriptors[0], status(over, 0, 100*time.Second), status(over, 5, 100*time.Second), key, key, "")
	if got := o.explain(req, req.Descriptors[0], base, status(ok, 2, 100*time.Second), key, key, time.Second); got != "rejected hits counted" {
		t.Errorf("explain after rejected hits = %q, want %q", got, "rejected hits counted")
	}

	// With --envoy-increment-over-limit, hits above the limit fill admit's counter: answers with
	// nothing left are not excused, and the only difference is a counter past the limit, for the
	// answers a counter stopped at the limit gives.
	inc := &oracle{t: t, cfg: cfg, seen: &sightings{seen: map[string]int{}}, allowed: []string{pastLimit}, increment: true, counters: map[string]*counter{}}
	if got := inc.allow(six, six.Descriptors[0], status(over, 0, 100*time.Second), status(over, 5, 100*time.Second), key); got.GetLimitRemaining() != 5 {
		t.Errorf("allow with increment excused limit_remaining %d, want it left as admit answered", got.GetLimitRemaining())
	}
	inc.count(six, six.Descriptors[0], status(over, 0, 100*time.Second), status(over, 0, 100*time.Second), key, key, "")
	if c := inc.counters[key]; c.reference != 6 || c.admit != 5 || c.why != pastLimit {
		t.Errorf("counter after 6 hits of 5 with increment: %+v; want 6, 5, %q", c, pastLimit)
	}
	if got := inc.explain(zero, zero.Descriptors[0], status(over, 0, 100*time.Second), status(ok, 0, 100*time.Second), key, key, time.Second); got != pastLimit {
		t.Errorf("explain of a check past the limit = %q, want %q", got, pastLimit)
	}
	for _, c := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
		as   *rlsv3.RateLimitResponse_DescriptorStatus
	}{
		{"a hit answered as if the rejected ones were not counted", req, status(ok, 4, 100*time.Second)},
		{"a check with something left", zero, status(ok, 1, 100*time.Second)},
		{"a check with another reset", zero, status(ok, 0, 50*time.Second)},
	} {
		if got := inc.explain(c.req, c.req.Descriptors[0], status(over, 0, 100*time.Second), c.as, key, key, time.Second); got != "" {
			t.Errorf("explain of %s = %q, want none", c.name, got)
		}
	}
}

// wrapUint returns v as a protobuf UInt64Value.
func wrapUint(v uint64) *wrapperspb.UInt64Value { return wrapperspb.UInt64(v) }
