package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/httplimit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/callers"
)

// benchSubjects spread requests over many live keys that the benchmarks never fill.
var benchSubjects = func() []admit.Subject {
	subjects := make([]admit.Subject, 1024)
	for i := range subjects {
		subjects[i] = admit.Subject{ID: "user-" + strconv.Itoa(i)}
	}
	return subjects
}()

var benchLimit = admit.Limit{Name: "bench", Algorithm: admit.FixedWindow, Rate: bound.MaxRate, Period: time.Hour}

// BenchmarkMiddleware measures ServeHTTP of the middleware around a handler that does nothing, on a
// memstore-backed limiter of one policy: the cost of limiting one request in process, its keying
// included.
func BenchmarkMiddleware(b *testing.B) {
	benchmarkMiddleware(b, []admit.Limit{benchLimit}, benchSubjects)
}

// BenchmarkMiddlewareTwoPolicies is BenchmarkMiddleware with a limiter of two policies, decided
// together.
func BenchmarkMiddlewareTwoPolicies(b *testing.B) {
	daily := benchLimit
	daily.Name, daily.Period = "bench-daily", 24*time.Hour
	benchmarkMiddleware(b, []admit.Limit{benchLimit, daily}, benchSubjects)
}

// BenchmarkMiddlewareLimited is BenchmarkMiddleware when every request is answered 429.
func BenchmarkMiddlewareLimited(b *testing.B) {
	full := benchLimit
	full.Rate = 1
	benchmarkMiddleware(b, []admit.Limit{full}, benchSubjects[:1])
}

func benchmarkMiddleware(b *testing.B, limits []admit.Limit, subjects []admit.Subject) {
	m := &httplimit.Middleware{Limiter: newLimiter(b, newMemstore(b), limits...), Subject: benchSubject(subjects)}
	h := m.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	reqs, writers := benchRequests(len(subjects)), newWriterPool()
	callers.Bench(b, func(i int) error {
		w := writers.Get().(*discardWriter)
		h.ServeHTTP(w, reqs[i%len(reqs)])
		writers.Put(w)
		return nil
	})
}

// BenchmarkReferenceLimiter is the reference for BenchmarkMiddleware: the same limiter decisions
// without HTTP around them. It pays what BenchmarkMiddleware's harness pays besides the
// middleware — a writer from the pool and the subject function, which a server and its user
// provide — so that the difference of the two is the middleware's cost alone.
func BenchmarkReferenceLimiter(b *testing.B) {
	limiter := newLimiter(b, newMemstore(b), benchLimit)
	subject := benchSubject(benchSubjects)
	reqs, writers := benchRequests(len(benchSubjects)), newWriterPool()
	callers.Bench(b, func(i int) error {
		w := writers.Get().(*discardWriter)
		r := reqs[i%len(reqs)]
		s, err := subject(r)
		if err == nil {
			_, err = limiter.Take(r.Context(), s, 1, "", nil)
		}
		writers.Put(w)
		return err
	})
}

// benchSubject returns the subject function of the benchmarks: the subject whose index the
// request carries, of subjects.
func benchSubject(subjects []admit.Subject) httplimit.SubjectFunc {
	return func(r *http.Request) (admit.Subject, error) {
		return subjects[r.Context().Value(subjectIndex{}).(int)%len(subjects)], nil
	}
}

// benchRequests returns n requests, the i-th carrying the subject index i.
func benchRequests(n int) []*http.Request {
	reqs := make([]*http.Request, n)
	for i := range reqs {
		reqs[i] = httptest.NewRequest(http.MethodGet, "/", nil).WithContext(context.WithValue(context.Background(), subjectIndex{}, i))
	}
	return reqs
}

// newWriterPool returns a pool of discardWriters.
func newWriterPool() *sync.Pool {
	return &sync.Pool{New: func() any { return &discardWriter{h: http.Header{}} }}
}

// subjectIndex is the context key under which a benchmark request carries its subject's index.
type subjectIndex struct{}

// discardWriter is a ResponseWriter that keeps nothing but its header map, so the benchmark
// measures the middleware rather than a recorder. The benchmarks reuse them: the ResponseWriter and
// the header map a server makes for each response are the server's cost, not the middleware's. The
// map keeps the fields of the writer's last response, which the middleware sets again (clearing it
// would cost the benchmark more than the middleware's two fields). Like net/http's writer, it is an
// io.StringWriter.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header               { return w.h }
func (w *discardWriter) Write(p []byte) (int, error)       { return len(p), nil }
func (w *discardWriter) WriteString(s string) (int, error) { return len(s), nil }
func (w *discardWriter) WriteHeader(int)                   {}
