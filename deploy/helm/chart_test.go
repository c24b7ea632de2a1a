package helm

import (
	"cmp"
	"encoding/base64"
	"net/url"
	"path"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	corev1 "k8s.io/api/core/v1"

	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/policy/envoyconf"
	"github.com/admit-dev/admit/redisstore"
)

// TestLint lints the chart with each values file of ci/ and with its defaults, warnings counted
// as errors (helm lint --strict).
func TestLint(t *testing.T) {
	for _, name := range ciFiles {
		t.Run(name, func(t *testing.T) {
			l := action.NewLint()
			l.Strict = true
			l.Namespace = namespace
			l.KubeVersion = kubeVersion(t)
			res := l.Run([]string{chartDir}, ciValues(t, name))
			if res.TotalChartsLinted != 1 {
				t.Errorf("linted %d charts; want 1", res.TotalChartsLinted)
			}
			for _, err := range res.Errors {
				t.Errorf("lint: %v", err)
			}
		})
	}
	// Helm lints in lint mode, where fail only logs: helm lint passes on the defaults too, and
	// the refusal is TestRefusals's to check, by rendering.
	t.Run("defaults", func(t *testing.T) {
		l := action.NewLint()
		l.Strict = true
		l.Namespace = namespace
		l.KubeVersion = kubeVersion(t)
		res := l.Run([]string{chartDir}, nil)
		if res.TotalChartsLinted != 1 || len(res.Errors) > 0 {
			t.Errorf("linted %d charts with the defaults; errors: %v", res.TotalChartsLinted, res.Errors)
		}
	})
}

// refusalNoRedis is part of the chart's refusal to render without a Redis, unless memory is true.
const refusalNoRedis = "set redis.url (the Redis every pod shares), or memory: true"

// Paths the chart gives admit.
const (
	configMount  = "/etc/admit/config"
	configFile   = "config.yaml"
	secretsMount = "/etc/admit/secrets"
)

// TestEveryValuesFile renders each values file of ci/ and checks what must hold for all: the
// objects decode strictly, the pod runs as the image's non-root user on a read-only root with no
// capabilities, the probes ask /healthz and /readyz on the HTTP port, admit listens on every
// interface, reads its policies from a ConfigMap mounted as a directory, and the policies pass
// admit's own validation.
func TestEveryValuesFile(t *testing.T) {
	for _, name := range ciFiles {
		t.Run(name, func(t *testing.T) {
			m := render(t, ciValues(t, name))
			d := one(t, "Deployments", m.deployments)
			pod := d.Spec.Template.Spec
			c := pod.Containers[0]
			if len(pod.Containers) != 1 {
				t.Errorf("%d containers; want 1", len(pod.Containers))
			}

			psc, sc := pod.SecurityContext, c.SecurityContext
			switch {
			case psc == nil || sc == nil:
				t.Fatal("no security context")
			case psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot, sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
				t.Error("runAsNonRoot is not true")
			case psc.RunAsUser == nil || *psc.RunAsUser != 65532, sc.RunAsUser == nil || *sc.RunAsUser != 65532:
				t.Error("runAsUser is not the image's 65532")
			case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
				t.Error("readOnlyRootFilesystem is not true")
			case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
				t.Error("allowPrivilegeEscalation is not false")
			case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
				t.Errorf("capabilities %+v; want ALL dropped, none added", sc.Capabilities)
			case psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
				t.Error("the pod's seccomp profile is not RuntimeDefault")
			}
			if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
				t.Error("the pod mounts a service account token; admit calls no Kubernetes API")
			}

			checkProbes(t, c, ciValues(t, name))
			if port := containerPort(c, "http"); port != 8080 {
				t.Errorf("container port http = %d; want 8080", port)
			}
			if len(c.Command) > 0 || len(c.Args) == 0 || c.Args[0] != "serve" {
				t.Errorf("command %q args %q; want the image's entry point with serve", c.Command, c.Args)
			}
			if got := flag(c, "listen"); got != ":8080" {
				t.Errorf("--listen=%q; want :8080, every interface of the pod", got)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("resources %+v; want a CPU request and a memory limit", c.Resources)
			}
			aff := pod.Affinity
			if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
				aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != "kubernetes.io/hostname" {
				t.Errorf("affinity %+v; want a preferred pod anti-affinity by hostname", aff)
			}

			// The policies: a ConfigMap mounted as a directory (a subPath mount would never see an
			// update), the file admit reads under it, valid by admit's own parser.
			if got, want := flag(c, "config"), path.Join(configMount, configFile); got != want {
				t.Errorf("--config=%q; want %q", got, want)
			}
			mount := volumeMount(t, c, configMount)
			if mount.SubPath != "" || mount.SubPathExpr != "" {
				t.Errorf("the configuration is mounted with subPath %q: the kubelet never updates such a mount", mount.SubPath)
			}
			vol := volume(t, pod, mount.Name)
			if vol.ConfigMap == nil || len(vol.ConfigMap.Items) > 0 {
				t.Fatalf("volume %s is %+v; want a whole ConfigMap", mount.Name, vol.VolumeSource)
			}
			cm := configMap(t, m, vol.ConfigMap.Name)
			if _, err := policy.Parse(configFile, []byte(cm.Data[configFile])); err != nil {
				t.Errorf("admit refuses the rendered configuration: %v\n%s", err, cm.Data[configFile])
			}

			np := one(t, "NetworkPolicies", m.netpols)
			if !slices.Contains(np.Spec.PolicyTypes, "Ingress") || !slices.Contains(np.Spec.PolicyTypes, "Egress") {
				t.Errorf("the NetworkPolicy has policy types %v; want Ingress and Egress", np.Spec.PolicyTypes)
			}
			if one(t, "PodDisruptionBudgets", m.pdbs).Spec.MaxUnavailable == nil {
				t.Error("the PodDisruptionBudget sets no maxUnavailable")
			}
			svc := service(t, m, releaseName)
			if p := servicePort(svc, "http"); p == nil || p.Port != 8080 || p.TargetPort.String() != "http" {
				t.Errorf("Service %s has no port http 8080 to the pod's http: %+v", svc.Name, svc.Spec.Ports)
			}
			if !strings.Contains(m.notes, releaseName+"."+namespace+".svc:8080") {
				t.Errorf("the notes do not say where the service is:\n%s", m.notes)
			}
		})
	}
}

// checkProbes checks that c's probes ask /healthz and /readyz on the HTTP port, over HTTPS under
// tls.enabled, or, under tls.clientCA, whose certificates the kubelet cannot present, that they
// connect to it.
func checkProbes(t *testing.T, c corev1.Container, vals map[string]any) {
	t.Helper()
	tls, _ := vals["tls"].(map[string]any)
	enabled, _ := tls["enabled"].(bool)
	mutual, _ := tls["clientCA"].(bool)
	scheme := corev1.URISchemeHTTP
	if enabled {
		scheme = corev1.URISchemeHTTPS
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		switch {
		case p.probe == nil:
			t.Errorf("no %s probe", p.name)
		case mutual && (p.probe.TCPSocket == nil || p.probe.TCPSocket.Port.String() != "http" || p.probe.HTTPGet != nil):
			t.Errorf("%s probe %+v under mutual TLS; want a TCP connection to port http", p.name, p.probe.ProbeHandler)
		case mutual:
		case p.probe.HTTPGet == nil:
			t.Errorf("no HTTP %s probe", p.name)
		case p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "http" || cmp.Or(p.probe.HTTPGet.Scheme, corev1.URISchemeHTTP) != scheme:
			t.Errorf("%s probe asks %s %s on port %s; want %s %s on http", p.name, p.probe.HTTPGet.Scheme, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), scheme, p.path)
		}
	}
}

// TestSecured checks the secured data plane of secured.yaml: the TLS Secret and the tokens'
// Secret mounted whole, their files named in the rendered configuration as admit reads it, and a
// ServiceMonitor that scrapes over HTTPS; and TLS without client certificates.
func TestSecured(t *testing.T) {
	vals := ciValues(t, "secured.yaml")
	m := render(t, vals)
	pod := one(t, "Deployments", m.deployments).Spec.Template.Spec
	c := pod.Containers[0]
	cm := configMap(t, m, releaseName)
	cfg, err := policy.Parse(configFile, []byte(cm.Data[configFile]))
	if err != nil {
		t.Fatalf("admit refuses the rendered configuration: %v\n%s", err, cm.Data[configFile])
	}
	want := policy.ServerTLS{CertFile: "/etc/admit/tls/tls.crt", KeyFile: "/etc/admit/tls/tls.key", ClientCAFile: "/etc/admit/tls/ca.crt"}
	if cfg.Server.TLS != want || cfg.Server.ClientTokensFile != "/etc/admit/client-tokens/tokens" {
		t.Errorf("server.tls %+v, client_tokens_file %q; want %+v, /etc/admit/client-tokens/tokens", cfg.Server.TLS, cfg.Server.ClientTokensFile, want)
	}
	for _, f := range []struct{ dir, secret string }{{"/etc/admit/tls", "admit-tls"}, {"/etc/admit/client-tokens", "admit-client-tokens"}} {
		mount := volumeMount(t, c, f.dir)
		vol := volume(t, pod, mount.Name)
		if mount.SubPath != "" || !mount.ReadOnly || vol.Secret == nil || vol.Secret.SecretName != f.secret {
			t.Errorf("%s: mount %+v of %+v; want Secret %s read-only, whole (the kubelet never updates a subPath)", f.dir, mount, vol.VolumeSource, f.secret)
		}
	}
	tokens := volume(t, pod, volumeMount(t, c, "/etc/admit/client-tokens").Name).Secret
	if len(tokens.Items) != 1 || tokens.Items[0].Key != "tokens" || tokens.Items[0].Path != "tokens" {
		t.Errorf("the tokens' Secret items %+v; want its key tokens as the file tokens", tokens.Items)
	}
	certs := volume(t, pod, volumeMount(t, c, "/etc/admit/tls").Name).Secret
	var paths []string
	for _, it := range certs.Items {
		paths = append(paths, it.Path)
	}
	if !slices.Equal(paths, []string{"tls.crt", "tls.key", "ca.crt"}) {
		t.Errorf("the TLS Secret's files %q; want tls.crt, tls.key, ca.crt", paths)
	}
	sm := one(t, "ServiceMonitors", m.serviceMonitors)
	if e := sm.Spec.Endpoints[0]; e.Scheme != "https" || e.TLSConfig["serverName"] != "admit.limits.svc" {
		t.Errorf("the ServiceMonitor scrapes with scheme %q, tlsConfig %v; want https and the values' tlsConfig", e.Scheme, e.TLSConfig)
	}
	one(t, "NetworkPolicies", m.netpols)
	for _, want := range []string{"https://admit.limits.svc:8080", "--cacert ca.crt --cert client.crt --key client.key", "Authorization: Bearer $TOKEN", "a certificate signed by the ca.crt of admit-tls"} {
		if !strings.Contains(m.notes, want) {
			t.Errorf("the notes lack %q:\n%s", want, m.notes)
		}
	}

	// TLS alone: HTTPS probes, no client CA file.
	m = render(t, merge(vals, map[string]any{"tls": map[string]any{"clientCA": false}}))
	c = one(t, "Deployments", m.deployments).Spec.Template.Spec.Containers[0]
	checkProbes(t, c, merge(vals, map[string]any{"tls": map[string]any{"clientCA": false}}))
	if cfg, err := policy.Parse(configFile, []byte(configMap(t, m, releaseName).Data[configFile])); err != nil || cfg.Server.TLS.ClientCAFile != "" || !cfg.Server.TLS.Enabled() {
		t.Errorf("TLS without client certificates: server.tls %+v, %v; want no client_ca_file", cfg.Server.TLS, err)
	}
}

// TestMemory checks memory mode: no Redis, no Secret, no egress but DNS, and notes that say
// why the limits multiply.
func TestMemory(t *testing.T) {
	m := render(t, ciValues(t, "memory.yaml"))
	c := one(t, "Deployments", m.deployments).Spec.Template.Spec.Containers[0]
	if len(c.Env) > 0 || flag(c, "redis") != "" || flag(c, "hmac-secret-file") != "" {
		t.Errorf("memory mode has env %+v and args %q; want no Redis and no secret", c.Env, c.Args)
	}
	if len(m.secrets) > 0 {
		t.Errorf("memory mode renders %d Secrets; want none", len(m.secrets))
	}
	np := one(t, "NetworkPolicies", m.netpols)
	for _, rule := range np.Spec.Egress {
		for _, p := range rule.Ports {
			if p.Port.IntValue() != 53 {
				t.Errorf("memory mode allows egress to port %s; want DNS only", p.Port.String())
			}
		}
	}
	if !strings.Contains(m.notes, "WARNING: memory: true") || !strings.Contains(m.notes, "Pods: 1; a client can be admitted that many times every limit") {
		t.Errorf("the notes do not warn that per-pod limits multiply:\n%s", m.notes)
	}
}

// TestRedisSecrets checks the Redis values: the URL (with its password) and the HMAC secret are
// in the chart's Secret, reached by reference, and nowhere in the ConfigMap, the arguments or an
// environment variable's value.
func TestRedisSecrets(t *testing.T) {
	vals := ciValues(t, "redis.yaml")
	redisURL := vals["redis"].(map[string]any)["url"].(string)
	hmac := vals["hmacSecret"].(map[string]any)["value"].(string)
	u, err := url.Parse(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	password, _ := u.User.Password()
	if password == "" {
		t.Fatal("redis.yaml's URL has no password: this test would check nothing")
	}
	m := render(t, vals)

	s := one(t, "Secrets", m.secrets)
	if got := string(s.Data["redis-url"]); got != redisURL {
		t.Errorf("Secret redis-url = %q; want %q", got, redisURL)
	}
	if got := string(s.Data["hmac-secret"]); got != hmac {
		t.Errorf("Secret hmac-secret = %q; want %q", got, hmac)
	}
	d := one(t, "Deployments", m.deployments)
	c := d.Spec.Template.Spec.Containers[0]
	env := envVar(c, "REDIS_URL")
	if env == nil || env.ValueFrom == nil || env.ValueFrom.SecretKeyRef == nil ||
		env.ValueFrom.SecretKeyRef.Name != s.Name || env.ValueFrom.SecretKeyRef.Key != "redis-url" {
		t.Errorf("REDIS_URL is %+v; want it from Secret %s, key redis-url", env, s.Name)
	}
	if got, want := flag(c, "hmac-secret-file"), secretsMount+"/hmac-secret"; got != want {
		t.Errorf("--hmac-secret-file=%q; want %q", got, want)
	}
	assertSecretFile(t, d.Spec.Template.Spec, c, s.Name, "hmac-secret", "hmac-secret")
	assertNowhereInPlainSight(t, m, password, hmac, base64.StdEncoding.EncodeToString([]byte(hmac)))
	if got := flag(c, "admin-listen"); got != "" {
		t.Errorf("--admin-listen=%q without an admin token", got)
	}
	if len(m.services) != 1 {
		t.Errorf("%d Services without the admin API and Envoy; want 1", len(m.services))
	}
}

// TestFull checks the values file with every option: HPA, ServiceMonitor, the admin API, Envoy's
// rate limit service, and every secret from Secrets of one's own.
func TestFull(t *testing.T) {
	m := render(t, ciValues(t, "full.yaml"))
	d := one(t, "Deployments", m.deployments)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	if d.Spec.Replicas != nil {
		t.Errorf("the Deployment sets replicas %d beside an HPA", *d.Spec.Replicas)
	}
	if len(m.secrets) > 0 {
		t.Errorf("%d Secrets rendered; want none: every secret is an existingSecret", len(m.secrets))
	}
	if env := envVar(c, "REDIS_URL"); env == nil || env.ValueFrom == nil || env.ValueFrom.SecretKeyRef == nil ||
		env.ValueFrom.SecretKeyRef.Name != "admit-redis" || env.ValueFrom.SecretKeyRef.Key != "url" {
		t.Errorf("REDIS_URL is %+v; want it from Secret admit-redis, key url", env)
	}
	assertSecretFile(t, pod, c, "admit-keys", "hmac", "hmac-secret")
	assertSecretFile(t, pod, c, "admit-keys", "admin", "admin-token")

	// The admin API: its own port and ClusterIP Service, whatever the data plane's type.
	if got := flag(c, "admin-listen"); got != ":8082" {
		t.Errorf("--admin-listen=%q; want :8082", got)
	}
	if got, want := flag(c, "admin-token-file"), secretsMount+"/admin-token"; got != want {
		t.Errorf("--admin-token-file=%q; want %q", got, want)
	}
	if containerPort(c, "admin") != 8082 {
		t.Error("no container port admin 8082")
	}
	admin := service(t, m, releaseName+"-admin")
	if admin.Spec.Type != corev1.ServiceTypeClusterIP || servicePort(admin, "admin") == nil {
		t.Errorf("the admin Service is %s with ports %+v; want ClusterIP with port admin", admin.Spec.Type, admin.Spec.Ports)
	}
	main := service(t, m, releaseName)
	if main.Spec.Type != corev1.ServiceTypeLoadBalancer || servicePort(main, "admin") != nil {
		t.Errorf("the data plane's Service is %s with ports %+v; want a LoadBalancer without the admin port", main.Spec.Type, main.Spec.Ports)
	}

	// Envoy's rate limit service: gRPC on 8081, its files in a ConfigMap admit accepts.
	if got := flag(c, "grpc-listen"); got != ":8081" {
		t.Errorf("--grpc-listen=%q; want :8081", got)
	}
	if p := servicePort(main, "grpc"); p == nil || p.Port != 8081 {
		t.Errorf("the Service has no port grpc 8081: %+v", main.Spec.Ports)
	}
	mount := volumeMount(t, c, flag(c, "envoy-config"))
	envoy := configMap(t, m, volume(t, pod, mount.Name).ConfigMap.Name)
	var files []envoyconf.File
	for name, data := range envoy.Data {
		files = append(files, envoyconf.File{Name: name, Data: []byte(data)})
	}
	if cfg, err := envoyconf.Parse(files...); err != nil || len(files) != 1 || !slices.Equal(cfg.Domains(), []string{"edge"}) {
		t.Errorf("the Envoy configuration: %d files, error %v", len(files), err)
	}

	hpa := one(t, "HorizontalPodAutoscalers", m.hpas)
	if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != d.Name ||
		hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas != 3 || hpa.Spec.MaxReplicas != 12 {
		t.Errorf("the HPA is %+v", hpa.Spec)
	}
	sm := one(t, "ServiceMonitors", m.serviceMonitors)
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "http" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("the ServiceMonitor scrapes %+v; want /metrics on port http", sm.Spec.Endpoints)
	}
	if sm.Labels["release"] != "prometheus" {
		t.Errorf("the ServiceMonitor's labels %v lack release: prometheus", sm.Labels)
	}
	for _, svc := range m.services {
		selected := true
		for k, v := range sm.Spec.Selector.MatchLabels {
			selected = selected && svc.Labels[k] == v
		}
		if selected != (svc.Name == main.Name) {
			t.Errorf("the ServiceMonitor selects Service %s: %v; want only %s", svc.Name, selected, main.Name)
		}
	}

	np := one(t, "NetworkPolicies", m.netpols)
	if len(np.Spec.Ingress) != 2 || len(np.Spec.Ingress[0].From) != 1 || len(np.Spec.Ingress[1].From) != 1 ||
		np.Spec.Ingress[1].Ports[0].Port.String() != "admin" {
		t.Errorf("the NetworkPolicy's ingress is %+v; want the data plane from the ingress namespace, the admin port from ops", np.Spec.Ingress)
	}
}

// TestRefusals checks that the chart refuses values that cannot work, each with a message that
// says what to set, and renders nothing.
func TestRefusals(t *testing.T) {
	redis := ciValues(t, "redis.yaml")
	for _, c := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"no backend", map[string]any{}, refusalNoRedis},
		{"no backend, memory false", map[string]any{"memory": false, "redis": map[string]any{"url": ""}}, refusalNoRedis},
		{"both backends", merge(redis, map[string]any{"memory": true}), "memory: true and redis.url (or redis.existingSecret) are both set"},
		{"not a URL", merge(redis, map[string]any{"redis": map[string]any{"url": "10.0.0.1:6379"}}), "redis.url must start with redis://"},
		{"short HMAC secret", merge(redis, map[string]any{"hmacSecret": map[string]any{"value": "short"}}), "hmacSecret.value must be at least 16 bytes"},
		{"two HMAC secrets", merge(redis, map[string]any{"hmacSecret": map[string]any{"existingSecret": "keys"}}), "hmacSecret.value and hmacSecret.existingSecret are both set"},
		{"admin without token", merge(redis, map[string]any{"admin": map[string]any{"enabled": true}}), "admin.enabled needs admin.token"},
		{"short admin token", merge(redis, map[string]any{"admin": map[string]any{"enabled": true, "token": "0123456789"}}), "admin.token must be at least 16 bytes"},
		{"Redis in the ConfigMap", merge(redis, map[string]any{"config": map[string]any{"server": map[string]any{"redis": "redis://x:6379"}}}), "config.server.redis is set by the chart"},
		{"listen in the ConfigMap", merge(redis, map[string]any{"config": map[string]any{"server": map[string]any{"listen": ":9999"}}}), "config.server.listen is set by the chart"},
		{"TLS in the ConfigMap", merge(redis, map[string]any{"config": map[string]any{"server": map[string]any{"tls": map[string]any{"cert_file": "/x"}}}}), "config.server.tls is set by the chart"},
		{"tokens in the ConfigMap", merge(redis, map[string]any{"config": map[string]any{"server": map[string]any{"client_tokens_file": "/x"}}}), "config.server.client_tokens_file is set by the chart"},
		{"TLS without a Secret", merge(redis, map[string]any{"tls": map[string]any{"enabled": true}}), "tls.enabled needs tls.secretName"},
		{"client CA without TLS", merge(redis, map[string]any{"tls": map[string]any{"clientCA": true}}), "tls.clientCA needs tls.enabled"},
		{"Envoy without files", merge(redis, map[string]any{"envoy": map[string]any{"enabled": true}}), "envoy.enabled needs envoy.config"},
		{"Envoy file name", merge(redis, map[string]any{"envoy": map[string]any{"enabled": true, "config": map[string]any{"edge.json": map[string]any{"domain": "edge"}}}}), `envoy.config file name "edge.json" must end in .yaml or .yml`},
		{"HPA bounds", merge(redis, map[string]any{"autoscaling": map[string]any{"enabled": true, "minReplicas": 5, "maxReplicas": 2}}), "autoscaling.minReplicas is above autoscaling.maxReplicas"},
	} {
		t.Run(c.name, func(t *testing.T) {
			text, _, err := renderValues(t, c.vals)
			if err == nil {
				t.Fatalf("rendered; want the refusal %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q; want one containing %q", err, c.want)
			}
			if strings.Contains(text, "kind:") {
				t.Errorf("a refused render returned objects:\n%s", text)
			}
		})
	}
}

// TestGeneratedHMACSecret checks that Redis without an HMAC secret of one's own gets a generated
// one of 48 characters, and that the notes say so.
func TestGeneratedHMACSecret(t *testing.T) {
	vals := merge(ciValues(t, "redis.yaml"), map[string]any{"hmacSecret": map[string]any{"value": ""}})
	m := render(t, vals)
	s := one(t, "Secrets", m.secrets)
	if got := len(s.Data["hmac-secret"]); got != 48 {
		t.Errorf("the generated HMAC secret has %d bytes; want 48", got)
	}
	if !strings.Contains(m.notes, "The HMAC secret was generated") {
		t.Errorf("the notes do not say the HMAC secret was generated:\n%s", m.notes)
	}
}

// assertSecretFile checks that the file named file under secretsMount holds key of Secret name,
// through a volume mounted read-only, readable by its owner and group only.
func assertSecretFile(t *testing.T, pod corev1.PodSpec, c corev1.Container, name, key, file string) {
	t.Helper()
	mount := volumeMount(t, c, secretsMount)
	if !mount.ReadOnly {
		t.Error("the secrets are mounted writable")
	}
	vol := volume(t, pod, mount.Name)
	if vol.Projected == nil {
		t.Fatalf("volume %s is not projected: %+v", mount.Name, vol.VolumeSource)
	}
	if m := vol.Projected.DefaultMode; m == nil || *m&0o007 != 0 {
		t.Errorf("the secrets' mode is %v; want none for others", m)
	}
	for _, src := range vol.Projected.Sources {
		if src.Secret == nil || src.Secret.Name != name {
			continue
		}
		for _, it := range src.Secret.Items {
			if it.Key == key && it.Path == file {
				return
			}
		}
	}
	t.Errorf("%s/%s is not key %s of Secret %s: %+v", secretsMount, file, key, name, vol.Projected.Sources)
}

// assertNowhereInPlainSight checks that no ConfigMap, no argument, no environment variable's value,
// no annotation and not the notes hold any of secrets.
func assertNowhereInPlainSight(t *testing.T, m *manifest, secrets ...string) {
	t.Helper()
	var plain []string
	for _, cm := range m.configMaps {
		for _, v := range cm.Data {
			plain = append(plain, v)
		}
	}
	for _, d := range m.deployments {
		for k, v := range d.Spec.Template.Annotations {
			plain = append(plain, k, v)
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			plain = append(plain, c.Args...)
			for _, e := range c.Env {
				plain = append(plain, e.Value)
			}
		}
	}
	plain = append(plain, m.notes)
	for _, s := range secrets {
		for _, p := range plain {
			if strings.Contains(p, s) {
				t.Errorf("a secret is in plain sight: %q holds %q", p, s)
			}
		}
	}
}

// flag returns the value of --name=VALUE in c's arguments, or "".
func flag(c corev1.Container, name string) string {
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// containerPort returns the number of c's port called name, or 0.
func containerPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// envVar returns c's environment variable name, or nil.
func envVar(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// volumeMount returns c's mount at dir, failing the test if there is none.
func volumeMount(t *testing.T, c corev1.Container, dir string) corev1.VolumeMount {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.MountPath == dir {
			return m
		}
	}
	t.Fatalf("nothing is mounted at %q: %+v", dir, c.VolumeMounts)
	return corev1.VolumeMount{}
}

// volume returns pod's volume name, failing the test if there is none.
func volume(t *testing.T, pod corev1.PodSpec, name string) corev1.Volume {
	t.Helper()
	for _, v := range pod.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no volume %q", name)
	return corev1.Volume{}
}

// configMap returns the rendered ConfigMap name, failing the test if there is none.
func configMap(t *testing.T, m *manifest, name string) *corev1.ConfigMap {
	t.Helper()
	for _, cm := range m.configMaps {
		if cm.Name == name {
			return cm
		}
	}
	t.Fatalf("no ConfigMap %q", name)
	return nil
}

// service returns the rendered Service name, failing the test if there is none.
func service(t *testing.T, m *manifest, name string) *corev1.Service {
	t.Helper()
	for _, s := range m.services {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no Service %q", name)
	return nil
}

// servicePort returns s's port called name, or nil.
func servicePort(s *corev1.Service, name string) *corev1.ServicePort {
	for i := range s.Spec.Ports {
		if s.Spec.Ports[i].Name == name {
			return &s.Spec.Ports[i]
		}
	}
	return nil
}

// TestRedisURLs checks the Redis values files (one server, Sentinel, Cluster): the URL reaches
// the Secret unchanged, admit's redisstore accepts it (it parses it and connects to nothing), and
// the NetworkPolicy lets the pods reach Redis's and Sentinel's ports.
func TestRedisURLs(t *testing.T) {
	for _, name := range []string{"redis.yaml", "sentinel.yaml", "cluster.yaml"} {
		t.Run(name, func(t *testing.T) {
			vals := ciValues(t, name)
			want := vals["redis"].(map[string]any)["url"].(string)
			m := render(t, vals)
			got := string(one(t, "Secrets", m.secrets).Data["redis-url"])
			if got != want {
				t.Fatalf("Secret redis-url = %q; want %q", got, want)
			}
			s, err := redisstore.New(redisstore.Config{URL: got})
			if err != nil {
				t.Fatalf("admit refuses the URL: %v", err)
			}
			s.Close()
			ports := map[int]bool{}
			for _, rule := range one(t, "NetworkPolicies", m.netpols).Spec.Egress {
				for _, p := range rule.Ports {
					ports[p.Port.IntValue()] = true
				}
			}
			if !ports[6379] || !ports[26379] {
				t.Errorf("the NetworkPolicy's egress ports %v lack Redis's 6379 or Sentinel's 26379", ports)
			}
		})
	}
}
