package httpproxy

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/admit-dev/admit/httplimit"
	"github.com/admit-dev/admit/internal/healthz"
)

// ReadyTimeout bounds how long GET /readyz of the handler of [NewOps] waits for OpsOptions.Ready.
const ReadyTimeout = time.Second

// OpsOptions configure the handler of a proxy's own endpoints; see [NewOps].
type OpsOptions struct {
	// Ready, if not nil, is called by GET /readyz with a context that ends after ReadyTimeout:
	// nil means the backend can decide. Nil means /readyz answers as /healthz does.
	Ready func(ctx context.Context) error
	// Metrics, if not nil, serves GET /metrics; nil answers it 404.
	Metrics http.Handler
	// Logger receives a record for each /readyz answered 503. Nil means slog.Default().
	Logger *slog.Logger
	// Version, if not empty, follows "ok" in the body of GET /healthz: "ok v1.2.0\n". It must be
	// printable ASCII without spaces (NewOps panics otherwise). Empty means "ok\n".
	Version string
}

// NewOps returns the handler of a proxy's own endpoints, for a listener of their own: never the
// proxied one, where every path belongs to the upstream (a Proxy answers none of them itself).
// It is safe for concurrent use. Its routes (GET also answers HEAD; any other method is answered
// 405 with an Allow field; any other path 404):
//
//	GET /healthz  200 "ok\n" (or "ok VERSION\n") while the process is alive; it never calls the
//	              backend.
//	GET /readyz   200 "ok\n" when OpsOptions.Ready reports the backend can decide, within
//	              ReadyTimeout; else 503 "not ready\n".
//	GET /metrics  OpsOptions.Metrics, when set.
func NewOps(o OpsOptions) http.Handler {
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	health, err := healthz.Body(o.Version)
	if err != nil {
		panic("httpproxy: NewOps: " + err.Error())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { plain.Write(w, http.StatusOK, health) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if o.Ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), ReadyTimeout)
			defer cancel()
			if err := o.Ready(ctx); err != nil {
				logger.Warn("not ready", "error", err)
				plain.Write(w, http.StatusServiceUnavailable, "not ready\n")
				return
			}
		}
		okText(w, r)
	})
	if o.Metrics != nil {
		mux.Handle("GET /metrics", o.Metrics)
	}
	return mux
}

// plain writes the plain-text answers of the proxy's own endpoints.
var plain = httplimit.NewAnswers(0, true)

// okText answers 200 "ok\n", not to be cached.
func okText(w http.ResponseWriter, _ *http.Request) {
	plain.Write(w, http.StatusOK, "ok\n")
}
