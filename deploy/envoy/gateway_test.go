package envoy_test

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"go.yaml.in/yaml/v3"
)

// envoyPatchPolicy is the part of Envoy Gateway's gateway.envoyproxy.io/v1alpha1
// EnvoyPatchPolicy the shipped object uses, decoded with unknown fields refused.
type envoyPatchPolicy struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
	Spec struct {
		TargetRef struct {
			Group string `yaml:"group"`
			Kind  string `yaml:"kind"`
			Name  string `yaml:"name"`
		} `yaml:"targetRef"`
		Type        string `yaml:"type"`
		JSONPatches []struct {
			Type      string `yaml:"type"`
			Name      string `yaml:"name"`
			Operation struct {
				Op    string `yaml:"op"`
				Path  string `yaml:"path"`
				Value any    `yaml:"value"`
			} `yaml:"operation"`
		} `yaml:"jsonPatches"`
	} `yaml:"spec"`
}

const (
	clusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	listenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	routeType    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
)

var (
	// firstHTTPFilter is the path of the first HTTP filter of a listener's connection manager.
	firstHTTPFilter = regexp.MustCompile(`^/(default_filter_chain|filter_chains/[0-9]+)/filters/0/typed_config/http_filters/0$`)
	// vhostRateLimits is the path of a virtual host's rate_limits.
	vhostRateLimits = regexp.MustCompile(`^/virtual_hosts/[0-9]+/rate_limits$`)
)

// gatewayEdge decodes the EnvoyPatchPolicy of data strictly, and each patch's value into the
// Envoy type its resource type and path select, validated: a whole Cluster (add at ""), an
// HttpFilter (add at the first HTTP filter), a list of RateLimit (add at a virtual host's
// rate_limits). It checks that the filter's cluster is the one the policy adds, on HTTP/2.
func gatewayEdge(t *testing.T, data []byte) (edge, error) {
	t.Helper()
	var e edge
	var p envoyPatchPolicy
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		return e, err
	}
	if p.APIVersion != "gateway.envoyproxy.io/v1alpha1" || p.Kind != "EnvoyPatchPolicy" || p.Spec.Type != "JSONPatch" {
		return e, fmt.Errorf("%s %s of type %s, want a gateway.envoyproxy.io/v1alpha1 EnvoyPatchPolicy of type JSONPatch", p.APIVersion, p.Kind, p.Spec.Type)
	}
	clusters := map[string]*clusterv3.Cluster{}
	for i, jp := range p.Spec.JSONPatches {
		op := jp.Operation
		where := fmt.Sprintf("jsonPatches[%d] (%s %s at %q)", i, jp.Type, op.Op, op.Path)
		if op.Op != "add" {
			return e, fmt.Errorf("%s: only add is checked by this test", where)
		}
		var err error
		switch {
		case jp.Type == clusterType && op.Path == "":
			c := &clusterv3.Cluster{}
			if err = decodeValue(op.Value, c); err == nil {
				err = validateAnys(c.ProtoReflect())
			}
			if err == nil && c.GetName() != jp.Name {
				err = fmt.Errorf("the cluster is named %q, the patch %q", c.GetName(), jp.Name)
			}
			clusters[c.GetName()] = c
		case jp.Type == listenerType && firstHTTPFilter.MatchString(op.Path):
			f := &hcmv3.HttpFilter{}
			if err = decodeValue(op.Value, f); err == nil {
				err = validateAnys(f.ProtoReflect())
			}
			if err == nil && f.GetName() != rateLimitFilter {
				err = fmt.Errorf("filter %q, want %s", f.GetName(), rateLimitFilter)
			}
			if err == nil {
				e.filter = unpackFilter(f)
			}
		case jp.Type == routeType && vhostRateLimits.MatchString(op.Path):
			list, ok := op.Value.([]any)
			if !ok {
				err = errors.New("the value is not a list of rate limits")
			}
			for k := 0; err == nil && k < len(list); k++ {
				rl := &routev3.RateLimit{}
				if err = decodeValue(list[k], rl); err != nil {
					err = fmt.Errorf("[%d]: %w", k, err)
				}
				e.rateLimits = append(e.rateLimits, rl)
			}
		default:
			err = errors.New("a patch of this type at this path is not checked by this test")
		}
		if err != nil {
			return e, fmt.Errorf("%s: %w", where, err)
		}
	}
	if e.filter == nil || len(e.rateLimits) == 0 {
		return e, errors.New("no rate limit filter, or no rate_limits")
	}
	name := e.filter.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName()
	c, ok := clusters[name]
	if !ok {
		return e, fmt.Errorf("the filter's cluster %q is not added by the policy", name)
	}
	checkHTTP2(t, c)
	return e, nil
}

// TestGatewayPatchPolicyDecodesStrictly decodes envoypatchpolicy.yaml and its patch values.
func TestGatewayPatchPolicyDecodesStrictly(t *testing.T) {
	e, err := gatewayEdge(t, readFile(t, "../envoy-gateway/envoypatchpolicy.yaml"))
	if err != nil {
		t.Fatalf("envoypatchpolicy.yaml: %v", err)
	}
	checkFilter(t, e.filter)
}

// TestBrokenGatewayPatchPolicyFails shows the decoding can fail, outside and inside the patches.
func TestBrokenGatewayPatchPolicyFails(t *testing.T) {
	good := string(readFile(t, "../envoy-gateway/envoypatchpolicy.yaml"))
	for _, c := range []struct{ name, old, new string }{
		{"unknown field of the policy", "type: JSONPatch", "type: JSONPatch\n  priority_: 1"},
		{"unknown field of the cluster", "lb_policy: ROUND_ROBIN", "lb_policy: ROUND_ROBIN\n          lb_polcy: RANDOM"},
		{"wrong type in the cluster", "port_value: 8081", "port_value: grpc"},
		{"invalid cluster (an unknown lb_policy)", "lb_policy: ROUND_ROBIN", "lb_policy: FASTEST"},
		{"unknown field of the filter's typed config", "failure_mode_deny: true", "failure_mode_deny: true\n            failure_mode_denny: true"},
		{"invalid filter (an empty domain)", "domain: edge", `domain: ""`},
		{"unknown field of a rate limit action", "header_name: x-user-id", "header_name: x-user-id\n                  header_value: x"},
		{"filter not first", "http_filters/0", "http_filters/1"},
		{"filter on another cluster", "envoy_grpc: {cluster_name: admit}", "envoy_grpc: {cluster_name: ratelimit}"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if strings.Count(good, c.old) != 1 {
				t.Fatalf("envoypatchpolicy.yaml holds %q %d times, want once: update the test", c.old, strings.Count(good, c.old))
			}
			_, err := gatewayEdge(t, []byte(strings.Replace(good, c.old, c.new, 1)))
			if err == nil {
				t.Fatal("the broken copy decoded")
			}
			t.Log(err)
		})
	}
}

// TestGatewayDescriptorsAreLimited sends the descriptors the patched route configuration's
// actions build to admit configured with config/: each one is limited.
func TestGatewayDescriptorsAreLimited(t *testing.T) {
	e, err := gatewayEdge(t, readFile(t, "../envoy-gateway/envoypatchpolicy.yaml"))
	if err != nil {
		t.Fatalf("envoypatchpolicy.yaml: %v", err)
	}
	checkEdge(t, e, loadConfig(t))
}

// TestGatewayBackendTrafficPolicyIsWellFormed decodes the comparison BackendTrafficPolicy (Envoy
// Gateway's own global rate limit, without admit) with unknown fields refused.
func TestGatewayBackendTrafficPolicyIsWellFormed(t *testing.T) {
	var p struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name      string `yaml:"name"`
			Namespace string `yaml:"namespace"`
		} `yaml:"metadata"`
		Spec struct {
			TargetRefs []struct {
				Group string `yaml:"group"`
				Kind  string `yaml:"kind"`
				Name  string `yaml:"name"`
			} `yaml:"targetRefs"`
			RateLimit struct {
				Type   string `yaml:"type"`
				Global struct {
					Rules []struct {
						ClientSelectors []struct {
							SourceCIDR *struct {
								Type  string `yaml:"type"`
								Value string `yaml:"value"`
							} `yaml:"sourceCIDR"`
							Headers []struct {
								Name string `yaml:"name"`
								Type string `yaml:"type"`
							} `yaml:"headers"`
						} `yaml:"clientSelectors"`
						Limit struct {
							Requests int    `yaml:"requests"`
							Unit     string `yaml:"unit"`
						} `yaml:"limit"`
					} `yaml:"rules"`
				} `yaml:"global"`
			} `yaml:"rateLimit"`
		} `yaml:"spec"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(readFile(t, "../envoy-gateway/backendtrafficpolicy.yaml")))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		t.Fatal(err)
	}
	if p.APIVersion != "gateway.envoyproxy.io/v1alpha1" || p.Kind != "BackendTrafficPolicy" {
		t.Fatalf("%s %s, want a gateway.envoyproxy.io/v1alpha1 BackendTrafficPolicy", p.APIVersion, p.Kind)
	}
	if p.Spec.RateLimit.Type != "Global" || len(p.Spec.RateLimit.Global.Rules) == 0 {
		t.Fatalf("rateLimit.type %q with %d rules, want Global with rules", p.Spec.RateLimit.Type, len(p.Spec.RateLimit.Global.Rules))
	}
	for i, r := range p.Spec.RateLimit.Global.Rules {
		if r.Limit.Requests <= 0 || !slices.Contains([]string{"Second", "Minute", "Hour", "Day", "Month", "Year"}, r.Limit.Unit) {
			t.Errorf("rules[%d]: limit %d a %q", i, r.Limit.Requests, r.Limit.Unit)
		}
	}
}
