package envoy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"go.yaml.in/yaml/v3"

	"github.com/admit-dev/admit/policy/envoyconf"
)

// envoyFilter is the part of Istio's networking.istio.io/v1alpha3 EnvoyFilter the shipped
// objects use, decoded with unknown fields refused: a misspelt field is an error here as it is
// for Istio's validation.
type envoyFilter struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
	Spec struct {
		WorkloadSelector struct {
			Labels map[string]string `yaml:"labels"`
		} `yaml:"workloadSelector"`
		ConfigPatches []struct {
			ApplyTo string `yaml:"applyTo"`
			Match   struct {
				Context  string `yaml:"context"`
				Listener *struct {
					FilterChain struct {
						Filter struct {
							Name      string `yaml:"name"`
							SubFilter struct {
								Name string `yaml:"name"`
							} `yaml:"subFilter"`
						} `yaml:"filter"`
					} `yaml:"filterChain"`
				} `yaml:"listener"`
				RouteConfiguration *struct {
					PortNumber int `yaml:"portNumber"`
					Vhost      struct {
						Name  string `yaml:"name"`
						Route struct {
							Action string `yaml:"action"`
						} `yaml:"route"`
					} `yaml:"vhost"`
				} `yaml:"routeConfiguration"`
			} `yaml:"match"`
			Patch struct {
				Operation string `yaml:"operation"`
				Value     any    `yaml:"value"`
			} `yaml:"patch"`
		} `yaml:"configPatches"`
	} `yaml:"spec"`
}

// istioEdge decodes the EnvoyFilters of data strictly, and each patch's value into its Envoy
// type: an HTTP_FILTER's into HttpFilter (validated, its typed_config too), a VIRTUAL_HOST
// MERGE's into VirtualHost (a partial one, so only its rate_limits are validated).
func istioEdge(data []byte) (edge, error) {
	var e edge
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	for n := 1; ; n++ {
		var ef envoyFilter
		err := dec.Decode(&ef)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return e, fmt.Errorf("EnvoyFilter %d: %w", n, err)
		}
		if ef.APIVersion != "networking.istio.io/v1alpha3" || ef.Kind != "EnvoyFilter" {
			return e, fmt.Errorf("EnvoyFilter %d: %s %s, want networking.istio.io/v1alpha3 EnvoyFilter", n, ef.APIVersion, ef.Kind)
		}
		for i, p := range ef.Spec.ConfigPatches {
			where := fmt.Sprintf("%s: configPatches[%d]", ef.Metadata.Name, i)
			switch {
			case p.ApplyTo == "HTTP_FILTER" && p.Patch.Operation == "INSERT_BEFORE":
				if p.Match.Listener == nil || p.Match.Listener.FilterChain.Filter.SubFilter.Name != routerFilter {
					return e, fmt.Errorf("%s: the filter is not inserted before %s", where, routerFilter)
				}
				f := &hcmv3.HttpFilter{}
				if err := decodeValue(p.Patch.Value, f); err != nil {
					return e, fmt.Errorf("%s: %w", where, err)
				}
				if err := validateAnys(f.ProtoReflect()); err != nil {
					return e, fmt.Errorf("%s: %w", where, err)
				}
				if f.GetName() != rateLimitFilter {
					return e, fmt.Errorf("%s: filter %q, want %s", where, f.GetName(), rateLimitFilter)
				}
				e.filter = unpackFilter(f)
			case p.ApplyTo == "VIRTUAL_HOST" && p.Patch.Operation == "MERGE":
				j, err := toJSON(p.Patch.Value)
				if err != nil {
					return e, fmt.Errorf("%s: %w", where, err)
				}
				vh := &routev3.VirtualHost{}
				if err := strict.Unmarshal(j, vh); err != nil {
					return e, fmt.Errorf("%s: %w", where, err)
				}
				for k, rl := range vh.GetRateLimits() {
					if err := rl.ValidateAll(); err != nil {
						return e, fmt.Errorf("%s: rate_limits[%d]: %w", where, k, err)
					}
				}
				e.rateLimits = append(e.rateLimits, vh.GetRateLimits()...)
			default:
				return e, fmt.Errorf("%s: applyTo %s with operation %s is not checked by this test", where, p.ApplyTo, p.Patch.Operation)
			}
		}
	}
	if e.filter == nil || len(e.rateLimits) == 0 {
		return e, errors.New("no rate limit filter, or no rate_limits")
	}
	return e, nil
}

// TestIstioEnvoyFilterDecodesStrictly decodes envoyfilter.yaml and checks the filter's wiring:
// fail closed, V3, and the cluster Istio names after admit's Service (release admit, namespace
// admit, the chart's gRPC port).
func TestIstioEnvoyFilterDecodesStrictly(t *testing.T) {
	e, err := istioEdge(readFile(t, "../istio/envoyfilter.yaml"))
	if err != nil {
		t.Fatalf("envoyfilter.yaml: %v", err)
	}
	checkFilter(t, e.filter)
	if got, want := e.filter.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName(), "outbound|8081||admit.admit.svc.cluster.local"; got != want {
		t.Errorf("cluster %q, want %q", got, want)
	}
}

// TestBrokenIstioEnvoyFilterFails shows the decoding can fail, outside and inside the patches.
func TestBrokenIstioEnvoyFilterFails(t *testing.T) {
	good := string(readFile(t, "../istio/envoyfilter.yaml"))
	for _, c := range []struct{ name, old, new string }{
		{"unknown field of the EnvoyFilter", "workloadSelector:\n    labels:\n      istio: ingressgateway\n  configPatches:\n    - applyTo: HTTP_FILTER", "workloadSelectors:\n    labels:\n      istio: ingressgateway\n  configPatches:\n    - applyTo: HTTP_FILTER"},
		{"unknown field of the filter's typed config", "failure_mode_deny: true", "failure_mode_deny: true\n            failure_mode_denny: true"},
		{"wrong type in the filter's typed config", "failure_mode_deny: true", "failure_mode_deny: yes-please"},
		{"invalid value in the filter", "domain: edge", `domain: ""`},
		{"unknown field of a rate limit action", "header_name: x-user-id", "header_name: x-user-id\n                    header_value: x"},
		{"wrong type in a rate limit action", "descriptor_value: write", "descriptor_value: [write]"},
		{"invalid rate limit (no actions)", "- actions:\n                - remote_address: {}\n            # [route", "- actions: []\n            # [route"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if strings.Count(good, c.old) != 1 {
				t.Fatalf("envoyfilter.yaml holds %q %d times, want once: update the test", c.old, strings.Count(good, c.old))
			}
			_, err := istioEdge([]byte(strings.Replace(good, c.old, c.new, 1)))
			if err == nil {
				t.Fatal("the broken copy decoded")
			}
			t.Log(err)
		})
	}
}

// chartEnvoyConfig returns the Envoy files of the chart values at path, parsed by envoyconf as
// admit reads them from the chart's ConfigMap, and the files as decoded YAML.
func chartEnvoyConfig(t *testing.T, path string) (*envoyconf.Config, map[string]any) {
	t.Helper()
	var values struct {
		Envoy struct {
			Enabled bool           `yaml:"enabled"`
			Config  map[string]any `yaml:"config"`
		} `yaml:"envoy"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(readFile(t, path)))
	dec.KnownFields(true)
	if err := dec.Decode(&values); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !values.Envoy.Enabled {
		t.Fatalf("%s: envoy.enabled is not true: the chart would serve no gRPC", path)
	}
	var files []envoyconf.File
	for name, v := range values.Envoy.Config {
		data, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, envoyconf.File{Name: name, Data: data})
	}
	cfg, err := envoyconf.Parse(files...)
	if err != nil {
		t.Fatalf("%s: envoy.config: %v", path, err)
	}
	return cfg, values.Envoy.Config
}

// TestIstioChartValuesCarryTheConfig checks that admit-values.yaml gives the chart the same
// rate limit configuration as deploy/envoy/config.
func TestIstioChartValuesCarryTheConfig(t *testing.T) {
	_, files := chartEnvoyConfig(t, "../istio/admit-values.yaml")
	var want any
	if err := yaml.Unmarshal(readFile(t, "config/ratelimit.yaml"), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(files, map[string]any{"ratelimit.yaml": want}) {
		t.Fatalf("envoy.config of admit-values.yaml is not deploy/envoy/config/ratelimit.yaml:\n%v\nwant ratelimit.yaml:\n%v", files, want)
	}
}

// TestIstioDescriptorsAreLimited sends the descriptors the EnvoyFilter's actions build to admit
// configured from the chart values: each one is limited.
func TestIstioDescriptorsAreLimited(t *testing.T) {
	e, err := istioEdge(readFile(t, "../istio/envoyfilter.yaml"))
	if err != nil {
		t.Fatalf("envoyfilter.yaml: %v", err)
	}
	cfg, _ := chartEnvoyConfig(t, "../istio/admit-values.yaml")
	checkEdge(t, e, cfg)
}
