package rlqs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/admit-dev/admit/policy"
)

// The gRPC codes a stream ends with.
const (
	codeInvalid          = codes.InvalidArgument
	codeExhausted        = codes.ResourceExhausted
	codeDeadlineExceeded = codes.DeadlineExceeded
	codeUnavailable      = codes.Unavailable
)

// demandWeight is the weight of a new report in a bucket's demand (an exponential average).
const demandWeight = 0.75

// ledgerTimeout bounds a Ledger call.
const ledgerTimeout = 2 * time.Second

func grpcError(c codes.Code, format string, args ...any) error {
	return status.Errorf(c, format, args...)
}

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled
}

// streamState is one Envoy's stream.
type streamState struct {
	s       *Server
	client  string
	domain  string
	buckets map[string]*bucketState // by canonical id
}

// bucketState is one bucket of a stream.
type bucketState struct {
	id         map[string]string
	key        string    // in the Ledger
	demand     float64   // requests per second, averaged over the reports
	measured   bool      // demand was measured over time once
	reportedAt time.Time // when its last report came, by this instance's clock
	lastActive time.Time
	policy     string // the policy of the last assignment, "" for none
	sent       assignment
	// The warm-up of the bucket's ledger this stream was last assigned in: the ledger's birth,
	// the stream's place among its clients then (1 for the first), and the warm-up's end, zero
	// once its proper share was sent.
	warmBorn time.Time
	warmK    int
	warmEnd  time.Time
}

// report handles one message of usage reports and returns the actions to send.
func (st *streamState) report(ctx context.Context, m *rlqsv3.RateLimitQuotaUsageReports) (*rlqsv3.RateLimitQuotaResponse, error) {
	switch {
	case st.domain == "" && m.GetDomain() == "":
		return nil, grpcError(codeInvalid, "the first usage report of a stream must name its domain")
	case st.domain == "":
		st.domain = m.GetDomain()
	case m.GetDomain() != "" && m.GetDomain() != st.domain:
		return nil, grpcError(codeInvalid, "domain %q in a stream of domain %q: open a stream per domain", m.GetDomain(), st.domain)
	}
	now := st.s.opts.Now()
	var touched []*bucketState
	for i, u := range m.GetBucketQuotaUsages() {
		id, err := canonical(u.GetBucketId().GetBucket())
		if err != nil {
			return nil, grpcError(codeInvalid, "%s.bucket_id: %v", describeUsage(i), err)
		}
		elapsed := u.GetTimeElapsed()
		if elapsed != nil && (elapsed.CheckValid() != nil || elapsed.AsDuration() < 0) {
			return nil, grpcError(codeInvalid, "%s.time_elapsed: want a duration of 0 or more", describeUsage(i))
		}
		n := u.GetNumRequestsAllowed() + u.GetNumRequestsDenied()
		if u.GetNumRequestsAllowed() > MaxRequests || u.GetNumRequestsDenied() > MaxRequests || n > MaxRequests {
			return nil, grpcError(codeInvalid, "%s: more than %d requests in one report", describeUsage(i), uint64(MaxRequests))
		}
		b := st.buckets[id]
		if b == nil {
			if len(st.buckets) >= st.s.opts.MaxBuckets {
				return nil, grpcError(codeExhausted, "more than %d distinct buckets on one stream", st.s.opts.MaxBuckets)
			}
			b = &bucketState{id: maps.Clone(u.GetBucketId().GetBucket()), key: ledgerKey(st.domain, id), lastActive: now}
			st.buckets[id] = b
			st.s.opts.Observer.Bucket(1)
		}
		// Envoy's first report of a bucket counts its first request over no time: take it as
		// that many per second until a measured one comes.
		secs := elapsed.AsDuration().Seconds()
		if secs == 0 && b.measured && now.After(b.reportedAt) {
			// Envoy counts time_elapsed in whole seconds: a report that comes less than a second
			// after the one before says 0 (a short reporting_interval, or a timer's jitter); its
			// requests are measured over the time this instance saw pass instead of being lost.
			secs = now.Sub(b.reportedAt).Seconds()
		}
		b.reportedAt = now
		rate := float64(n)
		if secs > 0 {
			rate = float64(n) / secs
		}
		switch {
		case secs > 0 && !b.measured:
			b.demand, b.measured = rate, true
		case secs > 0:
			b.demand = demandWeight*rate + (1-demandWeight)*b.demand
		case !b.measured:
			b.demand = max(b.demand, rate)
		}
		if n > 0 {
			b.lastActive = now
		}
		if p := st.rule(b); p != "" {
			st.s.opts.Observer.Reported(p, u.GetNumRequestsAllowed(), u.GetNumRequestsDenied())
		}
		touched = append(touched, b)
	}
	return st.assign(ctx, touched, now), nil
}

// rule returns the name of the policy of bucket b under the current configuration: its rule's,
// else its domain's default policy; "" for none.
func (st *streamState) rule(b *bucketState) string {
	d, ok := st.s.cfg.Load().RLQSDomain(st.domain)
	if !ok {
		return ""
	}
	for _, r := range d.Buckets {
		if r.Matches(b.id) {
			return r.Policy
		}
	}
	if d.Unmatched == policy.RLQSDefaultPolicy {
		return d.UnmatchedPolicy
	}
	return ""
}

// assign computes the assignments of bs and returns those to send.
func (st *streamState) assign(ctx context.Context, bs []*bucketState, now time.Time) *rlqsv3.RateLimitQuotaResponse {
	cfg := st.s.cfg.Load()
	dom, known := cfg.RLQSDomain(st.domain)
	resp := &rlqsv3.RateLimitQuotaResponse{}
	for _, b := range bs {
		if a := st.action(ctx, cfg, dom, known, b, now); a != nil {
			resp.BucketAction = append(resp.BucketAction, a)
		}
	}
	return resp
}

// action returns the action of bucket b, nil for none.
func (st *streamState) action(ctx context.Context, cfg *policy.Config, dom policy.RLQSDomain, known bool, b *bucketState, now time.Time) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	if !known {
		return st.unassign(b)
	}
	name := st.rule(b)
	ttl := dom.AssignmentTTL
	var next assignment
	var strategy *typev3.RateLimitStrategy
	p, ok := cfg.Policy(name)
	switch {
	case name == "" || !ok:
		switch dom.Unmatched {
		case policy.RLQSAllowAll:
			next, strategy = assignment{kind: assignAllow}, blanket(typev3.RateLimitStrategy_ALLOW_ALL)
		case policy.RLQSDenyAll:
			next, strategy = assignment{kind: assignDeny}, blanket(typev3.RateLimitStrategy_DENY_ALL)
		default:
			return st.unassign(b)
		}
		name = ""
	case p.Limit.Shadow:
		next, strategy = assignment{kind: assignAllow}, blanket(typev3.RateLimitStrategy_ALLOW_ALL)
	default:
		lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
		demands, born, err := st.s.opts.Ledger.ReportDemand(lctx, b.key, st.client, b.demand, now, dom.AssignmentTTL)
		cancel()
		if err != nil {
			// No answer: the assignment Envoy holds expires after its TTL into its
			// expired_assignment_behavior, unless the Ledger answers before.
			st.s.log.Log(ctx, logRecord, err, slog.String("domain", st.domain), slog.String("policy", name))
			return nil
		}
		window := int64(p.Limit.Period / time.Second)
		budget := float64(p.Limit.Rate) / (1 + Deadband)
		var perFill uint32
		if end := born.Add(Warmup(dom.AssignmentTTL)); now.Before(end) {
			perFill, ttl = st.warm(b, name, budget, len(demands), born, end, now, ttl)
		} else {
			b.warmEnd = time.Time{}
			share := Shares(budget, demands)[st.client]
			perFill = tokens(share)
			if b.sent.kind == assignTokens && b.policy == name && keep(b.sent.perFill, share) {
				perFill = b.sent.perFill
			}
		}
		next = assignment{kind: assignTokens, perFill: perFill, rate: float64(perFill) / float64(window)}
		strategy = &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
			MaxTokens:     burst(perFill, window),
			TokensPerFill: wrapperspb.UInt32(perFill),
			FillInterval:  durationpb.New(p.Limit.Period),
		}}}
	}
	st.setSent(b, name, next)
	return &rlqsv3.RateLimitQuotaResponse_BucketAction{
		BucketId: &rlqsv3.BucketId{Bucket: maps.Clone(b.id)},
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
			QuotaAssignmentAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
				AssignmentTimeToLive: durationpb.New(ttl),
				RateLimitStrategy:    strategy,
			},
		},
	}
}

// warm returns the tokens per fill and the TTL of bucket b under policy name while its ledger,
// born at born, is in its warm-up, until end: the share of the stream's place among the ledger's
// clients (WarmShare), never more than the share it holds of the same policy, and a TTL of the
// warm-up's rest rounded up to whole seconds and one more (at most ttl), so that the proper share,
// which the stream sends at the warm-up's end, comes before it expires.
func (st *streamState) warm(b *bucketState, name string, budget float64, clients int, born, end, now time.Time, ttl time.Duration) (uint32, time.Duration) {
	if !b.warmBorn.Equal(born) {
		b.warmBorn, b.warmK = born, max(clients, 1)
	}
	b.warmEnd = end
	perFill := tokens(WarmShare(budget, b.warmK))
	if b.sent.kind == assignTokens && b.policy == name {
		perFill = min(perFill, b.sent.perFill)
	}
	left := end.Sub(now).Truncate(time.Second)
	if left < end.Sub(now) {
		left += time.Second
	}
	return perFill, min(left+time.Second, ttl)
}

// endWarmups sends each bucket whose ledger's warm-up ended its proper share: its assignment
// again, past the warm-up. A bucket whose Ledger does not answer waits for its next report.
func (st *streamState) endWarmups(ctx context.Context) *rlqsv3.RateLimitQuotaResponse {
	now := st.s.opts.Now()
	var bs []*bucketState
	for _, id := range sortedKeys(st.buckets) {
		b := st.buckets[id]
		if !b.warmEnd.IsZero() && !now.Before(b.warmEnd) {
			b.warmEnd = time.Time{}
			bs = append(bs, b)
		}
	}
	if len(bs) == 0 {
		return nil
	}
	return st.assign(ctx, bs, now)
}

// nextWarmEnd returns the earliest end of a warm-up among the stream's buckets, false for none.
func (st *streamState) nextWarmEnd() (time.Time, bool) {
	var next time.Time
	for _, b := range st.buckets {
		if !b.warmEnd.IsZero() && (next.IsZero() || b.warmEnd.Before(next)) {
			next = b.warmEnd
		}
	}
	return next, !next.IsZero()
}

// unassign returns nil for a bucket that has no assignment, else an abandon action: a bucket that
// lost its assignment (a reload) falls back to Envoy's no_assignment_behavior at once.
func (st *streamState) unassign(b *bucketState) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	had := b.sent.kind != assignNone
	st.setSent(b, "", assignment{})
	if !had {
		return nil
	}
	return abandon(b)
}

func abandon(b *bucketState) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	return &rlqsv3.RateLimitQuotaResponse_BucketAction{
		BucketId:     &rlqsv3.BucketId{Bucket: maps.Clone(b.id)},
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction_{AbandonAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction{}},
	}
}

// setSent records what b was sent, telling the Observer of a change.
func (st *streamState) setSent(b *bucketState, name string, next assignment) {
	if b.policy == name && b.sent == next {
		return
	}
	if b.policy != "" && b.sent.rate != 0 {
		st.s.opts.Observer.Assigned(b.policy, -b.sent.rate)
	}
	if name != "" && next.kind != assignNone {
		st.s.opts.Observer.Assigned(name, next.rate)
	}
	b.policy, b.sent = name, next
}

// abandonIdle abandons the buckets that reported no request for their domain's idle_after.
func (st *streamState) abandonIdle(ctx context.Context) *rlqsv3.RateLimitQuotaResponse {
	if st.domain == "" {
		return nil
	}
	idle := policy.DefaultRLQSIdleAfter
	if d, ok := st.s.cfg.Load().RLQSDomain(st.domain); ok {
		idle = d.IdleAfter
	}
	now := st.s.opts.Now()
	resp := &rlqsv3.RateLimitQuotaResponse{}
	for id, b := range st.buckets {
		if now.Sub(b.lastActive) < idle {
			continue
		}
		resp.BucketAction = append(resp.BucketAction, abandon(b))
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerTimeout)
		st.drop(lctx, id, b)
		cancel()
	}
	return resp
}

// drop forgets bucket b of the stream, in the Ledger too, within ctx.
func (st *streamState) drop(ctx context.Context, id string, b *bucketState) {
	st.setSent(b, "", assignment{})
	if err := st.s.opts.Ledger.LeaveDemand(ctx, b.key, st.client); err != nil {
		st.s.log.Log(ctx, logRemove, err, slog.String("domain", st.domain))
	}
	delete(st.buckets, id)
	st.s.opts.Observer.Bucket(-1)
}

// reassignAll sends every bucket its assignment under a configuration just swapped in.
func (st *streamState) reassignAll(ctx context.Context) *rlqsv3.RateLimitQuotaResponse {
	if st.domain == "" {
		return nil
	}
	bs := make([]*bucketState, 0, len(st.buckets))
	for _, id := range sortedKeys(st.buckets) {
		bs = append(bs, st.buckets[id])
	}
	return st.assign(ctx, bs, st.s.opts.Now())
}

// leave removes the stream's demands from the Ledger: its share goes to the others. It gives the
// Ledger one ledgerTimeout for them all, so that a stream's end (at a shutdown) never waits
// longer; the records left behind expire after their TTL.
func (st *streamState) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	for id, b := range st.buckets {
		st.drop(ctx, id, b)
	}
}
