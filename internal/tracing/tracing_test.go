package tracing_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/admit-dev/admit/internal/tracing"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// envOf returns a getenv of kv ("NAME=value" each).
func envOf(kv ...string) func(string) string {
	m := make(map[string]string)
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		m[k] = v
	}
	return func(name string) string { return m[name] }
}

// on returns a Tracing turned on, exporting to a closed port (nothing is exported by the tests).
func on(t *testing.T, kv ...string) *tracing.Tracing {
	t.Helper()
	tr, err := tracing.FromEnv(t.Context(), envOf(append([]string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:1"}, kv...)...), "test")
	if err != nil || tr == nil {
		t.Fatalf("FromEnv: %v, %v; want tracing on", tr, err)
	}
	t.Cleanup(func() { tr.Shutdown(context.Background()) })
	return tr
}

// TestFromEnvOnOff checks which environments turn tracing on: OTEL_TRACES_EXPORTER=otlp, or an
// OTLP endpoint with no exporter named; never none, nor OTEL_SDK_DISABLED=true.
func TestFromEnvOnOff(t *testing.T) {
	for _, env := range [][]string{
		nil,
		{"OTEL_TRACES_EXPORTER=none"},
		{"OTEL_SERVICE_NAME=x", "OTEL_EXPORTER_OTLP_HEADERS=a=b"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT= "},
		{"OTEL_TRACES_EXPORTER=none", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1"},
		{"OTEL_TRACES_EXPORTER=none", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:1"},
		{"OTEL_SDK_DISABLED=true", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1"},
		{"OTEL_SDK_DISABLED=TRUE", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:1"},
		{"OTEL_TRACES_EXPORTER=otlp", "OTEL_SDK_DISABLED=true"},
	} {
		if tr, err := tracing.FromEnv(t.Context(), envOf(env...), "test"); tr != nil || err != nil {
			t.Errorf("%q: %v, %v; want off", env, tr, err)
		}
	}
	for _, env := range [][]string{
		{"OTEL_TRACES_EXPORTER=otlp", "OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG=0.25", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:1", "OTEL_SERVICE_NAME=x"},
		{"OTEL_TRACES_EXPORTER= otlp ", "OTEL_SDK_DISABLED=false", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1"},
	} {
		tr, err := tracing.FromEnv(t.Context(), envOf(env...), "test")
		if err != nil || tr == nil || tr.Tracer() == nil {
			t.Errorf("%q: %v, %v; want on", env, tr, err)
			continue
		}
		tr.Shutdown(context.Background())
	}
	// On by an endpoint, the other variables are checked as with otlp.
	env := envOf("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf")
	if tr, err := tracing.FromEnv(t.Context(), env, "test"); tr != nil || err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL") {
		t.Errorf("an endpoint and protocol http/protobuf: %v, %v; want an error naming OTEL_EXPORTER_OTLP_PROTOCOL", tr, err)
	}
}

// TestFromEnvBadInput checks that each wrong variable is an error that names it.
func TestFromEnvBadInput(t *testing.T) {
	for _, c := range []struct{ env, want string }{
		{"OTEL_TRACES_EXPORTER=zipkin", "OTEL_TRACES_EXPORTER"},
		{"OTEL_TRACES_EXPORTER=otlp,console", "OTEL_TRACES_EXPORTER"},
		{"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{"OTEL_TRACES_SAMPLER=sometimes", "OTEL_TRACES_SAMPLER"},
		{"OTEL_TRACES_SAMPLER=traceidratio OTEL_TRACES_SAMPLER_ARG=1.5", "OTEL_TRACES_SAMPLER_ARG"},
		{"OTEL_TRACES_SAMPLER=traceidratio OTEL_TRACES_SAMPLER_ARG=half", "OTEL_TRACES_SAMPLER_ARG"},
	} {
		env := append([]string{"OTEL_TRACES_EXPORTER=otlp"}, strings.Fields(c.env)...)
		tr, err := tracing.FromEnv(t.Context(), envOf(env...), "test")
		if err == nil || tr != nil || !strings.HasPrefix(err.Error(), c.want+" ") {
			t.Errorf("%s: %v, %v; want an error naming %s", c.env, tr, err, c.want)
		}
	}
	// The traces' own protocol wins over the general one.
	on(t, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf")
}

// parent is the span context of the traceparent the tests send.
const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// TestHTTP checks that a request's traceparent becomes the remote span context of its context.
func TestHTTP(t *testing.T) {
	got := make(chan trace.SpanContext, 2)
	h := on(t).HTTP(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got <- trace.SpanContextFromContext(r.Context())
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, tp := range []string{parent, ""} {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		if tp != "" {
			req.Header.Set("traceparent", tp)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		sc := <-got
		switch {
		case tp != "" && (sc.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || sc.SpanID().String() != "b7ad6b7169203331" || !sc.IsRemote() || !sc.IsSampled()):
			t.Errorf("with a traceparent: %+v", sc)
		case tp == "" && sc.IsValid():
			t.Errorf("without a traceparent: %+v; want none", sc)
		}
	}
}

// TestGRPC checks that a unary call's traceparent metadata becomes the remote span context of its
// context, on a real gRPC server.
func TestGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(on(t).GRPC()...)
	g.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Span",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Of", Handler: func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, _ any) (any, error) {
				return wrapperspb.String(trace.SpanContextFromContext(ctx).TraceID().String()), nil
			}
			return icpt(ctx, in, &grpc.UnaryServerInfo{FullMethod: "/test.Span/Of"}, h)
		}}},
	}, struct{}{})
	go g.Serve(ln)
	defer g.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for tp, want := range map[string]string{parent: "0af7651916cd43dd8448eb211c80319c", "": "00000000000000000000000000000000"} {
		ctx := t.Context()
		if tp != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", tp)
		}
		out := new(wrapperspb.StringValue)
		if err := conn.Invoke(ctx, "/test.Span/Of", &emptypb.Empty{}, out); err != nil {
			t.Fatal(err)
		}
		if out.GetValue() != want {
			t.Errorf("traceparent %q: trace %s; want %s", tp, out.GetValue(), want)
		}
	}
}
