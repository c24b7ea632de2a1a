// Package envoyfleet simulates the client side of Envoy's Rate Limit Quota Service for tests:
// Envoys written from the protocol (envoy.service.rate_limit_quota.v3) and from what Envoy's
// rate_limit_quota filter does. Each Envoy keeps a cache of buckets; the first request of a
// bucket is decided by its no_assignment_behavior and reported at once (the report that
// subscribes to the bucket); every report interval it reports each bucket's allowed and denied
// requests since the last report, with the time elapsed in whole seconds; an assignment is
// enforced locally, a token bucket by a bucket of its numbers that starts full and is replaced only
// when the numbers change (the same numbers again extend the TTL and keep the tokens); an assignment
// expires after its TTL into expired_assignment_behavior; an abandon action drops the bucket. When
// its stream fails, it opens one again to the next address on its next report.
//
// Time is the caller's (Options.Now), so a test can run minutes of a fleet in seconds.
package envoyfleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
)

// A Behavior is what an Envoy does for a bucket without an assignment in force.
type Behavior int

// The behaviors: no_assignment_behavior's and expired_assignment_behavior's blanket rules, and
// expired_assignment_behavior's reuse_last_assignment.
const (
	AllowAll Behavior = iota
	DenyAll
	ReuseLast // expired only: keep enforcing the assignment that expired
)

// Options configure an [Envoy].
type Options struct {
	// Domain is the filter's domain.
	Domain string
	// Addrs are the RLQS servers, tried in turn.
	Addrs []string
	// Now is the clock of everything the Envoy does.
	Now func() time.Time
	// NoAssignment and Expired are the fallbacks.
	NoAssignment, Expired Behavior
}

// An Envoy is one simulated Envoy; its methods are safe for concurrent use.
type Envoy struct {
	opts Options

	mu        sync.Mutex
	cond      *sync.Cond
	buckets   map[string]*Bucket
	conn      *grpc.ClientConn
	stream    rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient
	cancel    context.CancelFunc
	addr      int
	received  int   // messages received
	sent      int   // messages sent
	streamErr error // the last stream's end
	streams   int   // streams opened
}

// A Bucket is an Envoy's view of one bucket.
type Bucket struct {
	id              map[string]string
	allowed, denied uint64 // since the last report
	lastReport      time.Time
	kind            int // 0 none, 1 tokens, 2 allow, 3 deny
	tb              *typev3.TokenBucket
	tokens          float64
	filled          time.Time
	expires         time.Time // zero: never
	// Totals for the test.
	Allowed, Denied uint64
	// Replaced counts the token buckets that replaced another (each starting full); Bursts sums
	// their max_tokens.
	Replaced, Bursts uint64
}

// New returns an Envoy of opts, not yet connected: its first request connects it.
func New(opts Options) *Envoy {
	e := &Envoy{opts: opts, buckets: make(map[string]*Bucket)}
	e.cond = sync.NewCond(&e.mu)
	return e
}

func key(id map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(id)) {
		fmt.Fprintf(&b, "%q=%q;", k, id[k])
	}
	return b.String()
}

// Request decides one request of bucket id, locally, and reports whether it is allowed. The first
// request of a bucket creates it and reports it at once.
func (e *Envoy) Request(id map[string]string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.opts.Now()
	k := key(id)
	b := e.buckets[k]
	if b == nil {
		b = &Bucket{id: maps.Clone(id), lastReport: now}
		e.buckets[k] = b
		ok := e.opts.NoAssignment == AllowAll
		b.count(ok)
		e.sendLocked([]*Bucket{b}, now)
		return ok
	}
	ok := b.decide(now, e.opts)
	b.count(ok)
	return ok
}

func (b *Bucket) count(ok bool) {
	if ok {
		b.allowed++
		b.Allowed++
	} else {
		b.denied++
		b.Denied++
	}
}

// decide applies the bucket's assignment at now, or the fallback that holds.
func (b *Bucket) decide(now time.Time, opts Options) bool {
	kind := b.kind
	if kind != 0 && !b.expires.IsZero() && !now.Before(b.expires) {
		switch opts.Expired {
		case AllowAll:
			kind = 2
		case DenyAll:
			kind = 3
		}
	}
	switch kind {
	case 0:
		return opts.NoAssignment == AllowAll
	case 2:
		return true
	case 3:
		return false
	}
	rate := float64(b.tb.GetTokensPerFill().GetValue()) / b.tb.GetFillInterval().AsDuration().Seconds()
	b.tokens = min(float64(b.tb.GetMaxTokens()), b.tokens+now.Sub(b.filled).Seconds()*rate)
	b.filled = now
	if b.tokens >= 1 {
		b.tokens--
		return true
	}
	return false
}

// Report sends the usage of every bucket since its last report, as Envoy does each report
// interval. It returns the error of a stream that could not be opened.
func (e *Envoy) Report() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	bs := make([]*Bucket, 0, len(e.buckets))
	for _, k := range slices.Sorted(maps.Keys(e.buckets)) {
		bs = append(bs, e.buckets[k])
	}
	return e.sendLocked(bs, e.opts.Now())
}

func (e *Envoy) sendLocked(bs []*Bucket, now time.Time) error {
	if e.stream == nil {
		if err := e.openLocked(); err != nil {
			return err
		}
	}
	m := &rlqsv3.RateLimitQuotaUsageReports{Domain: e.opts.Domain}
	for _, b := range bs {
		m.BucketQuotaUsages = append(m.BucketQuotaUsages, &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId:           &rlqsv3.BucketId{Bucket: maps.Clone(b.id)},
			TimeElapsed:        durationpb.New(now.Sub(b.lastReport).Truncate(time.Second)), // whole seconds, as Envoy
			NumRequestsAllowed: b.allowed,
			NumRequestsDenied:  b.denied,
		})
		b.allowed, b.denied, b.lastReport = 0, 0, now
	}
	if err := e.stream.Send(m); err != nil {
		e.closeLocked(err)
		return err
	}
	e.sent++
	return nil
}

func (e *Envoy) openLocked() error {
	if len(e.opts.Addrs) == 0 {
		return errors.New("envoyfleet: no address")
	}
	addr := e.opts.Addrs[e.addr%len(e.opts.Addrs)]
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := rlqsv3.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		cancel()
		conn.Close()
		e.addr++
		return err
	}
	e.conn, e.stream, e.cancel = conn, stream, cancel
	e.streams++
	go e.receive(stream)
	return nil
}

// closeLocked ends the stream; the next report opens one to the next address.
func (e *Envoy) closeLocked(err error) {
	if e.stream == nil {
		return
	}
	e.cancel()
	e.conn.Close()
	e.stream, e.streamErr = nil, err
	e.addr++
	e.cond.Broadcast()
}

func (e *Envoy) receive(stream rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient) {
	for {
		m, err := stream.Recv()
		e.mu.Lock()
		if err != nil {
			if e.stream == stream {
				e.closeLocked(err)
			}
			e.mu.Unlock()
			return
		}
		e.applyLocked(m)
		e.received++
		e.cond.Broadcast()
		e.mu.Unlock()
	}
}

func (e *Envoy) applyLocked(m *rlqsv3.RateLimitQuotaResponse) {
	now := e.opts.Now()
	for _, a := range m.GetBucketAction() {
		k := key(a.GetBucketId().GetBucket())
		b := e.buckets[k]
		if b == nil {
			continue // Envoy logs an unexpected bucket and skips it
		}
		if a.GetAbandonAction() != nil {
			delete(e.buckets, k)
			continue
		}
		qa := a.GetQuotaAssignmentAction()
		s := qa.GetRateLimitStrategy()
		switch {
		case s.GetTokenBucket() != nil:
			tb := s.GetTokenBucket()
			if b.kind != 1 || !sameBucket(b.tb, tb) {
				if b.kind == 1 {
					b.Replaced++
				}
				b.Bursts += uint64(tb.GetMaxTokens())
				b.tokens, b.filled = float64(tb.GetMaxTokens()), now
			}
			b.kind, b.tb = 1, tb
		case s.GetBlanketRule() == typev3.RateLimitStrategy_ALLOW_ALL && s.GetStrategy() != nil:
			b.kind = 2
		case s.GetBlanketRule() == typev3.RateLimitStrategy_DENY_ALL:
			b.kind = 3
		default:
			continue // requests_per_time_unit: unsupported, skipped
		}
		b.expires = time.Time{}
		if ttl := qa.GetAssignmentTimeToLive(); ttl != nil {
			b.expires = now.Add(ttl.AsDuration().Truncate(time.Second))
		}
	}
}

func sameBucket(a, b *typev3.TokenBucket) bool {
	return a.GetMaxTokens() == b.GetMaxTokens() && a.GetTokensPerFill().GetValue() == b.GetTokensPerFill().GetValue() &&
		a.GetFillInterval().AsDuration() == b.GetFillInterval().AsDuration()
}

// WaitReceived waits until the Envoy has received n messages in all, or the stream ended, for
// at most timeout of real time; it reports whether n were received.
func (e *Envoy) WaitReceived(n int, timeout time.Duration) bool {
	// The timer's flag, not a deadline compared with the clock, ends the wait: a deadline read
	// after the timer was set could lie after the moment it fired, and its one broadcast would
	// then be lost while this goroutine waited on (seen on a loaded machine: a 3 s wait that
	// never ended).
	expired := false
	timer := time.AfterFunc(timeout, func() {
		e.mu.Lock()
		expired = true
		e.cond.Broadcast()
		e.mu.Unlock()
	})
	defer timer.Stop()
	e.mu.Lock()
	defer e.mu.Unlock()
	for e.received < n && e.stream != nil && !expired {
		e.cond.Wait()
	}
	return e.received >= n
}

// Received returns the number of messages received.
func (e *Envoy) Received() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.received
}

// Sent returns the number of usage reports sent: the only messages of the Envoy, whatever its
// number of requests.
func (e *Envoy) Sent() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sent
}

// Streams returns the number of streams opened, and the error the last one ended with.
func (e *Envoy) Streams() (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.streams, e.streamErr
}

// MaxTokens returns the max_tokens of b's token bucket, 0 for none: the most it holds at once.
func (b Bucket) MaxTokens() uint32 {
	if b.kind != 1 {
		return 0
	}
	return b.tb.GetMaxTokens()
}

// Bucket returns a copy of the Envoy's bucket id, and whether it has one; Rate is its
// assigned rate in tokens per second (0 for none).
func (e *Envoy) Bucket(id map[string]string) (b Bucket, rate float64, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.buckets[key(id)]
	if p == nil {
		return Bucket{}, 0, false
	}
	if p.kind == 1 {
		rate = float64(p.tb.GetTokensPerFill().GetValue()) / p.tb.GetFillInterval().AsDuration().Seconds()
	}
	return *p, rate, true
}

// Kind returns the kind of the assignment of bucket id: "none", "tokens", "allow" or "deny", and
// "expired" beside it when its TTL passed.
func (e *Envoy) Kind(id map[string]string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.buckets[key(id)]
	if p == nil {
		return "absent"
	}
	k := [...]string{"none", "tokens", "allow", "deny"}[p.kind]
	if p.kind != 0 && !p.expires.IsZero() && !e.opts.Now().Before(p.expires) {
		k += " expired"
	}
	return k
}

// Close ends the Envoy's stream: it leaves the fleet.
func (e *Envoy) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closeLocked(errors.New("closed"))
	e.opts.Addrs = nil
}
