package rls

import (
	"math"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/policy/envoyconf"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// respond returns the response of checks, whose Items' Decisions are ds, at now, every rule in
// quota mode when quotaAll (Ops.QuotaMode); it marks the checks in quota mode found over.
func respond(checks []check, ds []admit.Decision, now time.Time, quotaAll bool) *rlsv3.RateLimitResponse {
	limited := 0
	for i := range checks {
		if r := checks[i].rule; r != nil && !r.Unlimited {
			limited++
		}
	}
	resp, msgs := newResponse(len(checks), limited)
	// The descriptors without a rule share one status, and the unlimited ones another: a request
	// of 4 MiB may have two million.
	var none, unlimited *rlsv3.RateLimitResponse_DescriptorStatus
	j := 0
	for i := range checks {
		c := &checks[i]
		switch {
		case len(checks) > 1 && c.rule == nil:
			if none == nil {
				none = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
			}
			resp.Statuses[i] = none
			continue
		case len(checks) > 1 && c.rule.Unlimited:
			if unlimited == nil {
				unlimited = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
			}
			resp.Statuses[i] = unlimited
			continue
		}
		m := &msgs[j]
		j++
		st := &m.status
		resp.Statuses[i] = st
		switch {
		case c.rule == nil:
			continue
		case c.rule.Unlimited:
			st.LimitRemaining = math.MaxUint32
			continue
		}
		lim := c.rule.Limit
		cl := &m.limit
		cl.Name, cl.RequestsPerUnit, cl.Unit = c.rule.Name, uint32(lim.Rate), unitOf(c.rule.Unit)
		st.CurrentLimit = cl
		d := c.decision(ds)
		if d.Overridden { // an override of the admin API: its numbers are in force
			st.CurrentLimit.RequestsPerUnit = uint32(min(d.Limit.Rate, math.MaxUint32))
		}
		st.LimitRemaining = uint32(min(max(d.Remaining, 0), math.MaxUint32))
		if reset := resetAfter(c.rule, &d, now); reset > 0 {
			du := &m.reset // what durationpb.New(reset) holds
			du.Seconds, du.Nanos = int64(reset/time.Second), int32(reset%time.Second)
			st.DurationUntilReset = du
		}
		switch {
		case d.Allowed:
		case c.rule.QuotaMode, quotaAll && !lim.Shadow:
			c.quotaOver = true // answered OK, reported in the dynamic metadata
			st.LimitRemaining = 0
		case lim.Shadow:
			st.LimitRemaining = 0 // answered OK with nothing left, as envoyproxy/ratelimit answers
		default:
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
	}
	return resp
}

// statusMessages are the messages of one descriptor's status in a response, allocated together.
type statusMessages struct {
	status rlsv3.RateLimitResponse_DescriptorStatus
	limit  rlsv3.RateLimitResponse_RateLimit
	reset  durationpb.Duration
}

// oneStatus is a response of one descriptor, the common request, in one allocation.
type oneStatus struct {
	resp     rlsv3.RateLimitResponse
	statuses [1]*rlsv3.RateLimitResponse_DescriptorStatus
	msgs     [1]statusMessages
}

// newResponse returns a response of n statuses, OK, of which limited (all for one descriptor) are
// to be pointed at the messages it returns: one allocation for one descriptor, three for more,
// where a message each cost one.
func newResponse(n, limited int) (*rlsv3.RateLimitResponse, []statusMessages) {
	var resp *rlsv3.RateLimitResponse
	var msgs []statusMessages
	if n == 1 {
		one := &oneStatus{}
		resp, msgs = &one.resp, one.msgs[:]
		resp.Statuses = one.statuses[:]
	} else {
		resp, msgs = &rlsv3.RateLimitResponse{}, make([]statusMessages, limited)
		resp.Statuses = make([]*rlsv3.RateLimitResponse_DescriptorStatus, n)
	}
	resp.OverallCode = rlsv3.RateLimitResponse_OK
	for i := range msgs {
		msgs[i].status.Code = rlsv3.RateLimitResponse_OK
	}
	return resp, msgs
}

// resetAfter returns the duration_until_reset of a descriptor of rule decided d at now: the
// Decision's ResetAfter, else, for a decision that reports none, the end of the rule's window. An
// aligned window's end is envoyproxy/ratelimit's (a unit minus now modulo the unit), answered
// for a rejection (a requests_per_unit of 0, a hits_addend above the limit on a key not yet
// counted) and for an allowed check of a key not yet counted (a descriptor's hits_addend 0), as
// envoyproxy/ratelimit answers every limited descriptor. A window not aligned starts at its first
// hit: a rejection reports a whole window, an allowed check of a key not counted none.
func resetAfter(rule *envoyconf.Rule, d *admit.Decision, now time.Time) time.Duration {
	p := rule.Limit.Period
	switch {
	case d.ResetAfter > 0 || p <= 0:
		return d.ResetAfter
	case rule.Limit.Aligned:
		return p - time.Duration(now.UnixNano())%p
	case d.Allowed:
		return 0
	}
	return max(d.RetryAfter, p)
}

// metadata returns envoyproxy/ratelimit's dynamic metadata of req, answered after checks
// (Options.DynamicMetadata).
func metadata(req *rlsv3.RateLimitRequest, checks []check) *structpb.Struct {
	descs := make([]*structpb.Value, len(req.GetDescriptors()))
	for i, d := range req.GetDescriptors() {
		es := make([]*structpb.Value, len(d.GetEntries()))
		for j, e := range d.GetEntries() {
			es[j] = structpb.NewStringValue(e.GetKey() + "=" + e.GetValue())
		}
		df := map[string]*structpb.Value{"entries": structpb.NewListValue(&structpb.ListValue{Values: es})}
		if l := d.GetLimit(); l != nil {
			df["limit"] = structpb.NewStringValue(l.String()) // the protobuf text of the override, as envoyproxy/ratelimit sends it
		}
		if h := d.GetHitsAddend(); h != nil {
			df["hitsAddend"] = structpb.NewNumberValue(float64(h.GetValue()))
		}
		descs[i] = structpb.NewStructValue(&structpb.Struct{Fields: df})
	}
	f := map[string]*structpb.Value{
		"domain":      structpb.NewStringValue(req.GetDomain()),
		"descriptors": structpb.NewListValue(&structpb.ListValue{Values: descs}),
	}
	if h := req.GetHitsAddend(); h != 0 {
		f["hitsAddend"] = structpb.NewNumberValue(float64(h))
	}
	enabled := false
	var violations []*structpb.Value
	for i := range checks {
		if r := checks[i].rule; r != nil && r.QuotaMode {
			enabled = true
		}
		if checks[i].quotaOver {
			violations = append(violations, structpb.NewNumberValue(float64(i)))
		}
	}
	f["quotaModeEnabled"] = structpb.NewBoolValue(enabled)
	if len(violations) > 0 {
		f["quotaModeViolations"] = structpb.NewListValue(&structpb.ListValue{Values: violations})
	}
	return &structpb.Struct{Fields: f}
}

// unitOf returns the RLS unit of u; UNKNOWN for UnitNone, a window of admit's.
func unitOf(u envoyconf.Unit) rlsv3.RateLimitResponse_RateLimit_Unit {
	if int(u) < len(rlsUnits) {
		return rlsUnits[u]
	}
	return rlsv3.RateLimitResponse_RateLimit_UNKNOWN
}

// rlsUnits are the RLS units of envoyconf's, by envoyconf.Unit.
var rlsUnits = [...]rlsv3.RateLimitResponse_RateLimit_Unit{
	envoyconf.UnitSecond: rlsv3.RateLimitResponse_RateLimit_SECOND,
	envoyconf.UnitMinute: rlsv3.RateLimitResponse_RateLimit_MINUTE,
	envoyconf.UnitHour:   rlsv3.RateLimitResponse_RateLimit_HOUR,
	envoyconf.UnitDay:    rlsv3.RateLimitResponse_RateLimit_DAY,
	envoyconf.UnitWeek:   rlsv3.RateLimitResponse_RateLimit_WEEK,
	envoyconf.UnitMonth:  rlsv3.RateLimitResponse_RateLimit_MONTH,
	envoyconf.UnitYear:   rlsv3.RateLimitResponse_RateLimit_YEAR,
}
