package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/httplimit"
	"github.com/admit-dev/admit/internal/callers"
)

// benchKeys are spread over many live buckets that the benchmarks never fill.
var benchKeys = func() []string {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "rl:bench:v1:{" + strconv.Itoa(i) + "}"
	}
	return keys
}()

var benchLimit = admit.Limit{Algorithm: admit.FixedWindow, Rate: admit.MaxRate, Period: time.Hour}

// BenchmarkMiddleware measures ServeHTTP of the middleware around a handler that does nothing, on a
// memstore-backed limiter: the cost of limiting one request in process.
func BenchmarkMiddleware(b *testing.B) {
	benchmarkMiddleware(b, benchLimit, benchKeys)
}

// BenchmarkMiddlewareLimited is BenchmarkMiddleware when every request is answered 429.
func BenchmarkMiddlewareLimited(b *testing.B) {
	full := benchLimit
	full.Rate = 1
	benchmarkMiddleware(b, full, benchKeys[:1])
}

func benchmarkMiddleware(b *testing.B, lim admit.Limit, keys []string) {
	m := &httplimit.Middleware{
		Limiter: admit.NewLimiter(newMemstore(b), lim),
		Key: func(r *http.Request) (string, error) {
			return keys[r.Context().Value(keyIndex{}).(int)%len(keys)], nil
		},
	}
	h := m.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	reqs := make([]*http.Request, len(keys))
	for i := range reqs {
		reqs[i] = httptest.NewRequest(http.MethodGet, "/", nil).WithContext(context.WithValue(context.Background(), keyIndex{}, i))
	}
	callers.Bench(b, func(i int) error {
		h.ServeHTTP(&discardWriter{h: http.Header{}}, reqs[i%len(reqs)])
		return nil
	})
}

// BenchmarkReferenceLimiter is the reference for BenchmarkMiddleware: the same limiter decisions
// without HTTP around them.
func BenchmarkReferenceLimiter(b *testing.B) {
	limiter := admit.NewLimiter(newMemstore(b), benchLimit)
	ctx := context.Background()
	callers.Bench(b, func(i int) error {
		_, err := limiter.Allow(ctx, benchKeys[i%len(benchKeys)])
		return err
	})
}

// keyIndex is the context key under which a benchmark request carries its key's index.
type keyIndex struct{}

// discardWriter is a ResponseWriter that keeps nothing but its header map, so the benchmark
// measures the middleware rather than a recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}
