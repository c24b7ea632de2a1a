package helm

import (
	"os"
	"reflect"
	"slices"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"sigs.k8s.io/yaml"

	"github.com/admit-dev/admit/policy/envoyconf"
)

// istioValues are the chart values deploy/istio ships for admit behind Istio's ingress gateway.
const istioValues = "../istio/admit-values.yaml"

// TestIstioValues renders the chart with deploy/istio's values, as its README installs it: the
// Service is named admit with the gRPC port 8081 (the cluster its EnvoyFilter names is
// outbound|8081||admit.<namespace>.svc.cluster.local), and the rendered Envoy files are
// deploy/envoy/config's, which admit accepts.
func TestIstioValues(t *testing.T) {
	vals, err := common.ReadValuesFile(istioValues)
	if err != nil {
		t.Fatal(err)
	}
	m := render(t, merge(vals, map[string]any{"redis": map[string]any{"url": "redis://redis.admit:6379"}}))
	main := service(t, m, releaseName)
	p := servicePort(main, "grpc")
	if p == nil || p.Port != 8081 || p.AppProtocol == nil || *p.AppProtocol != "grpc" {
		t.Fatalf("the Service's grpc port is %+v; want 8081 with appProtocol grpc", p)
	}
	d := one(t, "Deployments", m.deployments)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	envoy := configMap(t, m, volume(t, pod, volumeMount(t, c, flag(c, "envoy-config")).Name).ConfigMap.Name)
	want, err := os.ReadFile("../envoy/config/ratelimit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := envoyconf.Parse(envoyconf.File{Name: "ratelimit.yaml", Data: want})
	if err != nil {
		t.Fatal(err)
	}
	var files []envoyconf.File
	for name, data := range envoy.Data {
		files = append(files, envoyconf.File{Name: name, Data: []byte(data)})
	}
	cfg, err := envoyconf.Parse(files...)
	if err != nil {
		t.Fatalf("the rendered Envoy files: %v", err)
	}
	if len(files) != 1 || !slices.Equal(cfg.Domains(), shipped.Domains()) {
		t.Fatalf("the rendered Envoy files are %d with domains %q; want ratelimit.yaml with %q", len(files), cfg.Domains(), shipped.Domains())
	}
	var got, wantTree any
	if err := yaml.Unmarshal([]byte(envoy.Data["ratelimit.yaml"]), &got); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(want, &wantTree); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, wantTree) {
		t.Errorf("the rendered ratelimit.yaml differs from deploy/envoy/config's:\n%s", envoy.Data["ratelimit.yaml"])
	}
}
