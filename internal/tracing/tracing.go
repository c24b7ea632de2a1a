// Package tracing is the OpenTelemetry tracing of `admit serve` and `admit proxy`: the tracer
// provider that the standard OTel environment configures, exporting over OTLP/gRPC, and the W3C
// trace context taken from incoming HTTP requests and gRPC metadata.
//
// Tracing is on with OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) and no exporter named ([FromEnv]); off, [FromEnv] returns nil,
// and a nil *Tracing's methods add nothing to a handler or a server (docs/operations.md#traces).
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// InstrumentationName is the name of the tracer of admit's spans (the OTLP instrumentation scope).
const InstrumentationName = "github.com/admit-dev/admit"

// A Tracing is tracing turned on: a tracer provider exporting over OTLP/gRPC and the W3C trace
// context propagator. A nil *Tracing is tracing turned off.
type Tracing struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	prop     propagation.TraceContext
}

// FromEnv returns the Tracing that the environment getenv reads (os.Getenv in production) asks
// for, or nil when tracing is off. It is on when OTEL_TRACES_EXPORTER is "otlp", or when it is
// unset and OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; off when
// OTEL_TRACES_EXPORTER is "none" or OTEL_SDK_DISABLED is "true", whatever else is set. On, the exporter reads the OTEL_EXPORTER_OTLP_* variables (the
// endpoint, headers, TLS, timeout), the SDK OTEL_TRACES_SAMPLER (default parentbased_always_on)
// and OTEL_BSP_*, and the resource OTEL_SERVICE_NAME (default "admit") and
// OTEL_RESOURCE_ATTRIBUTES. An error names the variable that is wrong: an exporter other than
// otlp or none, a protocol other than grpc, an unknown sampler or a bad ratio.
func FromEnv(ctx context.Context, getenv func(string) string, version string) (*Tracing, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	switch exporter := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exporter {
	case "":
		if strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) == "" && strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) == "" {
			return nil, nil
		}
	case "none":
		return nil, nil
	case "otlp":
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER %q: want otlp (OTLP over gRPC) or none", exporter)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := strings.TrimSpace(getenv(name)); p != "" {
			if p != "grpc" {
				return nil, fmt.Errorf("%s %q: admit exports traces over grpc only", name, p)
			}
			break // the signal's own variable wins
		}
	}
	if err := checkSampler(getenv("OTEL_TRACES_SAMPLER"), getenv("OTEL_TRACES_SAMPLER_ARG")); err != nil {
		return nil, err
	}
	exporter, err := otlptracegrpc.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("the OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "admit"), attribute.String("service.version", version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil {
		exporter.Shutdown(ctx)
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	return &Tracing{
		provider: provider,
		tracer:   provider.Tracer(InstrumentationName, trace.WithInstrumentationVersion(version)),
	}, nil
}

// checkSampler reports what is wrong with OTEL_TRACES_SAMPLER's value name and
// OTEL_TRACES_SAMPLER_ARG's arg, which the SDK would only log.
func checkSampler(name, arg string) error {
	name, arg = strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(arg)
	switch name {
	case "", "always_on", "always_off", "parentbased_always_on", "parentbased_always_off":
		return nil
	case "traceidratio", "parentbased_traceidratio":
		if arg == "" {
			return nil
		}
		if r, err := strconv.ParseFloat(arg, 64); err != nil || r < 0 || r > 1 {
			return fmt.Errorf("OTEL_TRACES_SAMPLER_ARG %q: want a ratio from 0 to 1", arg)
		}
		return nil
	}
	return fmt.Errorf("OTEL_TRACES_SAMPLER %q: want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", name)
}

// Tracer returns the tracer of admit's spans.
func (t *Tracing) Tracer() trace.Tracer { return t.tracer }

// Shutdown exports the spans not yet exported and stops the exporter, within ctx. A nil
// Tracing has nothing to do.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// HTTP returns h, whose requests' contexts carry the span context of their W3C traceparent (and
// tracestate) header fields when they have one: the parent of the decisions they make. Off (t
// nil), it returns h itself.
func (t *Tracing) HTTP(h http.Handler) http.Handler {
	if t == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Traceparent") == "" {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r.WithContext(t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))))
	})
}

// GRPC returns the gRPC server options whose unary calls' contexts carry the span context of
// their traceparent (and tracestate) metadata when they have one. Off (t nil), it returns none.
func (t *Tracing) GRPC() []grpc.ServerOption {
	if t == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get("traceparent")) > 0 {
			ctx = t.prop.Extract(ctx, carrier(md))
		}
		return handler(ctx, req)
	})}
}

// A carrier is incoming gRPC metadata as a propagation.TextMapCarrier.
type carrier metadata.MD

// Get returns the first value of key.
func (c carrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set sets key to value.
func (c carrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

// Keys returns the keys of the metadata.
func (c carrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
