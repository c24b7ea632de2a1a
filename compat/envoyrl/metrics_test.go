package envoyrl

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/admit-dev/admit/internal/envoyrlproc"
	"github.com/admit-dev/admit/internal/freeport"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/internal/syncbuf"
)

// metricsConfig has rules of one, two and three levels (two of them alike in their first three
// parts, which envoyproxy/ratelimit's mapping counts in one series), detailed_metric,
// value_to_metric and shadow_mode, all by the day.
const metricsConfig = `domain: mx
descriptors:
  - key: database
    value: users
    rate_limit: {unit: day, requests_per_unit: 3}
  - key: user
    rate_limit: {unit: day, requests_per_unit: 5}
  - key: a
    descriptors:
      - key: b
        rate_limit: {unit: day, requests_per_unit: 2}
      - key: c
        value: d
        descriptors:
          - key: e
            rate_limit: {unit: day, requests_per_unit: 2}
          - key: f
            rate_limit: {unit: day, requests_per_unit: 1}
  - key: ip
    detailed_metric: true
    rate_limit: {unit: day, requests_per_unit: 2}
  - key: route
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: {unit: day, requests_per_unit: 2}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: day, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
`

// metricsSequence is the requests of TestEnvoyCompatMetrics: each descriptor's entries, and how
// many times it is sent, one hit each.
var metricsSequence = []struct {
	kv    []string
	times int
}{
	{[]string{"database", "users"}, 5},
	{[]string{"user", "u1"}, 2},
	{[]string{"user", "u2"}, 4},
	{[]string{"a", "x", "b", "y"}, 3},
	{[]string{"a", "x", "c", "d", "e", "z"}, 1},
	{[]string{"a", "x", "c", "d", "f", "z"}, 2},
	{[]string{"ip", "10.0.0.1"}, 3},
	{[]string{"ip", "10.0.0.2"}, 1},
	{[]string{"ip", "fe80::1"}, 1},
	{[]string{"ip", "a|b"}, 1},
	{[]string{"ip", "v1.2"}, 1},
	{[]string{"ip", "192.168.0.1:8080"}, 1},
	{[]string{"ip", "/api/x y"}, 1},
	{[]string{"route", "r1", "method", "GET"}, 1},
	{[]string{"route", "r2", "method", "POST"}, 3},
	{[]string{"shadow", "s"}, 2},
	{[]string{"free", "f"}, 2},
	{[]string{"nothing", "n"}, 1},
}

// envoyNames are the series of envoyproxy/ratelimit's per-rule stats, as its mapping names them.
var envoyNames = []string{"ratelimit_service_rate_limit_total_hits", "ratelimit_service_rate_limit_over_limit",
	"ratelimit_service_rate_limit_near_limit", "ratelimit_service_rate_limit_within_limit", "ratelimit_service_rate_limit_shadow_mode"}

// TestEnvoyCompatMetrics sends one short sequence to envoyproxy/ratelimit with USE_PROMETHEUS=true
// and to admit serve --metrics-mode envoy_compat, each on its own redis-server, and compares the
// series of envoyproxy/ratelimit's per-rule stats: the same names, domain, key1 and key2 labels and
// values, admit's series summed over its key label (the allowed difference "key label"). A series
// of 0 is left out: envoyproxy/ratelimit exports a counter once it counted.
func TestEnvoyCompatMetrics(t *testing.T) {
	if now := time.Now().UTC(); now.Add(30*time.Second).Day() != now.Day() {
		time.Sleep(time.Until(now.Truncate(24 * time.Hour).Add(24*time.Hour + time.Second))) // both count in one day
	}
	seen := newSightings(t, "key label")
	files := map[string]string{"mx.yaml": metricsConfig}
	refMetrics, ref := startReferenceProm(t, redistest.Start(t), files, "mx")
	admMetrics, adm := startAdmitCompat(t, redistest.Start(t), files, "mx")
	hits := 0
	for _, step := range metricsSequence {
		d := &ratelimitv3.RateLimitDescriptor{}
		for i := 0; i+1 < len(step.kv); i += 2 {
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: step.kv[i], Value: step.kv[i+1]})
		}
		for range step.times {
			req := &rlsv3.RateLimitRequest{Domain: "mx", Descriptors: []*ratelimitv3.RateLimitDescriptor{d}}
			for _, s := range []*service{ref, adm} {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := s.client.ShouldRateLimit(ctx, req)
				cancel()
				if err != nil {
					t.Fatalf("%s: %v: %v", s.name, step.kv, err)
				}
			}
		}
		hits += step.times
	}

	adm2 := seriesOf(t, scrape(t, admMetrics))
	want := sumOverKey(adm2)
	if len(want) == 0 {
		t.Fatalf("admit exports none of envoyproxy/ratelimit's series:\n%s", scrape(t, admMetrics))
	}
	for s := range want {
		if !slices.Contains(envoyNames, s.name) {
			t.Errorf("admit exports %s, not a name of envoyproxy/ratelimit's", s.name)
		}
	}
	if len(want) < len(adm2) {
		seen.saw(t, "key label")
	}
	// envoyproxy/ratelimit's stats reach its Prometheus listener at each flush, one counter after
	// another: scrape until they are admit's, or a patient deadline has passed, then compare.
	var got map[seriesID]float64
	deadline := time.Now().Add(startTimeout)
	for {
		got = seriesOf(t, scrape(t, refMetrics))
		if maps.Equal(got, want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !maps.Equal(got, want) {
		for _, s := range slices.SortedFunc(maps.Keys(mergeKeys(got, want)), compareSeries) {
			if got[s] != want[s] {
				t.Errorf("%s{domain=%q,key1=%q,key2=%q}: envoyproxy/ratelimit %v, admit %v", s.name, s.domain, s.key1, s.key2, got[s], want[s])
			}
		}
	}
	t.Logf("%d hits, %d series of envoyproxy/ratelimit's names (admit: %d by key)", hits, len(got), len(adm2))
}

// A seriesID is a series of envoyproxy/ratelimit's names, by its mapping's labels (and admit's key).
type seriesID struct{ name, domain, key1, key2, key string }

func compareSeries(a, b seriesID) int {
	return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

var (
	seriesLine = regexp.MustCompile(`^(ratelimit_service_rate_limit_[a-z_]+)\{([^}]*)\} (\S+)$`)
	labelPair  = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)
)

// seriesOf returns the series of envoyproxy/ratelimit's names in the exposition page, but those of 0.
func seriesOf(t *testing.T, page string) map[seriesID]float64 {
	t.Helper()
	out := map[seriesID]float64{}
	for _, line := range strings.Split(page, "\n") {
		m := seriesLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if v == 0 {
			continue
		}
		id := seriesID{name: m[1]}
		for _, l := range labelPair.FindAllStringSubmatch(m[2], -1) {
			switch l[1] {
			case "domain":
				id.domain = l[2]
			case "key1":
				id.key1 = l[2]
			case "key2":
				id.key2 = l[2]
			case "key":
				id.key = l[2]
			default:
				t.Errorf("%q: a label %s neither service has", line, l[1])
			}
		}
		out[id] += v
	}
	return out
}

// sumOverKey returns series summed over their key label.
func sumOverKey(in map[seriesID]float64) map[seriesID]float64 {
	out := map[seriesID]float64{}
	for s, v := range in {
		s.key = ""
		out[s] += v
	}
	return out
}

func mergeKeys(a, b map[seriesID]float64) map[seriesID]float64 {
	out := maps.Clone(a)
	for s := range b {
		out[s] = 0
	}
	return out
}

// scrape returns the page of url.
func scrape(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return string(b)
}

// startReferenceProm is startReference with USE_PROMETHEUS=true (statsd off, as envoyproxy/ratelimit
// wants one sink) on a loopback port of its own, flushed every 100ms; it returns its metrics' URL too.
func startReferenceProm(t *testing.T, srv *redistest.Server, files map[string]string, domain string) (string, *service) {
	t.Helper()
	bin := binary(t, "ratelimit", referenceModule, envoyrlproc.Package)
	root := t.TempDir()
	writeConfig(t, envoyrlproc.RuntimeDir(root), files)
	var lastLogs string
	for range 3 {
		ports := freeport.Ports(t, 4)
		cmd := envoyrlproc.Command(bin, envoyrlproc.Settings{HTTPPort: ports[0], GRPCPort: ports[1], DebugPort: ports[2],
			RedisAddr: srv.Addr(), RuntimeRoot: root})
		addr := "127.0.0.1:" + strconv.Itoa(ports[3])
		cmd.Env = append(cmd.Env, "USE_PROMETHEUS=true", "PROMETHEUS_ADDR="+addr, "PROMETHEUS_PATH=/metrics", "STATS_FLUSH_INTERVAL=100ms")
		logs := &syncbuf.Buffer{}
		exited := start(t, "envoyproxy/ratelimit", cmd, logs)
		s, err := dial(t, "envoyproxy/ratelimit", "127.0.0.1:"+strconv.Itoa(ports[1]), domain, exited, logs)
		if err == nil {
			return "http://" + addr + "/metrics", s
		}
		lastLogs = logs.String()
		if !strings.Contains(lastLogs, "address already in use") {
			t.Fatalf("envoyproxy/ratelimit exited at start:\n%s", lastLogs)
		}
	}
	t.Fatalf("envoyproxy/ratelimit found its ports taken three times:\n%s", lastLogs)
	return "", nil
}

var httpListening = regexp.MustCompile(`msg=listening addr=(\S+)`)

// startAdmitCompat is startAdmit with --metrics-mode envoy_compat; it returns its /metrics' URL too.
func startAdmitCompat(t *testing.T, srv *redistest.Server, files map[string]string, domain string) (string, *service) {
	t.Helper()
	bin := binary(t, "admit", "../..", "github.com/admit-dev/admit/cmd/admit")
	dir := t.TempDir()
	writeConfig(t, dir, files)
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--envoy-config", dir,
		"--grpc-listen", "127.0.0.1:0", "--redis", srv.URL(), "--metrics-mode", "envoy_compat")
	cmd.Env = append(withoutEnv(os.Environ(), "REDIS_URL", "ADMIT_HMAC_SECRET"), "ADMIT_HMAC_SECRET="+testSecret)
	logs := &syncbuf.Buffer{}
	exited := start(t, "admit", cmd, logs)
	deadline := time.Now().Add(startTimeout)
	for {
		h, g := httpListening.FindStringSubmatch(logs.String()), grpcListening.FindStringSubmatch(logs.String())
		if h != nil && g != nil {
			s, err := dial(t, "admit", g[1], domain, exited, logs)
			if err != nil {
				t.Fatalf("admit %v:\n%s", err, logs)
			}
			return "http://" + h[1] + "/metrics", s
		}
		select {
		case <-exited:
			t.Fatalf("admit exited at start:\n%s", logs)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("admit did not listen within %v:\n%s", startTimeout, logs)
		}
	}
}
