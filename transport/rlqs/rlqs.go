// Package rlqs serves Envoy's Rate Limit Quota Service, envoy.service.rate_limit_quota.v3, over
// gRPC: each Envoy reports its usage per bucket every few seconds on one stream, and admit assigns
// it a token bucket to enforce locally, its share of one global budget in proportion to its
// demand, so that no request waits for a call (docs/rlqs.md).
//
// A bucket id is matched to a policy by the rlqs section of admit's configuration
// (policy.RLQSDomain): the policy's limit per window is the budget of each distinct bucket id it
// matches. The demands of every Envoy of a bucket are recorded in a [Ledger] shared by the admit
// instances (Redis: redisstore.Store), so that instances serving parts of a fleet split one
// budget; [Shares] splits it, and each stream sends its Envoy its own share as a token bucket of
// whole seconds, which Envoy's client enforces. While a bucket's Ledger is younger than its
// [Warmup] (a new fleet, a Redis emptied), each Envoy is sent its [WarmShare] instead, and its
// share of the split is pushed when the warm-up ends. A bucket that reports no request for the
// domain's idle_after is abandoned; a policy in shadow mode is a blanket ALLOW_ALL.
package rlqs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/admit-dev/admit/internal/lograte"
	"github.com/admit-dev/admit/policy"
)

// Defaults of [Options].
const (
	// DefaultMaxBuckets is Options.MaxBuckets when it is 0.
	DefaultMaxBuckets = 1000
	// DefaultFirstReport is Options.FirstReport when it is 0.
	DefaultFirstReport = time.Minute
	// DefaultTick is Options.Tick when it is 0.
	DefaultTick = time.Second
)

// HealthServices are the service names that admit serve's RLQS listener answers grpc.health.v1
// for, all of one status: the server as a whole ("") and the Rate Limit Quota Service's full name.
var HealthServices = []string{"", rlqsv3.RateLimitQuotaService_ServiceDesc.ServiceName}

// An Observer is told what the Server does, for metrics; its methods are called concurrently.
// Its labels are bounded: policy names of the configuration.
type Observer interface {
	// Stream counts a stream opened (+1) or ended (-1).
	Stream(delta int)
	// Bucket counts a bucket of a stream added (+1) or dropped (-1).
	Bucket(delta int)
	// Assigned counts a new assignment of a bucket of policy, and the change in tokens per second
	// that this instance's Envoys are assigned under it.
	Assigned(policy string, rateDelta float64)
	// Reported counts the requests Envoys reported allowed and denied under policy.
	Reported(policy string, allowed, denied uint64)
}

// Options configure a [Server].
type Options struct {
	// Config holds the rlqs section and the policies it names; required. Swap replaces it.
	Config *policy.Config
	// Ledger records the demands shared by the instances; required.
	Ledger Ledger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger logs what the Server refuses or cannot do, a Ledger's failures at most once per
	// lograte.DefaultInterval each (then a summary); nil discards.
	Logger *slog.Logger
	// Observer is told about streams, buckets and assignments; nil tells nobody.
	Observer Observer
	// MaxBuckets is the most distinct buckets one stream may report; beyond it the stream ends
	// with RESOURCE_EXHAUSTED. 0 means DefaultMaxBuckets.
	MaxBuckets int
	// FirstReport is how long a stream may wait before its first report; after it, the stream ends
	// with DEADLINE_EXCEEDED. 0 means DefaultFirstReport.
	FirstReport time.Duration
	// Tick is how often a stream looks for idle buckets. 0 means DefaultTick.
	Tick time.Duration
}

// A Server is the Rate Limit Quota Service. Make one with [New]; it is safe for concurrent use.
type Server struct {
	rlqsv3.UnimplementedRateLimitQuotaServiceServer
	opts     Options
	cfg      atomic.Pointer[policy.Config]
	log      *lograte.Limiter // the Ledger's failures: logRecord, logRemove
	mu       sync.Mutex
	streams  map[chan struct{}]bool // each stream's reload signal
	closing  chan struct{}          // closed by Shutdown
	shutdown sync.Once
}

// The kinds of the Server's bounded log records.
const (
	logRecord = iota
	logRemove
)

// New returns a Server of opts, or an error naming what is missing.
func New(opts Options) (*Server, error) {
	switch {
	case opts.Config == nil:
		return nil, errors.New("rlqs: Options.Config is required")
	case opts.Ledger == nil:
		return nil, errors.New("rlqs: Options.Ledger is required")
	case opts.MaxBuckets < 0 || opts.FirstReport < 0 || opts.Tick < 0:
		return nil, errors.New("rlqs: Options.MaxBuckets, FirstReport and Tick must not be negative")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	if opts.MaxBuckets == 0 {
		opts.MaxBuckets = DefaultMaxBuckets
	}
	if opts.FirstReport == 0 {
		opts.FirstReport = DefaultFirstReport
	}
	if opts.Tick == 0 {
		opts.Tick = DefaultTick
	}
	s := &Server{opts: opts, streams: make(map[chan struct{}]bool), closing: make(chan struct{}),
		log: lograte.New(opts.Logger, lograte.DefaultInterval,
			lograte.Kind{Level: slog.LevelWarn, Msg: "rlqs: cannot record demand"},
			lograte.Kind{Level: slog.LevelWarn, Msg: "rlqs: cannot remove demand"})}
	s.cfg.Store(opts.Config)
	return s, nil
}

// Shutdown ends every stream, and each opened after it, with UNAVAILABLE, so that a graceful stop
// of its gRPC server does not wait for them: their demands leave the Ledger, and each Envoy opens
// a stream to another instance at its next report.
func (s *Server) Shutdown() {
	s.shutdown.Do(func() { close(s.closing) })
}

// Swap replaces the configuration; every stream sends its Envoy the assignments of the new one at
// once.
func (s *Server) Swap(cfg *policy.Config) {
	s.cfg.Store(cfg)
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.streams {
		select {
		case ch <- struct{}{}:
		default: // a reload is pending already
		}
	}
}

// StreamRateLimitQuotas serves one Envoy's stream: see the package documentation.
func (s *Server) StreamRateLimitQuotas(stream rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasServer) error {
	ctx := stream.Context()
	reload := make(chan struct{}, 1)
	s.mu.Lock()
	s.streams[reload] = true
	s.mu.Unlock()
	s.opts.Observer.Stream(1)
	st := &streamState{s: s, client: newClientID(), buckets: make(map[string]*bucketState)}
	defer func() {
		s.mu.Lock()
		delete(s.streams, reload)
		s.mu.Unlock()
		st.leave()
		s.opts.Observer.Stream(-1)
	}()

	reports := make(chan *rlqsv3.RateLimitQuotaUsageReports)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case reports <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	first := time.NewTimer(s.opts.FirstReport)
	defer first.Stop()
	tick := time.NewTicker(s.opts.Tick)
	defer tick.Stop()
	warm := time.NewTimer(time.Hour) // the next end of a ledger's warm-up, armed after each event
	warm.Stop()
	defer warm.Stop()
	for {
		var resp *rlqsv3.RateLimitQuotaResponse
		var err error
		select {
		case <-ctx.Done():
			return nil
		case <-s.closing:
			return grpcError(codeUnavailable, "admit is shutting down: open a stream to another instance")
		case err := <-recvErr:
			if errors.Is(err, context.Canceled) || isEOF(err) {
				return nil
			}
			return err
		case <-first.C:
			if st.domain == "" {
				return grpcError(codeDeadlineExceeded, "no usage report within %s of the stream's start", s.opts.FirstReport)
			}
		case m := <-reports:
			first.Stop()
			resp, err = st.report(ctx, m)
		case <-tick.C:
			resp = st.abandonIdle(ctx)
			if w := st.endWarmups(ctx); w != nil && resp != nil {
				resp.BucketAction = append(resp.BucketAction, w.BucketAction...)
			}
		case <-warm.C:
			resp = st.endWarmups(ctx)
		case <-reload:
			resp = st.reassignAll(ctx)
		}
		if err != nil {
			return err
		}
		if resp != nil && len(resp.BucketAction) > 0 {
			if err := stream.Send(resp); err != nil {
				return err
			}
		}
		if end, ok := st.nextWarmEnd(); ok {
			warm.Reset(max(end.Sub(s.opts.Now()), 0))
		} else {
			warm.Stop()
		}
	}
}

// newClientID names a stream in the Ledger: random, so that instances never share one.
func newClientID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

type nopObserver struct{}

func (nopObserver) Stream(int)                      {}
func (nopObserver) Bucket(int)                      {}
func (nopObserver) Assigned(string, float64)        {}
func (nopObserver) Reported(string, uint64, uint64) {}

// assignment is what a bucket was last sent.
type assignment struct {
	kind    int    // assignNone, assignTokens, assignAllow, assignDeny
	perFill uint32 // tokens per fill of assignTokens
	rate    float64
}

const (
	assignNone = iota
	assignTokens
	assignAllow
	assignDeny
)

func blanket(rule typev3.RateLimitStrategy_BlanketRule) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: rule}}
}

// describeUsage names a report's usage in an error.
func describeUsage(i int) string { return fmt.Sprintf("bucket_quota_usages[%d]", i) }
