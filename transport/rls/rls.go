// Package rls serves Envoy's rate limit service API, envoy.service.ratelimit.v3.RateLimitService,
// over gRPC: the way Envoy, Istio, Envoy Gateway and Contour ask admit whether a request is over
// its limits, configured with envoyproxy/ratelimit's YAML (package policy/envoyconf).
//
// ShouldRateLimit decides each descriptor of a request under the rule that envoyconf.Config.Match
// finds for it, with hits_addend units (the descriptor's, else the request's; 0 means 1), on a key
// per domain and descriptor — its entries' keys and values — made by an admit.KeyBuilder; in a
// domain with atomic: true (envoyconf.Config.Atomic) the keys of descriptors with one first entry
// share a hash slot, and are decided together, all-or-nothing; a descriptor repeated in one such
// request is decided once, for the hits of every repetition summed. In any other domain each
// descriptor is decided on its own, a repeated one counted once per repetition. The
// response has a status per descriptor, with current_limit, limit_remaining and
// duration_until_reset, and is OVER_LIMIT when any enforced descriptor is over its limit; one in
// shadow_mode never is (its status is OK, as envoyproxy/ratelimit answers). When admit cannot
// decide, ShouldRateLimit answers the gRPC status UNAVAILABLE, never OK with code UNKNOWN, which
// Envoy treats as allowed: Envoy's failure_mode_deny then decides. An invalid request is
// INVALID_ARGUMENT, before any call to the Store.
//
// The Server decides through a service.Service (service.Service.DecideItems, the one decision
// function of admit serve): it translates the protobuf request into Items and Decisions back.
package rls

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/lograte"
	"github.com/admit-dev/admit/policy/envoyconf"
	"github.com/admit-dev/admit/service"
)

// Bounds on a request, beyond which it is INVALID_ARGUMENT.
const (
	// MaxDescriptors is the most descriptors of one request.
	MaxDescriptors = 64
	// MaxEntries is the most entries of one descriptor.
	MaxEntries = 32
	// MaxDomainLen is the longest domain, in bytes.
	MaxDomainLen = 256
	// MaxEntryLen is the longest key, and the longest value, of an entry, in bytes.
	MaxEntryLen = 4096
	// MaxMessageSize is the largest message the gRPC server of [NewGRPCServer] receives or sends.
	MaxMessageSize = 1 << 20
)

// KeyVersion is the policy version of every key the Server makes (admit.KeyBuilder.Key).
const KeyVersion = "1"

// Options configure a [Server].
type Options struct {
	// Service decides, with its Store and KeyBuilder (service.Service.DecideItems); required. It
	// needs no policies: admit serve passes its own, deciding on metrics → guard → backend.
	Service *service.Service
	// Config is the configuration of the domains; required. Swap replaces it.
	Config *envoyconf.Config
	// Logger logs the requests the Store could not decide, at a bounded rate: the first at once,
	// then one summary per 10 seconds (the DefaultLogInterval of package httplimit) with the number of the others. Nil discards.
	Logger *slog.Logger
	// The settings of envoyproxy/ratelimit's environment (docs/envoy.md, "Operations").
	Ops Ops
}

// A Server answers ShouldRateLimit. It is safe for concurrent use. Make one with [New]; the zero
// value is not usable.
type Server struct {
	rlsv3.UnimplementedRateLimitServiceServer
	svc *service.Service
	log *lograte.Limiter // nil: nothing is logged
	ops Ops
	cfg atomic.Pointer[envoyconf.Config]
}

var _ rlsv3.RateLimitServiceServer = (*Server)(nil)

// New returns a Server of opts, or an error when a required option is missing.
func New(opts Options) (*Server, error) {
	if opts.Service == nil || opts.Config == nil {
		return nil, errors.New("rls: New needs a Service and a Config")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := opts.Ops.check(); err != nil {
		return nil, err
	}
	s := &Server{svc: opts.Service, ops: opts.Ops,
		log: lograte.New(logger, lograte.DefaultInterval, lograte.Kind{Level: slog.LevelWarn, Msg: "rls: cannot decide"})}
	s.cfg.Store(opts.Config)
	return s, nil
}

// Config returns the configuration the Server holds.
func (s *Server) Config() *envoyconf.Config { return s.cfg.Load() }

// Swap makes cfg the configuration of every request that starts from now on, and returns the one
// it replaces; requests in flight finish on theirs.
func (s *Server) Swap(cfg *envoyconf.Config) *envoyconf.Config {
	if cfg == nil {
		panic("rls: Swap(nil)")
	}
	return s.cfg.Swap(cfg)
}

// NewGRPCServer returns a gRPC server with s's RateLimitService and the standard health service
// (grpc.health.v1 of a [Health], SERVING for each of [HealthServices]), with message sizes capped
// at MaxMessageSize, keepalive pings from clients accepted at most every 10 s (more often closes
// the connection), idle connections closed after 5 minutes, and opts after these. It returns the
// Health too, to follow the backend (Health.Run) and to report NOT_SERVING while shutting down.
func NewGRPCServer(s *Server, opts ...grpc.ServerOption) (*grpc.Server, *Health) {
	all := append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageSize),
		grpc.MaxSendMsgSize(MaxMessageSize),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: 5 * time.Minute, Time: 2 * time.Minute, Timeout: 20 * time.Second}),
	}, opts...)
	g := grpc.NewServer(all...)
	rlsv3.RegisterRateLimitServiceServer(g, s)
	h := NewHealth()
	healthpb.RegisterHealthServer(g, h)
	return g, h
}

// A check is one descriptor of a request, as planned.
type check struct {
	rule *envoyconf.Rule // nil: no rule, or replaced
	item int             // its index in the Items decided; -1 for none
}

// ShouldRateLimit decides req (see the package doc).
func (s *Server) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	cfg := s.cfg.Load()
	checks, items, err := plan(cfg, req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	s.shadowAll(items)
	grouping := service.Separately
	if cfg.Atomic(req.GetDomain()) {
		grouping = service.BySlot
	}
	ds := make([]admit.Decision, len(items))
	if err := s.svc.DecideItems(ctx, items, ds, grouping); err != nil {
		if ie, ok := errors.AsType[*service.ItemError](err); ok {
			return nil, status.Error(codes.InvalidArgument, fmt.Sprintf("descriptor %d: %v", descriptorOf(checks, ie.Index), ie.Err))
		}
		if errors.Is(err, admit.ErrInvalidRequest) || errors.Is(err, admit.ErrInvalidLimit) {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		s.log.Log(ctx, 0, err, slog.String("domain", req.GetDomain()))
		return nil, status.Error(codes.Unavailable, "admit: cannot decide: "+err.Error())
	}
	return s.finish(req.GetDomain(), items, ds, respond(checks, ds)), nil
}

// plan validates req, finds each descriptor's rule, subject and cost, and returns the Items of
// the descriptors whose rules limit, without I/O.
func plan(cfg *envoyconf.Config, req *rlsv3.RateLimitRequest) ([]check, []service.Item, error) {
	domain, ds := req.GetDomain(), req.GetDescriptors()
	switch {
	case domain == "":
		return nil, nil, errors.New("empty domain")
	case len(domain) > MaxDomainLen:
		return nil, nil, fmt.Errorf("domain of %d bytes; want at most %d", len(domain), MaxDomainLen)
	case len(ds) == 0:
		return nil, nil, errors.New("no descriptors")
	case len(ds) > MaxDescriptors:
		return nil, nil, fmt.Errorf("%d descriptors; want at most %d", len(ds), MaxDescriptors)
	}
	checks := make([]check, len(ds))
	items := make([]service.Item, 0, len(ds))
	replaced := make(map[string]bool)
	entries := make([]envoyconf.Entry, 0, MaxEntries)
	atomicDomain := cfg.Atomic(domain)
	for i, d := range ds {
		checks[i].item = -1
		es := d.GetEntries()
		switch {
		case len(es) == 0:
			return nil, nil, fmt.Errorf("descriptor %d: no entries", i)
		case len(es) > MaxEntries:
			return nil, nil, fmt.Errorf("descriptor %d: %d entries; want at most %d", i, len(es), MaxEntries)
		case d.GetIsNegativeHits():
			return nil, nil, fmt.Errorf("descriptor %d: negative hits are not supported", i)
		}
		entries = entries[:0]
		for j, e := range es {
			if e.GetKey() == "" || len(e.GetKey()) > MaxEntryLen || len(e.GetValue()) > MaxEntryLen {
				return nil, nil, fmt.Errorf("descriptor %d, entry %d: want a key of 1-%d bytes and a value of at most %d", i, j, MaxEntryLen, MaxEntryLen)
			}
			entries = append(entries, envoyconf.Entry{Key: e.GetKey(), Value: e.GetValue()})
		}
		cost := int64(req.GetHitsAddend())
		if h := d.GetHitsAddend(); h != nil {
			if h.GetValue() > math.MaxUint32 {
				return nil, nil, fmt.Errorf("descriptor %d: hits_addend %d; want at most %d", i, h.GetValue(), uint32(math.MaxUint32))
			}
			cost = int64(h.GetValue())
		}
		cost = max(cost, 1) // 0 means 1, as Envoy defines it
		rule := cfg.Match(domain, entries)
		if rule == nil || rule.Unlimited {
			checks[i].rule = rule
			continue
		}
		if o := d.GetLimit(); o != nil {
			rule = override(rule, o)
		}
		checks[i].rule = rule
		if rule.Limit.Rate > 0 {
			sub := admit.Subject{ID: subject(domain, entries)}
			if atomicDomain {
				sub.Slot = subject(domain, entries[:1])
			}
			checks[i].item = len(items)
			items = append(items, service.Item{Limit: rule.Limit, Version: KeyVersion, Subject: sub, Cost: cost})
		}
		for _, r := range rule.Replaces {
			replaced[r] = true
		}
	}
	n := 0 // the Items of the descriptors not replaced, in order
	for i := range checks {
		c := &checks[i]
		if c.rule != nil && c.rule.Name != "" && replaced[c.rule.Name] {
			c.rule, c.item = nil, -1 // replaced by another descriptor's rule: not limited
		}
		if c.item >= 0 {
			items[n], c.item = items[c.item], n
			n++
		}
	}
	return checks, items[:n], nil
}

// descriptorOf returns the index of the descriptor of checks whose Item is item.
func descriptorOf(checks []check, item int) int {
	for i := range checks {
		if checks[i].item == item {
			return i
		}
	}
	return -1
}

// override returns rule with the requests per unit and unit of a descriptor's limit override, as
// envoyproxy/ratelimit applies one: a fixed window aligned to Unix time, named as the rule is.
func override(rule *envoyconf.Rule, o *ratelimitv3.RateLimitDescriptor_RateLimitOverride) *envoyconf.Rule {
	r := *rule
	r.Unit = envoyconf.Unit(0)
	for u := envoyconf.UnitSecond; u <= envoyconf.UnitYear; u++ {
		if unitOf(u) == rlsv3.RateLimitResponse_RateLimit_Unit(o.GetUnit()) {
			r.Unit = u
		}
	}
	if r.Unit == 0 {
		return rule // an override in a unit admit does not know: the configured rule stands
	}
	r.Limit = admit.Limit{Name: rule.Limit.Name, Algorithm: admit.FixedWindow, Rate: int64(o.GetRequestsPerUnit()),
		Period: r.Unit.Duration(), Aligned: true, Shadow: rule.Limit.Shadow}
	return &r
}

// DescriptorKey returns the subject the Server limits a descriptor of entries in domain by: the
// key the admin API's overrides address it with (docs/envoy.md, "Overrides"), such as
// "9:mongo_cps|8:database=5:users" for the entry database=users of domain mongo_cps: the domain,
// then each entry's key and value, every string after its length in bytes.
func DescriptorKey(domain string, entries ...envoyconf.Entry) string { return subject(domain, entries) }

// RuleLimits returns the Limits of the rules named name in the loaded configuration
// (envoyconf.Config.Limits): the Server is the service.Rules of admit serve's overrides.
func (s *Server) RuleLimits(name string) []admit.Limit { return s.cfg.Load().Limits(name) }

// RuleSubject returns the Subject whose Items the Server decides for key, a DescriptorKey: with the
// Slot of its first entry in an atomic domain, as plan makes it. Any other key is the Subject key.
func (s *Server) RuleSubject(_, key string) admit.Subject {
	sub := admit.Subject{ID: key}
	if domain, entries, ok := parseDescriptorKey(key); ok && len(entries) > 0 && s.cfg.Load().Atomic(domain) {
		sub.Slot = subject(domain, entries[:1])
	}
	return sub
}

var _ service.Rules = (*Server)(nil)

// parseDescriptorKey returns the domain and entries of a DescriptorKey, or false when key is none.
func parseDescriptorKey(key string) (domain string, entries []envoyconf.Entry, ok bool) {
	str := func(s string) (v, rest string, ok bool) { // a string after its length and ':'
		n, rest, found := strings.Cut(s, ":")
		l, err := strconv.Atoi(n)
		if !found || err != nil || l < 0 || l > len(rest) {
			return "", "", false
		}
		return rest[:l], rest[l:], true
	}
	domain, rest, ok := str(key)
	for ok && rest != "" {
		var k, v string
		if ok = rest[0] == '|'; !ok {
			break
		}
		if k, rest, ok = str(rest[1:]); !ok || rest == "" || rest[0] != '=' {
			ok = false
			break
		}
		if v, rest, ok = str(rest[1:]); ok {
			entries = append(entries, envoyconf.Entry{Key: k, Value: v})
		}
	}
	if !ok || subject(domain, entries) != key { // one spelling only: "+5:" is no length
		return "", nil, false
	}
	return domain, entries, true
}

// subject returns the subject of a descriptor of entries in domain: each string length-prefixed,
// so that no two descriptors share one.
func subject(domain string, entries []envoyconf.Entry) string {
	b := make([]byte, 0, 64)
	b = fmt.Appendf(b, "%d:%s", len(domain), domain)
	for _, e := range entries {
		b = fmt.Appendf(b, "|%d:%s=%d:%s", len(e.Key), e.Key, len(e.Value), e.Value)
	}
	return string(b)
}

// respond returns the response of checks, whose Items' Decisions are ds.
func respond(checks []check, ds []admit.Decision) *rlsv3.RateLimitResponse {
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(checks))}
	for i := range checks {
		c := &checks[i]
		st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
		resp.Statuses[i] = st
		switch {
		case c.rule == nil:
			continue
		case c.rule.Unlimited:
			st.LimitRemaining = math.MaxUint32
			continue
		}
		lim := c.rule.Limit
		st.CurrentLimit = &rlsv3.RateLimitResponse_RateLimit{Name: c.rule.Name, RequestsPerUnit: uint32(lim.Rate), Unit: unitOf(c.rule.Unit)}
		if c.item < 0 { // requests_per_unit 0: every request is over
			if !lim.Shadow {
				st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
				resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
			}
			if p := c.rule.Unit.Duration(); p > 0 {
				st.DurationUntilReset = durationpb.New(p - time.Duration(time.Now().UnixNano())%p)
			}
			continue
		}
		d := &ds[c.item]
		if d.Overridden { // an override of the admin API: its numbers are in force
			st.CurrentLimit.RequestsPerUnit = uint32(min(d.Limit.Rate, math.MaxUint32))
		}
		st.LimitRemaining = uint32(min(max(d.Remaining, 0), math.MaxUint32))
		st.DurationUntilReset = durationpb.New(d.ResetAfter)
		if !d.Allowed && !lim.Shadow {
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
	}
	return resp
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
