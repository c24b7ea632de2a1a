package helm

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart under test, and ciDir its values files, one per way of running admit.
const (
	chartDir = "admit"
	ciDir    = "admit/ci"
)

// Where the release is rendered.
const (
	releaseName = "admit"
	namespace   = "limits"
)

// ciFiles are the values files of ciDir that every test renders.
var ciFiles = []string{"memory.yaml", "redis.yaml", "sentinel.yaml", "cluster.yaml", "full.yaml", "secured.yaml", "restricted.yaml"}

// A manifest is what the chart rendered for one set of values, each object decoded strictly into
// its type.
type manifest struct {
	notes           string
	deployments     []*appsv1.Deployment
	services        []*corev1.Service
	configMaps      []*corev1.ConfigMap
	secrets         []*corev1.Secret
	serviceAccounts []*corev1.ServiceAccount
	pdbs            []*policyv1.PodDisruptionBudget
	hpas            []*autoscalingv2.HorizontalPodAutoscaler
	netpols         []*networkingv1.NetworkPolicy
	serviceMonitors []*serviceMonitor
	kinds           []string // of every object, in order
}

// A serviceMonitor is the part of a Prometheus Operator ServiceMonitor (monitoring.coreos.com/v1)
// that the chart renders: decoded strictly, a field it does not know fails the test.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string         `json:"port"`
			Path          string         `json:"path"`
			Interval      string         `json:"interval"`
			ScrapeTimeout string         `json:"scrapeTimeout"`
			Scheme        string         `json:"scheme"`
			TLSConfig     map[string]any `json:"tlsConfig"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// kubeVersionText is the Kubernetes version the chart is rendered and linted for: library callers
// of Helm get v1.20 unless they say, below the chart's kubeVersion.
const kubeVersionText = "v1.31.0"

// kubeVersion returns kubeVersionText parsed.
func kubeVersion(t *testing.T) *common.KubeVersion {
	t.Helper()
	v, err := common.ParseKubeVersion(kubeVersionText)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// loadChart loads the chart directory with Helm's loader.
func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load the chart: %v", err)
	}
	return c
}

// ciValues returns the values of the file of ciDir named name, as helm install -f reads them.
func ciValues(t *testing.T, name string) map[string]any {
	t.Helper()
	v, err := common.ReadValuesFile(filepath.Join(ciDir, name))
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return v
}

// renderValues renders the chart as helm install --dry-run=client does, with vals over the
// chart's defaults, and returns the manifest and the notes.
func renderValues(t *testing.T, vals map[string]any) (manifestText, notes string, err error) {
	t.Helper()
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.Replace = true
	install.ReleaseName = releaseName
	install.Namespace = namespace
	install.KubeVersion = kubeVersion(t)
	rel, err := install.Run(loadChart(t), vals)
	if err != nil {
		return "", "", err
	}
	r, ok := rel.(*release.Release)
	if !ok {
		t.Fatalf("install returned a %T, want a *release.Release", rel)
	}
	return r.Manifest, r.Info.Notes, nil
}

// render renders the chart with vals and decodes every object strictly; any error fails the test.
func render(t *testing.T, vals map[string]any) *manifest {
	t.Helper()
	text, notes, err := renderValues(t, vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	m, err := decode(text)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	m.notes = notes
	return m
}

// decode splits a rendered manifest into its documents and decodes each strictly, refusing
// unknown fields, fields set twice and kinds the chart should not render.
func decode(text string) (*manifest, error) {
	m := &manifest{}
	for doc := range strings.SplitSeq(text, "\n---") {
		doc = strings.TrimPrefix(doc, "\n")
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return nil, fmt.Errorf("a document that is not an object: %w", err)
		}
		m.kinds = append(m.kinds, tm.Kind)
		var err error
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 Deployment":
			m.deployments, err = appendStrict(m.deployments, doc)
		case "v1 Service":
			m.services, err = appendStrict(m.services, doc)
		case "v1 ConfigMap":
			m.configMaps, err = appendStrict(m.configMaps, doc)
		case "v1 Secret":
			m.secrets, err = appendStrict(m.secrets, doc)
		case "v1 ServiceAccount":
			m.serviceAccounts, err = appendStrict(m.serviceAccounts, doc)
		case "policy/v1 PodDisruptionBudget":
			m.pdbs, err = appendStrict(m.pdbs, doc)
		case "autoscaling/v2 HorizontalPodAutoscaler":
			m.hpas, err = appendStrict(m.hpas, doc)
		case "networking.k8s.io/v1 NetworkPolicy":
			m.netpols, err = appendStrict(m.netpols, doc)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			m.serviceMonitors, err = appendStrict(m.serviceMonitors, doc)
		default:
			err = errors.New("an object the chart should not render")
		}
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, err)
		}
	}
	return m, nil
}

// stripComments drops the comment lines of a YAML document (Helm's "# Source:" lines).
func stripComments(doc string) string {
	var b bytes.Buffer
	for line := range strings.Lines(doc) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// appendStrict decodes doc into a new T as the API server does, refusing unknown and duplicate
// fields, and appends it. Field names match case-sensitively (sigs.k8s.io/json): encoding/json's
// DisallowUnknownFields takes readOnlyRootFileSystem for readOnlyRootFilesystem, which the API
// server drops.
func appendStrict[T any](list []*T, doc string) ([]*T, error) {
	v := new(T)
	if err := unmarshalStrict([]byte(doc), v); err != nil {
		return list, err
	}
	return append(list, v), nil
}

// unmarshalStrict decodes the YAML doc into v as appendStrict does.
func unmarshalStrict(doc []byte, v any) error {
	data, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strictErrs, err := kjson.UnmarshalStrict(data, v)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

// one returns the only element of list, failing the test if there is not exactly one.
func one[T any](t *testing.T, what string, list []*T) *T {
	t.Helper()
	if len(list) != 1 {
		t.Fatalf("%d %s rendered; want 1", len(list), what)
	}
	return list[0]
}

// merge returns a copy of the values base with over set on top, as helm's --set does: maps merge,
// anything else replaces.
func merge(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if om, ok := v.(map[string]any); ok {
			if bm, ok := out[k].(map[string]any); ok {
				out[k] = merge(bm, om)
				continue
			}
		}
		out[k] = v
	}
	return out
}
