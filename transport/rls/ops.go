package rls

import (
	"fmt"
	"math"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/service"
)

// DefaultNearLimitRatio is envoyproxy/ratelimit's NEAR_LIMIT_RATIO: a decision is near its limit
// past 80 % of it.
const DefaultNearLimitRatio = 0.8

// The names of the response headers of Ops.ResponseHeaders: envoyproxy/ratelimit's defaults
// (its LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER and LIMIT_RESET_HEADER).
const (
	// HeaderLimit carries the requests per unit of the descriptor closest to its limit.
	HeaderLimit = "RateLimit-Limit"
	// HeaderRemaining carries what that descriptor has left.
	HeaderRemaining = "RateLimit-Remaining"
	// HeaderReset carries the seconds until its window resets, rounded up.
	HeaderReset = "RateLimit-Reset"
)

// Ops are the settings of a [Server] that envoyproxy/ratelimit takes from its environment
// (docs/envoy.md, "Operations"). The zero value is envoyproxy/ratelimit's default.
type Ops struct {
	// ShadowMode puts every rule in shadow mode (SHADOW_MODE): each is decided and counted (as
	// shadow, in admit_decisions_total) but none is ever OVER_LIMIT, nor the response.
	ShadowMode bool
	// QuotaMode puts every rule in quota mode (QUOTA_MODE), as quota_mode puts one: each is
	// decided and counted, and one over its limit is answered OK, listed in the dynamic metadata's
	// quotaModeViolations (Options.DynamicMetadata) — a request's limit override too, but not a rule
	// in shadow_mode, which is never over. quotaModeEnabled still says whether a rule of the
	// request sets quota_mode, as envoyproxy/ratelimit reports it.
	QuotaMode bool
	// ResponseHeaders adds HeaderLimit, HeaderRemaining and HeaderReset to every response with a
	// limited descriptor, as its response_headers_to_add, for the descriptor with the least
	// remaining (LIMIT_RESPONSE_HEADERS_ENABLED); Envoy adds them to its response to the client.
	ResponseHeaders bool
	// NearLimitRatio is the part of a limit past which an admitted decision is near it
	// (NEAR_LIMIT_RATIO): 0 means DefaultNearLimitRatio; else it must be more than 0 and at most 1.
	NearLimitRatio float64
	// NearLimit, if not nil, is told the hits of each response that fell past NearLimitRatio of
	// their limits and within them, by domain, as envoyproxy/ratelimit counts its near_limit:
	// for a descriptor admitted with u units used of a limit L after its hits h, min(u-T, h)
	// when u > T, where T is floor(L × NearLimitRatio). admit serve counts them in
	// admit_rls_near_limit_total.
	NearLimit func(domain string, hits int64)
}

// check reports what is wrong with o.
func (o Ops) check() error {
	if r := o.NearLimitRatio; math.IsNaN(r) || r < 0 || r > 1 {
		return fmt.Errorf("rls: near-limit ratio %v; want more than 0 and at most 1", r)
	}
	return nil
}

// shadowAll puts every Item in shadow mode under Ops.ShadowMode or Ops.QuotaMode, as shadow_mode
// and quota_mode put one.
func (s *Server) shadowAll(items []service.Item) {
	if !s.ops.ShadowMode && !s.ops.QuotaMode {
		return
	}
	for i := range items {
		items[i].Limit.Shadow = true
	}
}

// finish applies the Ops to resp, the response of the Items items of domain, decided as ds.
func (s *Server) finish(domain string, items []service.Item, ds []admit.Decision, resp *rlsv3.RateLimitResponse) *rlsv3.RateLimitResponse {
	if s.ops.ShadowMode {
		resp.OverallCode = rlsv3.RateLimitResponse_OK
		for _, st := range resp.Statuses {
			st.Code = rlsv3.RateLimitResponse_OK
		}
	}
	if s.ops.NearLimit != nil {
		if n := nearLimit(s.ops.NearLimitRatio, items, ds); n > 0 {
			s.ops.NearLimit(domain, n)
		}
	}
	if s.ops.ResponseHeaders {
		resp.ResponseHeadersToAdd = headers(resp.Statuses)
	}
	return resp
}

// nearLimit returns the hits of items, decided as ds, past ratio (0: DefaultNearLimitRatio) of
// their limits and within them (see Ops.NearLimit).
func nearLimit(ratio float64, items []service.Item, ds []admit.Decision) int64 {
	if ratio == 0 {
		ratio = DefaultNearLimitRatio
	}
	var n int64
	for i := range ds {
		d := &ds[i]
		if !d.Allowed || d.Replayed {
			continue
		}
		rate := d.Limit.Rate
		if rate <= 0 {
			rate = items[i].Limit.Rate
		}
		used := rate - max(d.Remaining, 0)
		if threshold := int64(math.Floor(float64(rate) * ratio)); used > threshold {
			n += min(used-threshold, items[i].Cost)
		}
	}
	return n
}

// headers returns the response headers of statuses: those of the one with a limit and the least
// remaining, the first of equals; nil when none has a limit.
func headers(statuses []*rlsv3.RateLimitResponse_DescriptorStatus) []*corev3.HeaderValue {
	var least *rlsv3.RateLimitResponse_DescriptorStatus
	for _, st := range statuses {
		if st.GetCurrentLimit() != nil && (least == nil || st.GetLimitRemaining() < least.GetLimitRemaining()) {
			least = st
		}
	}
	if least == nil {
		return nil
	}
	reset := least.GetDurationUntilReset().AsDuration()
	secs := int64((reset + time.Second - 1) / time.Second)
	return []*corev3.HeaderValue{
		{Key: HeaderLimit, Value: strconv.FormatUint(uint64(least.GetCurrentLimit().GetRequestsPerUnit()), 10)},
		{Key: HeaderRemaining, Value: strconv.FormatUint(uint64(least.GetLimitRemaining()), 10)},
		{Key: HeaderReset, Value: strconv.FormatInt(max(secs, 0), 10)},
	}
}
