package tracing_test

import (
	"context"
	"fmt"
	"net/http"

	"github.com/admit-dev/admit/internal/tracing"
)

// Tracing is off without OTEL_TRACES_EXPORTER=otlp or an OTLP endpoint, and with
// OTEL_TRACES_EXPORTER=none: FromEnv returns nil, whose HTTP returns the handler itself.
func ExampleFromEnv() {
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_TRACES_EXPORTER": "none"} // none wins over an endpoint
	t, err := tracing.FromEnv(context.Background(), func(name string) string { return env[name] }, "v1.0.0")
	fmt.Println(t == nil, err)
	h := http.NotFoundHandler()
	fmt.Println(fmt.Sprint(t.HTTP(h)) == fmt.Sprint(h), len(t.GRPC()))

	env["OTEL_TRACES_EXPORTER"] = "zipkin"
	_, err = tracing.FromEnv(context.Background(), func(name string) string { return env[name] }, "v1.0.0")
	fmt.Println(err)
	// Output:
	// true <nil>
	// true 0
	// OTEL_TRACES_EXPORTER "zipkin": want otlp (OTLP over gRPC) or none
}
