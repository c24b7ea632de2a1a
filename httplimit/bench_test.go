package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/httplimit"
)

// BenchmarkMiddleware measures the cost ServeHTTP adds to a request on a memstore-backed limiter,
// with parallelism × GOMAXPROCS goroutines. "allowed" spreads requests over many keys that are
// never full; "limited" sends them all to one key that is.
func BenchmarkMiddleware(b *testing.B) {
	noop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, mode := range []string{"allowed", "limited"} {
		for _, par := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("%s/parallelism=%d", mode, par), func(b *testing.B) {
				lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: admit.MaxRate, Period: time.Hour}
				keys := make([]string, 1024)
				for i := range keys {
					keys[i] = "rl:bench:v1:{" + strconv.Itoa(i) + "}"
				}
				if mode == "limited" {
					lim.Rate = 1
					keys = keys[:1]
				}
				var next atomic.Uint64
				m := &httplimit.Middleware{
					Limiter: admit.NewLimiter(newMemstore(b), lim),
					Key: func(r *http.Request) (string, error) {
						return keys[next.Add(1)%uint64(len(keys))], nil
					},
				}
				h := m.Wrap(noop)
				b.SetParallelism(par)
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					r := httptest.NewRequest(http.MethodGet, "/", nil)
					w := &discardWriter{h: http.Header{}}
					for pb.Next() {
						clear(w.h)
						h.ServeHTTP(w, r)
					}
				})
			})
		}
	}
}

// discardWriter is a ResponseWriter that keeps nothing but its header map, so the benchmark
// measures the middleware rather than a recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}
