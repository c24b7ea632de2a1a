package service

import (
	"context"
	"errors"

	"github.com/admit-dev/admit"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The names of the spans and attributes of a traced Service (docs/operations.md#traces).
const (
	// DecisionSpan is the name of the span of each decision: a Check, an Admit or a DecideItems.
	DecisionSpan = "admit.decide"
	// StoreSpan is the name of the span of each call of the Store a decision makes, the decision
	// span's child: one TakeAll (admit.Hold's for Admit), the Redis round trip on Redis.
	StoreSpan = "admit.store"
)

// Tracing is how a Service traces its decisions: off (the zero value, no cost) or through Tracer.
type Tracing struct {
	// Tracer starts the spans; nil turns tracing off.
	Tracer trace.Tracer
	// Backend names the Store's backend in the admit.backend attribute: "memory" or "redis".
	Backend string
}

// Trace makes t the tracing of the Service's decisions. Call it before the Service decides: it
// is not safe to call concurrently with a decision. A span never holds a subject, a key, its
// digest or a request ID: only policy names, algorithms and the outcome.
func (s *Service) Trace(t Tracing) {
	s.tracing = t
	s.backendAttr = attribute.String("admit.backend", t.Backend)
}

// startDecide starts the decision span of items, a child of ctx's span, and returns its context.
// The attributes are made only for a span that is recorded (sampled).
func (s *Service) startDecide(ctx context.Context, items []Item, p plan) (context.Context, trace.Span) {
	ctx, span := s.tracing.Tracer.Start(ctx, DecisionSpan, trace.WithSpanKind(trace.SpanKindInternal))
	if !span.IsRecording() {
		return ctx, span
	}
	names := make([]string, len(items))
	algorithms := make([]string, len(items))
	for i := range items {
		names[i], algorithms[i] = items[i].Limit.Name, items[i].Limit.Algorithm.String()
	}
	grouping := "together"
	switch p.grouping {
	case Separately:
		grouping = "separately"
	case BySlot:
		grouping = "by_slot"
	}
	span.SetAttributes(
		attribute.StringSlice("admit.policies", names),
		attribute.StringSlice("admit.algorithms", algorithms),
		attribute.String("admit.grouping", grouping),
		s.backendAttr,
	)
	return ctx, span
}

// endDecide ends span, the decision span of ds, decided allowed or failed with err.
func endDecide(span trace.Span, ds []admit.Decision, allowed bool, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	result := outcome(allowed, err)
	degraded, replayed := false, false
	for i := range ds {
		degraded = degraded || ds[i].Degraded
		replayed = replayed || ds[i].Replayed
	}
	span.SetAttributes(
		attribute.String("admit.result", result),
		attribute.Bool("admit.degraded", err == nil && degraded),
		attribute.Bool("admit.replayed", err == nil && replayed),
	)
	if err != nil {
		span.SetStatus(codes.Error, result) // never the error's text, which may name a key
	}
	span.End()
}

// outcome returns the admit.result of a decision: allowed, limited, unavailable (the Store could
// not decide), invalid (a caller's mistake, before any I/O) or error (anything else).
func outcome(allowed bool, err error) string {
	switch {
	case err == nil && allowed:
		return "allowed"
	case err == nil:
		return "limited"
	case errors.Is(err, admit.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, admit.ErrInvalidRequest), errors.Is(err, admit.ErrInvalidLimit):
		return "invalid"
	}
	return "error"
}

// storeSpan starts the span of a call of the Store on n Requests when tracing is on, else returns
// ctx and nil, at no cost.
func (s *Service) storeSpan(ctx context.Context, n int) (context.Context, trace.Span) {
	if s.tracing.Tracer == nil {
		return ctx, nil
	}
	return s.startStore(ctx, n)
}

// startStore starts the span of a call of the Store on n Requests.
func (s *Service) startStore(ctx context.Context, n int) (context.Context, trace.Span) {
	ctx, span := s.tracing.Tracer.Start(ctx, StoreSpan, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(s.backendAttr, attribute.Int("admit.requests", n))
	}
	return ctx, span
}

// endStore ends span, a store span or nil, of a call that failed with err or not.
func endStore(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, outcome(false, err))
	}
	span.End()
}
