package service_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/service"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// tracePolicies are the policies of the tracing tests.
const tracePolicies = `
policies:
  - name: one
    algorithm: fixed_window
    limit: 1
    window: 24h
  - name: roomy
    algorithm: gcra
    limit: 1000000000
    window: 24h
`

// traced returns a Service on store under src whose spans rec records, with backend name backend.
func traced(t *testing.T, store admit.Store, src, backend string) (*service.Service, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	s := newService(t, store, src)
	s.Trace(service.Tracing{Tracer: tp.Tracer("test"), Backend: backend})
	return s, rec
}

// spanAttrs returns the attributes of s by key, each as its value's Emit.
func spanAttrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := make(map[string]string)
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

// lastDecision returns the last decision span rec ended, and its store spans, which it checks are
// its children.
func lastDecision(t *testing.T, rec *tracetest.SpanRecorder) (decide sdktrace.ReadOnlySpan, stores []sdktrace.ReadOnlySpan) {
	t.Helper()
	ended := rec.Ended()
	for i := len(ended) - 1; i >= 0; i-- {
		if ended[i].Name() == service.DecisionSpan {
			decide = ended[i]
			break
		}
	}
	if decide == nil {
		t.Fatalf("no %s span among %d", service.DecisionSpan, len(ended))
	}
	for _, s := range ended {
		if s.Name() == service.StoreSpan && s.Parent().SpanID() == decide.SpanContext().SpanID() {
			stores = append(stores, s)
		}
	}
	return decide, stores
}

// TestTraceSpans checks the decision span's attributes and the store spans under it for each
// result a Check and DecideItems may have, and that the parent of the decision span is the
// caller's.
func TestTraceSpans(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	t.Cleanup(func() { mem.Close() })
	s, rec := traced(t, mem, tracePolicies, "memory")
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, Remote: true})
	ctx := trace.ContextWithRemoteSpanContext(t.Context(), parent)
	const subject = "subject-of-the-trace-test"
	check := service.Check{Policies: []string{"one", "roomy"}, Subject: admit.Subject{ID: subject}, Cost: 1, RequestID: "request-of-the-trace-test"}
	for _, step := range []struct {
		name, result, replayed string
		check                  service.Check
	}{
		{"allowed", "allowed", "false", check},
		{"replayed", "allowed", "true", check},
		{"limited", "limited", "false", service.Check{Policies: []string{"one"}, Subject: check.Subject, Cost: 1}},
		{"invalid", "invalid", "false", service.Check{Policies: []string{"one"}, Subject: check.Subject, Cost: 2}},
	} {
		_, err := s.Check(ctx, step.check)
		if (err != nil) != (step.result == "invalid") {
			t.Fatalf("%s: Check: %v", step.name, err)
		}
		decide, stores := lastDecision(t, rec)
		if decide.Parent().SpanID() != parent.SpanID() || decide.SpanContext().TraceID() != parent.TraceID() {
			t.Errorf("%s: parent %v; want the caller's %v", step.name, decide.Parent(), parent)
		}
		want := map[string]string{
			"admit.policies": "[" + strings.Join(quoted(step.check.Policies), ",") + "]", "admit.result": step.result,
			"admit.degraded": "false", "admit.replayed": step.replayed, "admit.backend": "memory", "admit.grouping": "together",
		}
		got := spanAttrs(decide)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %s; want %s", step.name, k, got[k], v)
			}
		}
		for k, v := range got {
			if strings.Contains(v, subject) || strings.Contains(v, check.RequestID) {
				t.Errorf("%s: attribute %s holds the subject or the request ID: %s", step.name, k, v)
			}
		}
		wantStores := 1
		if step.result == "invalid" {
			wantStores = 0 // found before any I/O
			if decide.Status().Code != codes.Error || decide.Status().Description != "invalid" {
				t.Errorf("invalid: status %+v; want an error, described invalid", decide.Status())
			}
		}
		if len(stores) != wantStores {
			t.Errorf("%s: %d store spans under the decision; want %d", step.name, len(stores), wantStores)
		}
	}

	// DecideItems separately: one store span per Item.
	lim := admit.Limit{Name: "rule", Algorithm: admit.FixedWindow, Rate: 5, Period: 60e9}
	items := []service.Item{{Limit: lim, Version: "v1", Subject: admit.Subject{ID: subject}, Cost: 1}, {Limit: lim, Version: "v1", Subject: admit.Subject{ID: "b"}, Cost: 1}}
	if err := s.DecideItems(ctx, items, make([]admit.Decision, 2), service.Separately); err != nil {
		t.Fatal(err)
	}
	decide, stores := lastDecision(t, rec)
	if got := spanAttrs(decide); got["admit.grouping"] != "separately" || got["admit.algorithms"] != `["fixed_window","fixed_window"]` || len(stores) != 2 {
		t.Errorf("DecideItems: %v, %d store spans; want separately, fixed windows, 2 store spans", got, len(stores))
	}
}

// quoted returns each of ss in double quotes, as an attribute's Emit shows a list.
func quoted(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = `"` + s + `"`
	}
	return out
}

// TestTraceUnavailableAndDegraded checks the spans over the stack admit serve builds on a Redis that
// cannot be reached: a policy that fails closed is unavailable, with the store span an error; one
// that fails open is degraded.
func TestTraceUnavailableAndDegraded(t *testing.T) {
	s := newFailOpenService(t, failOpenPolicies)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	s.Trace(service.Tracing{Tracer: tp.Tracer("test"), Backend: "redis"})
	if _, err := s.Check(t.Context(), service.Check{Policies: []string{"closed"}, Subject: admit.Subject{ID: "a"}, Cost: 1}); !errors.Is(err, admit.ErrUnavailable) {
		t.Fatalf("closed: %v; want admit.ErrUnavailable", err)
	}
	decide, stores := lastDecision(t, rec)
	if got := spanAttrs(decide); got["admit.result"] != "unavailable" || got["admit.backend"] != "redis" || decide.Status().Code != codes.Error {
		t.Errorf("closed: %v, status %+v; want unavailable on redis, an error", got, decide.Status())
	}
	if len(stores) != 1 || stores[0].Status().Code != codes.Error || stores[0].SpanKind() != trace.SpanKindClient {
		t.Errorf("closed: store spans %v; want one client span, an error", stores)
	}
	if _, err := s.Check(t.Context(), service.Check{Policies: []string{"open"}, Subject: admit.Subject{ID: "a"}, Cost: 1}); err != nil {
		t.Fatal(err)
	}
	decide, _ = lastDecision(t, rec)
	if got := spanAttrs(decide); got["admit.result"] != "allowed" || got["admit.degraded"] != "true" {
		t.Errorf("open: %v; want allowed, degraded", got)
	}
	if slices.ContainsFunc(decide.Attributes(), func(kv attribute.KeyValue) bool { return strings.Contains(kv.Value.Emit(), "rl:") }) {
		t.Errorf("open: a key among the attributes %v", decide.Attributes())
	}
}

// TestTracingOffAllocates checks that with tracing off a Check allocates exactly what its work
// does without any tracing: the same Requests made (admit.Requests) and decided on the same Store
// (TakeAll, through the interface), their Decisions; and that tracing on allocates more, so the count is sensitive to it.
func TestTracingOffAllocates(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	t.Cleanup(func() { mem.Close() })
	s := newService(t, mem, tracePolicies)
	ctx := context.Background()
	c := service.Check{Policies: []string{"roomy"}, Subject: admit.Subject{ID: "alice"}, Cost: 1}
	off := testing.AllocsPerRun(200, func() {
		if res, err := s.Check(ctx, c); err != nil || !res.Allowed {
			t.Fatalf("Check: %+v, %v", res, err)
		}
	})
	p, _ := s.Config().Policy("roomy")
	keys, err := admit.NewKeyBuilder([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	var store admit.Store = mem // as the Service holds it
	n := len(c.Policies)        // the Check's: the slices' lengths are not constants
	bare := testing.AllocsPerRun(200, func() {
		rs := make([]admit.Request, n)
		rs[0].Limit = p.Limit
		version := [1]string{p.Version}
		if err := admit.Requests(rs, keys, version[:], c.Subject, 1, ""); err != nil {
			t.Fatal(err)
		}
		ds := make([]admit.Decision, n)
		if ok, err := store.TakeAll(ctx, rs, ds); err != nil || !ok {
			t.Fatalf("TakeAll: %v, %v", ok, err)
		}
	})
	// Under the race detector sync.Pool drops what it is given at random, and the KeyBuilder's
	// digesters are made anew: the counts then vary by the digesters a decision takes from the pool.
	if slack := raceSlack(); off > bare+slack || (slack == 0 && off != bare) {
		t.Errorf("a Check with tracing off: %v allocations; the same decision without the Service: %v (race detector's slack %v)", off, bare, slack)
	}
	on, _ := traced(t, mem, tracePolicies, "memory")
	traced := testing.AllocsPerRun(200, func() {
		if _, err := on.Check(ctx, c); err != nil {
			t.Fatal(err)
		}
	})
	if traced <= off {
		t.Errorf("a Check with tracing on: %v allocations, off: %v; want more on", traced, off)
	}
	t.Logf("allocations per Check: tracing off %v, bare decision %v, tracing on %v", off, bare, traced)
}
