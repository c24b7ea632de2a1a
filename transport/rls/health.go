package rls

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// HealthServices are the service names the health service of [NewGRPCServer] answers for: the
// server as a whole (""), "ratelimit" (envoyproxy/ratelimit's name, which its manifests probe)
// and the rate limit service's full name. All three share one status.
var HealthServices = []string{"", "ratelimit", rlsv3.RateLimitService_ServiceDesc.ServiceName}

// DefaultHealthInterval is how often [Health.Run] asks the backend, unless told otherwise.
const DefaultHealthInterval = time.Second

// Health is the health of the rate limit service, as gRPC's grpc.health.v1 (Check, Watch, List
// of [HealthServices], or of the names given to [NewHealthOf]) and envoyproxy/ratelimit's HTTP
// GET /healthcheck (ServeHTTP: 200 "OK" while SERVING, else 500) report it. It is SERVING from the start; [Health.Run] makes it
// NOT_SERVING while the backend cannot decide, and [Health.Shutdown] for good. A Watch stream
// sees every change, and ends with UNAVAILABLE after Shutdown, once it has sent NOT_SERVING, so
// that watchers never hold up a graceful stop. It is safe for concurrent use; the zero value is
// not usable: make one with [NewHealth] or [NewHealthOf].
type Health struct {
	healthpb.UnimplementedHealthServer
	services []string
	mu       sync.Mutex
	serving  bool
	down     bool          // Shutdown was called
	changed  chan struct{} // closed, and replaced, at each change
}

var _ healthpb.HealthServer = (*Health)(nil)

// NewHealth returns a Health of [HealthServices] that is SERVING.
func NewHealth() *Health { return NewHealthOf(HealthServices...) }

// NewHealthOf returns a Health of the service names services, all of one status, that is
// SERVING: for another gRPC service's listener (admit serve's RLQS listener answers "" and the
// Rate Limit Quota Service's full name).
func NewHealthOf(services ...string) *Health {
	return &Health{services: slices.Clone(services), serving: true, changed: make(chan struct{})}
}

// state returns the status, whether Shutdown was called, and the channel closed at the next change.
func (h *Health) state() (healthpb.HealthCheckResponse_ServingStatus, bool, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if h.serving && !h.down {
		st = healthpb.HealthCheckResponse_SERVING
	}
	return st, h.down, h.changed
}

// Serving reports whether h is SERVING.
func (h *Health) Serving() bool {
	st, _, _ := h.state()
	return st == healthpb.HealthCheckResponse_SERVING
}

// SetServing makes h SERVING (true) or NOT_SERVING; after Shutdown it stays NOT_SERVING.
func (h *Health) SetServing(serving bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.serving != serving {
		h.serving = serving
		close(h.changed)
		h.changed = make(chan struct{})
	}
}

// Shutdown makes h NOT_SERVING for good, before a graceful stop drains the calls in flight, and
// ends the Watch streams once they have sent it.
func (h *Health) Shutdown() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.down {
		h.down = true
		close(h.changed)
		h.changed = make(chan struct{})
	}
}

// Run asks check every interval (DefaultHealthInterval if 0 or less), each time for at most the
// interval or 2 s, whichever is longer, until ctx is done: h is SERVING while check returns nil,
// NOT_SERVING while it fails. admit serve's check is that of GET /readyz, a peek of the backend.
func (h *Health) Run(ctx context.Context, check func(context.Context) error, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultHealthInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, max(interval, 2*time.Second))
		err := check(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		h.SetServing(err == nil)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// known reports whether service is one of h's services.
func (h *Health) known(service string) bool { return slices.Contains(h.services, service) }

// Check answers the status of one of h's services, NOT_FOUND for any other.
func (h *Health) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if !h.known(req.GetService()) {
		return nil, status.Errorf(codes.NotFound, "unknown service %q", req.GetService())
	}
	st, _, _ := h.state()
	return &healthpb.HealthCheckResponse{Status: st}, nil
}

// List answers the status of each of h's services.
func (h *Health) List(_ context.Context, _ *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	st, _, _ := h.state()
	resp := &healthpb.HealthListResponse{Statuses: make(map[string]*healthpb.HealthCheckResponse, len(h.services))}
	for _, s := range h.services {
		resp.Statuses[s] = &healthpb.HealthCheckResponse{Status: st}
	}
	return resp, nil
}

// Watch sends the status of the service at once and at every change: SERVICE_UNKNOWN, once, for
// a service not among h's. After Shutdown it sends NOT_SERVING and ends with UNAVAILABLE.
func (h *Health) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	ctx := stream.Context()
	var last healthpb.HealthCheckResponse_ServingStatus = -1
	for {
		st, down, changed := h.state()
		if !h.known(req.GetService()) {
			st = healthpb.HealthCheckResponse_SERVICE_UNKNOWN
		}
		if st != last {
			if err := stream.Send(&healthpb.HealthCheckResponse{Status: st}); err != nil {
				return err
			}
			last = st
		}
		if down {
			return status.Error(codes.Unavailable, "admit: shutting down")
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-changed:
		}
	}
}

// ServeHTTP answers envoyproxy/ratelimit's GET /healthcheck: 200 "OK" while h is SERVING, else
// 500 "NOT_SERVING".
func (h *Health) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if !h.Serving() {
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte("NOT_SERVING"))
		return
	}
	w.Write([]byte("OK"))
}
