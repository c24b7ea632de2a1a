package httpapi_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/httpapi"
)

// benchCheckConfig is the configuration of BenchmarkCheckHandler: a policy that admits every
// request of the run.
const benchCheckConfig = "policies:\n  - name: roomy\n    algorithm: fixed_window\n    limit: 1000000000\n    window: 24h\n"

// BenchmarkCheckHandler measures the Handler's POST /v1/check in process, without a socket, on a
// memstore: the JSON body decoded, the Service's check, the fields and the JSON answer written,
// per request of 4,096 subjects in turn under a policy that admits them all. The request and the
// writer are reused, so what it counts is the handler's own work.
func BenchmarkCheckHandler(b *testing.B) {
	mem := memstore.New(memstore.Options{})
	defer mem.Close()
	keys, err := admit.NewKeyBuilder(testSecret)
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := policy.Parse("bench.yaml", []byte(benchCheckConfig))
	if err != nil {
		b.Fatal(err)
	}
	svc, err := service.New(mem, keys, cfg)
	if err != nil {
		b.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{Demo: cfg, Service: svc})
	if err != nil {
		b.Fatal(err)
	}
	bodies := make([][]byte, 4096)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, `{"policy":"roomy","key":"subject-%d"}`, i)
	}
	body := &benchBody{}
	req := httptest.NewRequest(http.MethodPost, "/v1/check", body)
	req.Header.Set("Content-Type", "application/json")
	w := &benchWriter{header: http.Header{}}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		body.Reset(bodies[i%len(bodies)])
		req.Body = body
		clear(w.header)
		w.status = 0
		h.ServeHTTP(w, req)
		if w.status != http.StatusOK {
			b.Fatalf("POST /v1/check: status %d; want 200", w.status)
		}
		i++
	}
}

// A benchBody is a request body that can be read again after Reset.
type benchBody struct{ bytes.Reader }

// Close does nothing: the body is reused.
func (*benchBody) Close() error { return nil }

// A benchWriter is an http.ResponseWriter that keeps the status and drops the body.
type benchWriter struct {
	header http.Header
	status int
}

func (w *benchWriter) Header() http.Header { return w.header }

func (w *benchWriter) WriteHeader(status int) { w.status = status }

func (w *benchWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return len(p), nil
}
