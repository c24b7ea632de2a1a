package service_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/service"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// benchPolicies are the policies of BenchmarkCheck: one that admits every request of the run, one
// that admits one request per subject a day.
const benchPolicies = `
policies:
  - name: roomy
    algorithm: fixed_window
    limit: 1000000000
    window: 24h
  - name: tight
    algorithm: fixed_window
    limit: 1
    window: 24h
`

// BenchmarkCheck measures Service.Check on a memstore, per check of one unit of 4,096 subjects
// in turn: result=allowed under a policy that admits them all, result=limited under one that
// refuses them all (each subject's one unit spent before the run).
func BenchmarkCheck(b *testing.B) {
	mem := memstore.New(memstore.Options{})
	defer mem.Close()
	keys, err := admit.NewKeyBuilder([]byte(testSecret))
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := policy.Parse("bench.yaml", []byte(benchPolicies))
	if err != nil {
		b.Fatal(err)
	}
	s, err := service.New(mem, keys, cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	subjects := make([]admit.Subject, 4096)
	for i := range subjects {
		subjects[i] = admit.Subject{ID: fmt.Sprintf("subject-%d", i)}
		if _, err := s.Check(ctx, service.Check{Policies: []string{"tight"}, Subject: subjects[i], Cost: 1}); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		result  string
		policy  string
		allowed bool
	}{{"allowed", "roomy", true}, {"limited", "tight", false}} {
		b.Run("result="+bc.result, func(b *testing.B) {
			c := service.Check{Policies: []string{bc.policy}, Cost: 1}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				c.Subject = subjects[i%len(subjects)]
				res, err := s.Check(ctx, c)
				if err != nil || res.Allowed != bc.allowed {
					b.Fatalf("Check: %+v, %v; want allowed %v", res, err, bc.allowed)
				}
				i++
			}
		})
	}
}

// BenchmarkTracing measures Service.Check, one unit of 4,096 subjects in turn under a policy
// that admits them all, on a memstore and on a real redis-server (internal/redistest):
// tracing=off (no Trace: the decision path of every Service with tracing off),
// tracing=sampled (every decision's span and its store span recorded and batched to an exporter
// that drops them) and tracing=unsampled (spans started by a sampler that samples none).
func BenchmarkTracing(b *testing.B) {
	for _, backend := range []string{"memory", "redis"} {
		for _, bc := range []struct {
			name    string
			sampler sdktrace.Sampler // nil: tracing off
		}{{"off", nil}, {"sampled", sdktrace.AlwaysSample()}, {"unsampled", sdktrace.NeverSample()}} {
			b.Run("backend="+backend+"/tracing="+bc.name, func(b *testing.B) {
				benchTracing(b, backend, bc.sampler)
			})
		}
	}
}

// benchTracing is a run of BenchmarkTracing on backend, traced with sampler (nil: off).
func benchTracing(b *testing.B, backend string, sampler sdktrace.Sampler) {
	var store admit.Store
	if backend == "redis" {
		rs, err := redisstore.New(redisstore.Config{URL: redistest.Start(b).URL()})
		if err != nil {
			b.Fatal(err)
		}
		defer rs.Close()
		store = rs
	} else {
		mem := memstore.New(memstore.Options{})
		defer mem.Close()
		store = mem
	}
	keys, err := admit.NewKeyBuilder([]byte(testSecret))
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := policy.Parse("bench.yaml", []byte(benchPolicies))
	if err != nil {
		b.Fatal(err)
	}
	s, err := service.New(store, keys, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if sampler != nil {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		defer tp.Shutdown(context.Background())
		s.Trace(service.Tracing{Tracer: tp.Tracer("bench"), Backend: backend})
	}
	subjects := make([]admit.Subject, 4096)
	for i := range subjects {
		subjects[i] = admit.Subject{ID: fmt.Sprintf("subject-%d", i)}
	}
	ctx := context.Background()
	c := service.Check{Policies: []string{"roomy"}, Cost: 1}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c.Subject = subjects[i%len(subjects)]
		if res, err := s.Check(ctx, c); err != nil || !res.Allowed {
			b.Fatalf("Check: %+v, %v", res, err)
		}
		i++
	}
}
