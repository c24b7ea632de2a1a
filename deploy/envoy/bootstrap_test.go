package envoy_test

import (
	"fmt"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpoptionsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

const (
	rateLimitFilter = "envoy.filters.http.ratelimit"
	routerFilter    = "envoy.filters.http.router"
	hcmFilter       = "envoy.filters.network.http_connection_manager"
	http2Options    = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
)

// decodeBootstrap decodes a bootstrap of one YAML document strictly and validates it, with every
// message an Any holds, at any depth.
func decodeBootstrap(data []byte) (*bootstrapv3.Bootstrap, error) {
	docs, err := yamlDocuments(data)
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 {
		return nil, fmt.Errorf("%d YAML documents, want 1", len(docs))
	}
	b := &bootstrapv3.Bootstrap{}
	if err := decodeStrict(docs[0], b); err != nil {
		return nil, err
	}
	return b, validateAnys(b.ProtoReflect())
}

// validateAnys validates the message inside every Any of m: a message's generated validation
// checks an Any's type URL, never its contents.
func validateAnys(m protoreflect.Message) error {
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Message() == nil:
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, e protoreflect.Value) bool {
					err = validateMessage(e.Message())
					return err == nil
				})
			}
		case fd.IsList():
			for i := 0; i < v.List().Len() && err == nil; i++ {
				err = validateMessage(v.List().Get(i).Message())
			}
		default:
			err = validateMessage(v.Message())
		}
		return err == nil
	})
	return err
}

func validateMessage(m protoreflect.Message) error {
	a, ok := m.Interface().(*anypb.Any)
	if !ok {
		return validateAnys(m)
	}
	inner, err := a.UnmarshalNew()
	if err != nil {
		return fmt.Errorf("%s: %w", a.TypeUrl, err)
	}
	v, ok := inner.(validator)
	if !ok {
		return fmt.Errorf("%s has no generated validation", a.TypeUrl)
	}
	if err := v.ValidateAll(); err != nil {
		return fmt.Errorf("%s: %w", a.TypeUrl, err)
	}
	return validateAnys(inner.ProtoReflect())
}

// unpack returns the message of a, which the test decoded already.
func unpack[M proto.Message](t *testing.T, a *anypb.Any, m M) M {
	t.Helper()
	if err := a.UnmarshalTo(m); err != nil {
		t.Fatalf("%s: %v", a.GetTypeUrl(), err)
	}
	return m
}

// edge is what a test needs of a shipped Envoy configuration: the rate limit filter and the
// rate_limits of the routes it limits.
type edge struct {
	filter     *ratelimitfilterv3.RateLimit
	rateLimits []*routev3.RateLimit
}

// bootstrapEdge returns the rate limit filter and the route rate_limits of the bootstrap b, and
// checks how they are wired: the filter before the router, its cluster one of b's, on HTTP/2.
func bootstrapEdge(t *testing.T, b *bootstrapv3.Bootstrap) edge {
	t.Helper()
	var e edge
	clusters := map[string]*clusterv3.Cluster{}
	for _, c := range b.GetStaticResources().GetClusters() {
		clusters[c.GetName()] = c
	}
	for _, l := range b.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				if f.GetName() != hcmFilter {
					continue
				}
				hcm := unpack(t, f.GetTypedConfig(), &hcmv3.HttpConnectionManager{})
				e.filter = filterOf(t, hcm.GetHttpFilters())
				for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
					e.rateLimits = append(e.rateLimits, vh.GetRateLimits()...)
					for _, r := range vh.GetRoutes() {
						e.rateLimits = append(e.rateLimits, r.GetRoute().GetRateLimits()...)
					}
				}
			}
		}
	}
	if e.filter == nil {
		t.Fatalf("no %s filter in any HTTP connection manager", rateLimitFilter)
	}
	name := e.filter.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName()
	c, ok := clusters[name]
	if !ok {
		t.Fatalf("the rate limit service's cluster %q is not one of the bootstrap's", name)
	}
	checkHTTP2(t, c)
	return e
}

// filterOf returns the rate limit filter of an HTTP filter chain, checked: before the router,
// which is last, and configured as admit needs it.
func filterOf(t *testing.T, filters []*hcmv3.HttpFilter) *ratelimitfilterv3.RateLimit {
	t.Helper()
	var rl *ratelimitfilterv3.RateLimit
	for i, f := range filters {
		switch f.GetName() {
		case rateLimitFilter:
			rl = unpack(t, f.GetTypedConfig(), &ratelimitfilterv3.RateLimit{})
		case routerFilter:
			if i != len(filters)-1 {
				t.Errorf("the router is filter %d of %d: it must be the last", i+1, len(filters))
			}
			if rl == nil {
				t.Errorf("the router comes before %s, which then never runs", rateLimitFilter)
			}
		}
	}
	if rl == nil {
		t.Fatalf("no %s among the HTTP filters", rateLimitFilter)
	}
	checkFilter(t, rl)
	return rl
}

// checkFilter checks the settings of the rate limit filter admit's docs require.
func checkFilter(t *testing.T, rl *ratelimitfilterv3.RateLimit) {
	t.Helper()
	if !rl.GetFailureModeDeny() {
		t.Error("failure_mode_deny is not true: Envoy would let requests through when admit cannot decide")
	}
	if v := rl.GetRateLimitService().GetTransportApiVersion(); v != corev3.ApiVersion_V3 {
		t.Errorf("transport_api_version %v, want V3", v)
	}
	if rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName() == "" {
		t.Error("the rate limit service is not an envoy_grpc cluster")
	}
}

// checkHTTP2 checks that c speaks HTTP/2 to its hosts, as gRPC needs.
func checkHTTP2(t *testing.T, c *clusterv3.Cluster) {
	t.Helper()
	a, ok := c.GetTypedExtensionProtocolOptions()[http2Options]
	if !ok {
		t.Fatalf("cluster %s has no %s: Envoy would speak HTTP/1.1 to a gRPC server", c.GetName(), http2Options)
	}
	o := unpack(t, a, &httpoptionsv3.HttpProtocolOptions{})
	if o.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
		t.Fatalf("cluster %s: explicit_http_config has no http2_protocol_options", c.GetName())
	}
}

// TestBootstrapDecodesStrictly decodes envoy.yaml into Envoy's Bootstrap, every Any resolved and
// every message validated, and checks the rate limit filter's wiring.
func TestBootstrapDecodesStrictly(t *testing.T) {
	b, err := decodeBootstrap(readFile(t, "envoy.yaml"))
	if err != nil {
		t.Fatalf("envoy.yaml: %v", err)
	}
	e := bootstrapEdge(t, b)
	if len(e.rateLimits) == 0 {
		t.Fatal("no rate_limits on any route or virtual host: the filter would send nothing")
	}
}

// TestBrokenBootstrapFails shows the decoding can fail: each edit of envoy.yaml breaks one rule.
func TestBrokenBootstrapFails(t *testing.T) {
	good := string(readFile(t, "envoy.yaml"))
	for _, c := range []struct{ name, old, new string }{
		{"unknown field in the filter's typed config", "failure_mode_deny: true", "failure_mode_deny: true\n                      failure_mode_denny: true"},
		{"unknown field at the top", "static_resources:", "static_resource:"},
		{"wrong type", "port_value: 10000", "port_value: ten-thousand"},
		{"unregistered typed_config type", "ratelimit.v3.RateLimit\n", "ratelimit.v3.RateLimits\n"},
		{"invalid value (an empty domain)", "domain: edge", `domain: ""`},
		{"invalid value outside any Any (a cluster's zero connect_timeout)", "connect_timeout: 1s\n      lb_policy: ROUND_ROBIN\n      typed", "connect_timeout: 0s\n      lb_policy: ROUND_ROBIN\n      typed"},
		{"unknown rate limit action", "- actions:\n                                  - remote_address: {}", "- actions:\n                                  - remote_adress: {}"},
		{"two YAML documents", "admin:", "node: {id: a}\n---\nadmin:"},
		{"duplicate key", "stat_prefix: ingress", "stat_prefix: ingress\n                stat_prefix: again"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if strings.Count(good, c.old) != 1 {
				t.Fatalf("envoy.yaml holds %q %d times, want once: update the test", c.old, strings.Count(good, c.old))
			}
			_, err := decodeBootstrap([]byte(strings.Replace(good, c.old, c.new, 1)))
			if err == nil {
				t.Fatal("the broken copy decoded")
			}
			t.Log(err)
		})
	}
}

// unpackFilter returns the rate limit filter's configuration of f, which decodeValue resolved.
func unpackFilter(f *hcmv3.HttpFilter) *ratelimitfilterv3.RateLimit {
	rl := &ratelimitfilterv3.RateLimit{}
	if err := f.GetTypedConfig().UnmarshalTo(rl); err != nil {
		return nil
	}
	return rl
}
