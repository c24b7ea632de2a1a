// Package rls serves Envoy's rate limit service API, envoy.service.ratelimit.v3.RateLimitService,
// over gRPC: the way Envoy, Istio, Envoy Gateway and Contour ask admit whether a request is over
// its limits, configured with envoyproxy/ratelimit's YAML (package policy/envoyconf).
//
// ShouldRateLimit decides each descriptor of a request under the rule envoyconf.Config.Lookup
// finds for it, with hits_addend units (the descriptor's, else the request's; the request's 0
// means 1, the descriptor's 0 checks without counting), on a key per domain and descriptor made
// by an admit.KeyBuilder; in a domain with atomic: true the descriptors with one first entry are
// decided together, all-or-nothing, a repeated one once for its hits summed; elsewhere each on its
// own. The response has a status per descriptor, with current_limit, limit_remaining and
// duration_until_reset, and is OVER_LIMIT when any enforced descriptor is over its limit; one in
// shadow_mode or quota_mode never is (OK, as envoyproxy/ratelimit answers; Options.DynamicMetadata
// reports quota_mode's), with limit_remaining 0 when over. A request's limit override is a rule of
// its own (no name, shadow_mode or replaces), applied to a descriptor with no rule, or an
// unlimited one, too. When admit cannot decide, ShouldRateLimit answers the gRPC status
// UNAVAILABLE, never OK with code UNKNOWN, which Envoy treats as allowed: Envoy's
// failure_mode_deny then decides. Only a request of no domain or no descriptors is
// INVALID_ARGUMENT (before any I/O), as in envoyproxy/ratelimit; MaxMessageSize bounds the rest.
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
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/lograte"
	"github.com/admit-dev/admit/policy/envoyconf"
	"github.com/admit-dev/admit/service"
)

// MaxMessageSize is the largest request the gRPC server of [NewGRPCServer] receives: gRPC's
// default, which envoyproxy/ratelimit's server keeps. It is the one bound on a request, as in
// envoyproxy/ratelimit: on the count of descriptors (an empty one is 2 bytes on the wire, so at
// most about two million), of entries, and on the lengths of keys and values; and so on a
// request's memory, under a kilobyte a descriptor (TestLargestRequestMemory). A response has no
// bound but gRPC's default, as there.
const MaxMessageSize = 4 << 20

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
	// IncrementOverLimit counts the hits of a descriptor over its limit, as envoyproxy/ratelimit
	// does by default (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false): each descriptor found over
	// takes what was left of its limit before the next is decided (in an atomic domain, after the
	// request's groups), so that its window stays full and the descriptor is over until it
	// resets. The counter stops at the limit, where envoyproxy/ratelimit's goes past it. Without
	// it (admit's default) a rejected hit is never counted.
	IncrementOverLimit bool
	// DynamicMetadata puts envoyproxy/ratelimit's dynamic metadata in every response, as its
	// RESPONSE_DYNAMIC_METADATA=true does: the domain, each descriptor's entries as "key=value"
	// (and its own hitsAddend when set), the request's hitsAddend when not 0, quotaModeEnabled,
	// and quotaModeViolations, the indexes of the descriptors in quota_mode found over their
	// limits. Envoy stores it in the namespace envoy.filters.http.ratelimit.
	DynamicMetadata bool
	// Stats, if not nil, is told the Counts of each descriptor decided under a rule that limits
	// (not one unlimited, replaced or without a rule), as envoyproxy/ratelimit counts its
	// per-rule stats: rule is the rule's StatsKey (for a limit override with no rule, the domain
	// and the entries' keys), key the series envoyproxy/ratelimit counts it in: rule, or with
	// detailed_metric the descriptor's own values, such as "mongo_cps.database_users". admit
	// serve's --envoy-metrics exports them (package metrics, EnvoyStats), bounded there.
	Stats func(rule, key string, c Counts)
	// The settings of envoyproxy/ratelimit's environment (docs/envoy.md, "Operations").
	Ops Ops
}

// A Server answers ShouldRateLimit. It is safe for concurrent use. Make one with [New]; the zero
// value is not usable.
type Server struct {
	rlsv3.UnimplementedRateLimitServiceServer
	svc  *service.Service
	log  *lograte.Limiter // nil: nothing is logged
	ops  Ops
	cfg  atomic.Pointer[envoyconf.Config]
	opts Options
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
	s := &Server{svc: opts.Service, opts: opts, ops: opts.Ops,
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

// StreamWorkers is how many goroutines of a server of NewGRPCServer answer requests, each request
// after the other; a request that finds them all busy gets a goroutine of its own, as it would
// without them. A worker keeps the stack a decision grew (gRPC, the Service, the guards, the
// Store's client): without workers every request starts a goroutine whose stack is grown and
// copied again, 5-9% of the service's CPU under load (BENCHMARKS.md, "Service").
const StreamWorkers = 256

// NewGRPCServer returns a gRPC server with s's RateLimitService and the standard health service
// (grpc.health.v1 of a [Health], SERVING for each of [HealthServices]), with requests capped at
// MaxMessageSize, keepalive pings from clients accepted at most every 10 s (more often closes
// the connection), idle connections closed after 5 minutes, StreamWorkers goroutines answering
// requests, and opts after these. It returns the
// Health too, to follow the backend (Health.Run) and to report NOT_SERVING while shutting down.
func NewGRPCServer(s *Server, opts ...grpc.ServerOption) (*grpc.Server, *Health) {
	all := append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageSize),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: 5 * time.Minute, Time: 2 * time.Minute, Timeout: 20 * time.Second}),
		grpc.NumStreamWorkers(StreamWorkers),
	}, opts...)
	g := grpc.NewServer(all...)
	rlsv3.RegisterRateLimitServiceServer(g, s)
	h := NewHealth()
	healthpb.RegisterHealthServer(g, h)
	return g, h
}

// A check is one descriptor of a request, as planned.
type check struct {
	rule      *envoyconf.Rule // nil: no rule, or replaced
	item      int             // its index in the Items decided; -1 for none
	quotaOver bool            // in quota_mode, and over its limit: answered OK
	cost      int64           // the hits asked for
	// The stats keys of the descriptor (Options.Stats), when asked for.
	ruleKey, statKey string
}

// decision returns the Decision of c among ds. A check without an Item is under a requests_per_unit
// of 0: over, unless it asks for no hits (a hits_addend of 0), which envoyproxy/ratelimit answers OK,
// since 0 hits are not more than a limit of 0.
func (c *check) decision(ds []admit.Decision) admit.Decision {
	if c.item >= 0 {
		return ds[c.item]
	}
	return admit.Decision{Allowed: c.cost == 0}
}

// ShouldRateLimit decides req (see the package doc).
func (s *Server) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	cfg := s.cfg.Load()
	checks, items, ds, err := plan(cfg, req, s.opts.Stats != nil)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	s.shadowAll(items)
	grouping := service.Separately
	if cfg.Atomic(req.GetDomain()) {
		grouping = service.BySlot
	}
	if err := s.decide(ctx, items, ds, grouping); err != nil {
		if ie, ok := errors.AsType[*service.ItemError](err); ok {
			return nil, status.Error(codes.InvalidArgument, fmt.Sprintf("descriptor %d: %v", descriptorOf(checks, ie.Index), ie.Err))
		}
		if errors.Is(err, admit.ErrInvalidRequest) || errors.Is(err, admit.ErrInvalidLimit) {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		s.log.Log(ctx, 0, err, slog.String("domain", req.GetDomain()))
		return nil, status.Error(codes.Unavailable, "admit: cannot decide: "+err.Error())
	}
	resp := s.finish(req.GetDomain(), items, ds, respond(checks, ds, time.Now(), s.ops.QuotaMode))
	if s.opts.Stats != nil {
		s.stats(checks, items, ds)
	}
	if s.opts.DynamicMetadata {
		resp.DynamicMetadata = metadata(req, checks)
	}
	return resp, nil
}

// decide decides items into ds under grouping. With Options.IncrementOverLimit each Item found
// over then takes what was left of its limit (countOver): in a domain decided separately, each
// before the next is decided, as envoyproxy/ratelimit counts a request's descriptors one after the
// other, so that a descriptor repeated after one found over is over too; in an atomic domain,
// after its groups.
func (s *Server) decide(ctx context.Context, items []service.Item, ds []admit.Decision, grouping service.Grouping) error {
	if !s.opts.IncrementOverLimit {
		return s.svc.DecideItems(ctx, items, ds, grouping)
	}
	step := len(items) // an atomic domain: its groups, then their fill
	if grouping == service.Separately {
		step = 1 // each descriptor filled before the next is decided
	}
	for i := 0; i < len(items); i += step {
		if err := s.svc.DecideItems(ctx, items[i:i+step], ds[i:i+step], grouping); err != nil {
			if ie, ok := errors.AsType[*service.ItemError](err); ok {
				ie.Index += i
			}
			return err
		}
		if err := s.countOver(ctx, items[i:i+step], ds[i:i+step]); err != nil {
			return err
		}
	}
	return nil
}

// countOver counts the hits of the Items ds found over their limits, as envoyproxy/ratelimit
// counts them: each takes what was left of its limit, on its own, and then has nothing left.
func (s *Server) countOver(ctx context.Context, items []service.Item, ds []admit.Decision) error {
	var over []service.Item
	var at []int
	for i := range items {
		if !ds[i].Allowed && items[i].Cost > 0 && ds[i].Remaining > 0 {
			it := items[i]
			it.Cost = min(ds[i].Remaining, it.Limit.Capacity())
			over, at = append(over, it), append(at, i)
		}
	}
	if len(over) == 0 {
		return nil
	}
	if err := s.svc.DecideItems(ctx, over, make([]admit.Decision, len(over)), service.Separately); err != nil {
		return err
	}
	for _, i := range at {
		ds[i].Remaining = 0
	}
	return nil
}

// onePlan is what plan returns for one descriptor, the common request, in one allocation.
type onePlan struct {
	checks    [1]check
	items     [1]service.Item
	decisions [1]admit.Decision
}

// plan validates req, finds each descriptor's rule, subject and cost, and returns the Items of
// the descriptors whose rules limit, and the Decisions to decide them into, without I/O.
func plan(cfg *envoyconf.Config, req *rlsv3.RateLimitRequest, withStats bool) ([]check, []service.Item, []admit.Decision, error) {
	domain, ds := req.GetDomain(), req.GetDescriptors()
	switch { // the only requests envoyproxy/ratelimit refuses
	case domain == "":
		return nil, nil, nil, errors.New("empty domain")
	case len(ds) == 0:
		return nil, nil, nil, errors.New("no descriptors")
	}
	var checks []check
	var items []service.Item
	var decisions []admit.Decision
	if len(ds) == 1 {
		one := new(onePlan)
		checks, items, decisions = one.checks[:], one.items[:0], one.decisions[:]
	} else {
		checks = make([]check, len(ds)) // the Items and Decisions of the descriptors with a rule, below
	}
	replaced := make(map[string]bool)
	entries := make([]envoyconf.Entry, 0, 8)
	atomicDomain := cfg.Atomic(domain)
	known := cfg.HasDomain(domain)
	for i, d := range ds {
		checks[i].item = -1
		// A descriptor of no entries, an entry of an empty key and is_negative_hits are
		// decided as envoyproxy/ratelimit decides them: the first finds no rule (but a limit
		// override's), the second the rule its key and value find, and the third is ignored.
		entries = entries[:0]
		for _, e := range d.GetEntries() {
			entries = append(entries, envoyconf.Entry{Key: e.GetKey(), Value: e.GetValue()})
		}
		cost := int64(max(req.GetHitsAddend(), 1)) // the request's 0 means 1, as Envoy defines it
		if h := d.GetHitsAddend(); h != nil {
			// The descriptor's 0 checks without counting; more than any capacity (a Limit's is
			// at most 10^15) is over its limit, as envoyproxy/ratelimit's counter past it is.
			cost = int64(min(h.GetValue(), math.MaxInt64))
		}
		rule, keyed := cfg.Lookup(domain, entries)
		if o := d.GetLimit(); o != nil && known {
			// envoyproxy/ratelimit applies a request's limit before looking at the rules, as a
			// rule of its own: on a descriptor of a configured domain with no rule, or an
			// unlimited one, too, and without the configured rule's name, shadow_mode, quota_mode
			// and replaces (it neither replaces nor is replaced). It counts on the rule's key, as
			// envoyproxy/ratelimit's counter is the descriptor's whatever its rule: the Limit keeps
			// the rule's name (the key's policy name and the admin API's overrides').
			base := &envoyconf.Rule{Domain: domain, Limit: admit.Limit{Name: envoyconf.DefaultName}}
			if rule != nil {
				base.Path = rule.Path
				if rule.Limit.Name != "" { // an unlimited rule's Limit is the zero Limit
					base.Limit.Name = rule.Limit.Name
				}
			}
			if r := override(base, o); r != base {
				rule = r
			}
		}
		checks[i].rule, checks[i].cost = rule, cost
		if rule == nil {
			continue
		}
		if withStats && !rule.Unlimited {
			checks[i].ruleKey, checks[i].statKey = statKeys(domain, rule, entries, keyed)
		}
		for _, r := range rule.Replaces { // an unlimited rule's too, as envoyproxy/ratelimit's
			replaced[r] = true
		}
		if rule.Unlimited {
			continue
		}
		if rule.Limit.Rate > 0 {
			sub := admit.Subject{ID: subject(domain, keyed)}
			if atomicDomain {
				sub.Slot = subject(domain, keyed[:1])
			}
			checks[i].item = len(items)
			if items == nil {
				items = make([]service.Item, 0, len(ds)-i)
			}
			items = append(items, service.Item{Limit: rule.Limit, Version: KeyVersion, Subject: sub, Cost: cost})
		}
	}
	n := 0 // the Items of the descriptors not replaced, in order
	for i := range checks {
		c := &checks[i]
		if c.rule != nil && !c.rule.Unlimited && c.rule.Name != "" && replaced[c.rule.Name] {
			// replaced by another descriptor's rule: not limited. An unlimited rule stays
			// unlimited, as envoyproxy/ratelimit answers it.
			c.rule, c.item = nil, -1
		}
		if c.item >= 0 {
			items[n], c.item = items[c.item], n
			n++
		}
	}
	if decisions == nil {
		decisions = make([]admit.Decision, n)
	}
	return checks, items[:n], decisions[:n], nil
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
// envoyproxy/ratelimit applies one: a fixed window aligned to Unix time, named as the rule is, in
// shadow mode when it is.
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
		Period: r.Unit.Duration(), Aligned: true, Shadow: rule.Limit.Shadow, Replicas: rule.Limit.Replicas, ReplicaTimeout: rule.Limit.ReplicaTimeout}
	return &r
}

// DescriptorKey returns the subject the Server limits a descriptor of entries in domain by: the
// key the admin API's overrides address it with (docs/envoy.md, "Overrides"), such as
// "9:mongo_cps|8:database=5:users" for the entry database=users of domain mongo_cps: the domain,
// then each entry's key and value, every string after its length in bytes. One longer than 1 MiB
// is "#sha256:" and the SHA-256 of that spelling in hex.
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
