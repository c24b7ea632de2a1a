package helm

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// peers converts the NetworkPolicyPeers of a values file (v, as Helm read it) to their type.
func peers(t *testing.T, v any) []networkingv1.NetworkPolicyPeer {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var p []networkingv1.NetworkPolicyPeer
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// ingressPorts returns the port names of an ingress rule.
func ingressPorts(r networkingv1.NetworkPolicyIngressRule) []string {
	var ports []string
	for _, p := range r.Ports {
		ports = append(ports, p.Port.String())
	}
	return ports
}

// TestNetworkPolicyDefault checks the default the chart's README argues for: the data plane (the
// HTTP port) open to every source, the admin port closed to all even with the admin API on.
func TestNetworkPolicyDefault(t *testing.T) {
	vals := merge(ciValues(t, "redis.yaml"), map[string]any{"admin": map[string]any{"enabled": true, "token": "ci-admin-token-0123456789"}})
	np := one(t, "NetworkPolicies", render(t, vals).netpols)
	if len(np.Spec.Ingress) != 1 {
		t.Fatalf("%d ingress rules %+v; want one, the data plane's: the admin port closed", len(np.Spec.Ingress), np.Spec.Ingress)
	}
	r := np.Spec.Ingress[0]
	if got := ingressPorts(r); !slices.Equal(got, []string{"http"}) || len(r.From) > 0 {
		t.Errorf("the ingress rule has ports %q from %+v; want http from every source", got, r.From)
	}
}

// TestNetworkPolicyRestricted renders ci/restricted.yaml: the data plane, HTTP and gRPC, open
// only to the peers of networkPolicy.ingressFrom, Redis reached only where redisTo says; and the
// README's example is that file's.
func TestNetworkPolicyRestricted(t *testing.T) {
	vals := ciValues(t, "restricted.yaml")
	np := vals["networkPolicy"].(map[string]any)
	want, wantRedis := peers(t, np["ingressFrom"]), peers(t, np["redisTo"])
	if len(want) < 2 {
		t.Fatalf("restricted.yaml names %d peers", len(want))
	}
	got := one(t, "NetworkPolicies", render(t, vals).netpols)
	if len(got.Spec.Ingress) != 1 {
		t.Fatalf("%d ingress rules %+v; want the data plane's only", len(got.Spec.Ingress), got.Spec.Ingress)
	}
	r := got.Spec.Ingress[0]
	if ports := ingressPorts(r); !slices.Equal(ports, []string{"http", "grpc"}) {
		t.Errorf("the data plane's rule has ports %q; want http and grpc", ports)
	}
	if !reflect.DeepEqual(r.From, want) {
		t.Errorf("the data plane's rule is from %+v; want the values' %+v", r.From, want)
	}
	var redisRules int
	for _, e := range got.Spec.Egress {
		if len(e.Ports) > 0 && e.Ports[0].Port.IntValue() == 6379 {
			redisRules++
			if !reflect.DeepEqual(e.To, wantRedis) {
				t.Errorf("the Redis egress rule is to %+v; want the values' %+v", e.To, wantRedis)
			}
		}
	}
	if redisRules != 1 {
		t.Errorf("%d egress rules to Redis's port; want 1", redisRules)
	}

	readme, err := os.ReadFile("admit/README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)## The NetworkPolicy\n.*?```yaml\n(.*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("admit/README.md has no yaml example under \"## The NetworkPolicy\"")
	}
	var example struct {
		NetworkPolicy struct {
			IngressFrom []networkingv1.NetworkPolicyPeer `json:"ingressFrom"`
		} `json:"networkPolicy"`
	}
	if err := unmarshalStrict(block[1], &example); err != nil {
		t.Fatalf("the README's example: %v", err)
	}
	if !reflect.DeepEqual(example.NetworkPolicy.IngressFrom, want) {
		t.Errorf("the README's example %+v is not restricted.yaml's %+v", example.NetworkPolicy.IngressFrom, want)
	}
}
