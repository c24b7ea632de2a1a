package rls

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// MaxJSONBody is the largest body of a POST /json, in bytes: a request of MaxMessageSize.
const MaxJSONBody = MaxMessageSize

// JSONHandler returns envoyproxy/ratelimit's POST /json, ShouldRateLimit for clients that speak
// no gRPC: the body is a RateLimitRequest in protobuf's JSON form (protojson: {"domain": "d",
// "descriptors": [{"entries": [{"key": "k", "value": "v"}]}]}), the answer the RateLimitResponse
// in that form, 200 when its overall_code is OK, 429 when OVER_LIMIT, as envoyproxy/ratelimit
// answers. A body that is no RateLimitRequest, or a request ShouldRateLimit refuses as invalid,
// is 400, as there; when admit cannot decide (UNAVAILABLE) it is 503, where envoyproxy/ratelimit
// says 400. Another method than POST is 405. Errors are plain text.
func JSONHandler(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST a RateLimitRequest as JSON", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxJSONBody))
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				http.Error(w, fmt.Sprintf("body over %d bytes", MaxJSONBody), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "cannot read the body", http.StatusBadRequest)
			return
		}
		var req rlsv3.RateLimitRequest
		if err := protojson.Unmarshal(body, &req); err != nil {
			http.Error(w, "not a RateLimitRequest in JSON: "+err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := s.ShouldRateLimit(r.Context(), &req)
		if err != nil {
			code := http.StatusBadRequest
			if status.Code(err) == codes.Unavailable {
				code = http.StatusServiceUnavailable
			}
			http.Error(w, status.Convert(err).Message(), code)
			return
		}
		out, err := protojson.Marshal(resp)
		if err != nil {
			http.Error(w, "cannot encode the response", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		w.Write(out)
	})
}
