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
	if got := o.explain(req, req.Descriptors[0], base, status(ok, 2, 100*time.Second), key, key); got != "" {
		t.Errorf("explain of a limit_remaining off by one = %q, want none", got)
	}
	// A descriptor's hits_addend of 0 (a check) must agree: no difference explains its answers.
	zero := &rlsv3.RateLimitRequest{Domain: "t", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: req.Descriptors[0].Entries, HitsAddend: wrapUint(0)}}}
	noReset := &rlsv3.RateLimitResponse_DescriptorStatus{Code: ok, CurrentLimit: limit, LimitRemaining: 3}
	if got := o.explain(zero, zero.Descriptors[0], base, noReset, key, key); got != "" {
		t.Errorf("explain of a check without duration_until_reset = %q, want none", got)
	}
	// A check counts nothing in either: the counter does not differ afterwards.
	o.count(zero, zero.Descriptors[0], base, base, key, key, "")
	if got := o.explain(req, req.Descriptors[0], base, status(ok, 2, 100*time.Second), key, key); got != "" {
		t.Errorf("explain after hits_addend 0 = %q, want none", got)
	}
	// Hits above the limit: envoyproxy/ratelimit counts them, admit does not, and the counter's
	// later differences are allowed.
	six := request("t", 6, []string{"k", "v"})
	o.count(six, six.Descriptors[0], status(over, 0, 100*time.Second), status(over, 5, 100*time.Second), key, key, "")
	if got := o.explain(req, req.Descriptors[0], base, status(ok, 2, 100*time.Second), key, key); got != "rejected hits counted" {
		t.Errorf("explain after rejected hits = %q, want %q", got, "rejected hits counted")
	}
}

// wrapUint returns v as a protobuf UInt64Value.
func wrapUint(v uint64) *wrapperspb.UInt64Value { return wrapperspb.UInt64(v) }
