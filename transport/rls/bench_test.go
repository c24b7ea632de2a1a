package rls_test

import (
	"context"
	"fmt"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// BenchmarkShouldRateLimit measures ShouldRateLimit called in process, without gRPC, on a memstore:
// the work of admit between the protobuf request and the Store, per request of 4,096 subjects in
// turn. one is a descriptor of edge_proxy_per_ip, two messaging's two descriptors, each decided on
// its own, and atomic the domain atomic's two descriptors of one slot, decided together.
func BenchmarkShouldRateLimit(b *testing.B) {
	s := newServer(b, memStore(b), testConfig(b))
	for _, bc := range []struct {
		name string
		req  func(n int) *rlsv3.RateLimitRequest
	}{
		{"one", func(n int) *rlsv3.RateLimitRequest {
			return &rlsv3.RateLimitRequest{Domain: "edge_proxy_per_ip", Descriptors: []*ratelimitv3.RateLimitDescriptor{
				desc("remote_address", fmt.Sprintf("10.0.%d.%d", n/256, n%256))}}
		}},
		{"two", func(n int) *rlsv3.RateLimitRequest {
			num := fmt.Sprintf("206%07d", n)
			return &rlsv3.RateLimitRequest{Domain: "messaging", Descriptors: []*ratelimitv3.RateLimitDescriptor{
				desc("message_type", "marketing", "to_number", num), desc("to_number", num)}}
		}},
		{"atomic", func(n int) *rlsv3.RateLimitRequest {
			c := fmt.Sprintf("client-%d", n)
			return &rlsv3.RateLimitRequest{Domain: "atomic", Descriptors: []*ratelimitv3.RateLimitDescriptor{
				desc("client", c), desc("client", c, "path", "/x")}}
		}},
	} {
		reqs := make([]*rlsv3.RateLimitRequest, 4096)
		for i := range reqs {
			reqs[i] = bc.req(i)
		}
		b.Run("descriptors="+bc.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := s.ShouldRateLimit(ctx, reqs[i%len(reqs)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
