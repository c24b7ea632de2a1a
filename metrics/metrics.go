// Package metrics counts admit's decisions for Prometheus: a Store decorator, the gauges of a loaded
// configuration, the count of admin changes, the size of the top-subjects sketches and the log
// lines dropped, registered into a Registerer the caller owns (no global registry).
//
// Labels name policies (admit.Limit.Name), results and kinds of error — never a key or a subject,
// so the number of series is bounded by the number of policies, however many clients arrive
// (docs/operations.md, "Metrics").
package metrics

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/replsession"
	"github.com/prometheus/client_golang/prometheus"
)

// The results a decision is counted under, as the label result of admit_decisions_total.
const (
	// ResultAllowed counts an admitted Request (not a replay).
	ResultAllowed = "allowed"
	// ResultLimited counts a Request over its limit.
	ResultLimited = "limited"
	// ResultShadow counts a Request over the limit of a policy in shadow mode (admit.Limit.Shadow):
	// it would have been limited, and was not.
	ResultShadow = "shadow"
	// ResultReplayed counts a Request answered with the recorded Decision of an earlier one with the
	// same ID.
	ResultReplayed = "replayed"
	// ResultUnavailable counts a Request the Store could not decide.
	ResultUnavailable = "unavailable"
	// ResultInvalid counts a Request the Store refused as invalid, a caller's mistake.
	ResultInvalid = "invalid"
	// ResultDegraded counts a Request that a local limiter decided, admitted or not, because the
	// backend could not (admit.Decision.Degraded: a policy failing open, docs/failure-modes.md): a decision of this
	// process alone, not a global one. It is counted under no other result, so allowed and limited
	// stay the backend's decisions. The metrics Store sees it only when it sits above the
	// guard.FailOpen (metrics → guard.FailOpen → backend).
	ResultDegraded = "degraded"
)

// The kinds of error, as the label kind of admit_backend_errors_total.
const (
	KindCorruptState = "corrupt_state"
	KindTimeout      = "timeout"
	KindCanceled     = "canceled"
	KindUnavailable  = "unavailable"
	KindInvalid      = "invalid"
	KindUnsupported  = "unsupported"
	KindOther        = "other"
)

// The operations of a Store, as the label operation of admit_decision_duration_seconds.
const (
	OpTake    = "take"
	OpRelease = "release"
	OpSettle  = "settle"
)

// Store is an admit.Store that counts the decisions and errors of another, and times them. It is
// safe for concurrent use. Make one with [NewStore].
//
// Its series:
//
//	admit_decisions_total{policy, result}             every Request decided (or not), by the Limit's name
//	admit_backend_errors_total{kind}                  every error, by kind: corrupt_state, timeout, …
//	admit_decision_duration_seconds{operation}        how long each call took: take, release, settle
//
// A TakeAll of N Requests counts N decisions (one per policy) and one duration.
type Store struct {
	next      admit.Store
	decisions *prometheus.CounterVec
	errs      *prometheus.CounterVec
	durations *prometheus.HistogramVec
	take      prometheus.Observer
	release   prometheus.Observer
	settle    prometheus.Observer

	mu       sync.RWMutex
	policies map[string]*policyCounters // by policy name: the counters, resolved once
}

// policyCounters are one policy's counters of admit_decisions_total.
type policyCounters struct {
	allowed, limited, shadow, replayed, unavailable, invalid, degraded prometheus.Counter
}

var _ admit.Store = (*Store)(nil)

// NewStore returns a Store that forwards every operation to next and counts it, registering its
// collectors into reg. It reports the error of a registration that fails, such as a second Store
// registered into one Registerer.
func NewStore(next admit.Store, reg prometheus.Registerer) (*Store, error) {
	s := &Store{
		next: next,
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "admit_decisions_total",
			Help: "Requests decided, by policy and result (allowed, limited, shadow, replayed, unavailable, invalid, degraded).",
		}, []string{"policy", "result"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "admit_backend_errors_total",
			Help: "Store operations that could not decide, by kind of error (corrupt_state, timeout, canceled, unavailable, invalid, unsupported, other).",
		}, []string{"kind"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "admit_decision_duration_seconds",
			Help:    "Time of each Store operation (take, release, settle), errors included.",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"operation"}),
		policies: make(map[string]*policyCounters),
	}
	for _, c := range []prometheus.Collector{s.decisions, s.errs, s.durations} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	s.take = s.durations.WithLabelValues(OpTake)
	s.release = s.durations.WithLabelValues(OpRelease)
	s.settle = s.durations.WithLabelValues(OpSettle)
	for _, k := range []string{KindCorruptState, KindTimeout, KindCanceled, KindUnavailable, KindInvalid, KindUnsupported, KindOther} {
		s.errs.WithLabelValues(k) // every kind shows, at 0, before its first error
	}
	return s, nil
}

// Take forwards r to the next Store, and counts and times it.
func (s *Store) Take(ctx context.Context, r admit.Request) (admit.Decision, error) {
	start := time.Now()
	d, err := s.next.Take(ctx, r)
	s.take.Observe(time.Since(start).Seconds())
	s.count(r.Limit.Name, &d, err)
	return d, err
}

// TakeAll forwards rs to the next Store, and counts each Request and times the call.
func (s *Store) TakeAll(ctx context.Context, rs []admit.Request, ds []admit.Decision) (bool, error) {
	start := time.Now()
	allowed, err := s.next.TakeAll(ctx, rs, ds)
	s.take.Observe(time.Since(start).Seconds())
	if err == nil && s.countAfter(ctx, rs, ds) {
		return allowed, nil
	}
	for i := range rs {
		var d *admit.Decision
		if err == nil {
			d = &ds[i]
		}
		s.count(rs[i].Limit.Name, d, err)
	}
	return allowed, err
}

// Release forwards l to the next Store, and times it and counts its error.
func (s *Store) Release(ctx context.Context, l admit.Lease) error {
	start := time.Now()
	err := s.next.Release(ctx, l)
	s.release.Observe(time.Since(start).Seconds())
	if err != nil {
		s.errs.WithLabelValues(Kind(err)).Inc()
	}
	return err
}

// Settle forwards res to the next Store, and times it and counts its error.
func (s *Store) Settle(ctx context.Context, res admit.Reservation, actual int64) (admit.Decision, error) {
	start := time.Now()
	d, err := s.next.Settle(ctx, res, actual)
	s.settle.Observe(time.Since(start).Seconds())
	if err != nil {
		s.errs.WithLabelValues(Kind(err)).Inc()
	}
	return d, err
}

// Reset forwards keys to the next Store, and counts its error.
func (s *Store) Reset(ctx context.Context, keys []string) error {
	err := s.next.Reset(ctx, keys)
	if err != nil {
		s.errs.WithLabelValues(Kind(err)).Inc()
	}
	return err
}

// count counts one Request of policy decided as d, or not decided for err.
func (s *Store) count(policy string, d *admit.Decision, err error) {
	c := s.counters(policy)
	switch {
	case err != nil:
		kind := Kind(err)
		if kind == KindInvalid {
			c.invalid.Inc()
		} else {
			c.unavailable.Inc()
		}
		s.errs.WithLabelValues(kind).Inc()
	case d.Degraded:
		c.degraded.Inc()
	case d.Replayed:
		c.replayed.Inc()
	case d.Allowed:
		c.allowed.Inc()
	case d.Limit.Shadow:
		c.shadow.Inc()
	default:
		c.limited.Inc()
	}
}

// countAfter defers the count of the Decisions of rs, a call of a request that waits once for its
// replicas (replsession), to the end of its session: they stand if the wait confirms them, else
// each counts as the session's error. It reports false when ctx carries no session, or one that
// ended: then the call counts now.
func (s *Store) countAfter(ctx context.Context, rs []admit.Request, ds []admit.Decision) bool {
	sess := replsession.From(ctx)
	if sess == nil {
		return false
	}
	names := make([]string, len(rs))
	for i := range rs {
		names[i] = rs[i].Limit.Name
	}
	kept := slices.Clone(ds[:len(rs)])
	return sess.After(func(err error) {
		for i := range names {
			if err != nil {
				s.count(names[i], nil, err)
			} else {
				s.count(names[i], &kept[i], nil)
			}
		}
	})
}

// counters returns the counters of policy, resolving them on first use.
func (s *Store) counters(policy string) *policyCounters {
	s.mu.RLock()
	c := s.policies[policy]
	s.mu.RUnlock()
	if c != nil {
		return c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c = s.policies[policy]; c == nil {
		with := func(result string) prometheus.Counter { return s.decisions.WithLabelValues(policy, result) }
		c = &policyCounters{allowed: with(ResultAllowed), limited: with(ResultLimited), shadow: with(ResultShadow), replayed: with(ResultReplayed),
			unavailable: with(ResultUnavailable), invalid: with(ResultInvalid), degraded: with(ResultDegraded)}
		s.policies[policy] = c
	}
	return c
}

// Kind returns the kind of err, as admit_backend_errors_total labels it: KindCorruptState,
// KindTimeout, KindCanceled, KindUnavailable, KindInvalid, KindUnsupported or KindOther.
func Kind(err error) string {
	switch {
	case errors.Is(err, admit.ErrCorruptState):
		return KindCorruptState
	case errors.Is(err, context.DeadlineExceeded):
		return KindTimeout
	case errors.Is(err, context.Canceled):
		return KindCanceled
	case errors.Is(err, admit.ErrInvalidLimit), errors.Is(err, admit.ErrInvalidRequest):
		return KindInvalid
	case errors.Is(err, errors.ErrUnsupported):
		return KindUnsupported
	case errors.Is(err, admit.ErrUnavailable):
		return KindUnavailable
	}
	return KindOther
}

// SetOverride forwards o to the next Store.
func (s *Store) SetOverride(ctx context.Context, o admit.Override) error {
	return s.next.SetOverride(ctx, o)
}

// Override forwards key to the next Store.
func (s *Store) Override(ctx context.Context, key string) (admit.Override, bool, error) {
	return s.next.Override(ctx, key)
}

// DeleteOverride forwards key to the next Store.
func (s *Store) DeleteOverride(ctx context.Context, key string) (bool, error) {
	return s.next.DeleteOverride(ctx, key)
}

// Overrides forwards the listing to the next Store.
func (s *Store) Overrides(ctx context.Context, policy, cursor string, n int) ([]admit.Override, string, error) {
	return s.next.Overrides(ctx, policy, cursor, n)
}

// OverrideCount forwards the count to the next Store.
func (s *Store) OverrideCount(ctx context.Context, policy string) (int64, error) {
	return s.next.OverrideCount(ctx, policy)
}
