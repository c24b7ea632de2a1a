package rls_test

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/metrics"
	"github.com/admit-dev/admit/policy/envoyconf"
	"github.com/admit-dev/admit/transport/rls"
)

// statsConfig has rules of one and two levels, one in shadow_mode, one with detailed_metric, one
// without (a key alone, any value), and an unlimited one.
const statsConfig = `domain: st
descriptors:
  - key: database
    value: users
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: ip
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
  - key: a
    descriptors:
      - key: b
        value: c
        rate_limit: {unit: hour, requests_per_unit: 5}
`

// statsServe serves statsConfig on store with its stats in a metrics.EnvoyStats of a registry of
// its own, and returns a client and a function gathering the series: by metric name, the value of
// each series by its labels domain/key1/key2/key.
func statsServe(t *testing.T, store admit.Store) (send func(hits uint32, kv ...string) []string, gather func() map[string]map[string]float64) {
	t.Helper()
	return statsServeOf(t, store, "st", statsConfig)
}

// statsServeOf is statsServe of the configuration yaml of domain.
func statsServeOf(t *testing.T, store admit.Store, domain, yaml string) (send func(hits uint32, kv ...string) []string, gather func() map[string]map[string]float64) {
	t.Helper()
	cfg, err := envoyconf.Parse(envoyconf.File{Name: domain + ".yaml", Data: []byte(yaml)})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	stats, err := metrics.NewEnvoyStats(reg)
	if err != nil {
		t.Fatal(err)
	}
	s := newServerOpts(t, store, cfg, rls.Options{Stats: func(rule, key string, c rls.Counts) { stats.Add(rule, key, metrics.EnvoyCounts(c)) }})
	c, _ := serveServer(t, s)
	send = func(hits uint32, kv ...string) []string {
		t.Helper()
		r := ask(t, c, domain, hits, desc(kv...))
		codes := []string{r.OverallCode.String()}
		for _, st := range r.Statuses {
			codes = append(codes, st.Code.String())
		}
		return codes
	}
	gather = func() map[string]map[string]float64 {
		t.Helper()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]map[string]float64{}
		for _, f := range fams {
			series := map[string]float64{}
			for _, m := range f.GetMetric() {
				l := map[string]string{}
				for _, p := range m.GetLabel() {
					l[p.GetName()] = p.GetValue()
				}
				series[l["domain"]+"/"+l["key1"]+"/"+l["key2"]+"/"+l["key"]] = m.GetCounter().GetValue()
			}
			out[f.GetName()] = series
		}
		return out
	}
	return send, gather
}

// TestEnvoyStatsNamesAndLabels: after a few decisions, envoyproxy/ratelimit's names, with the
// labels its mapping gives a key of one level and of two, counted as it counts them.
func TestEnvoyStatsNamesAndLabels(t *testing.T) {
	stores(t, func(t *testing.T, store admit.Store) {
		ask, gather := statsServe(t, store)
		for i, want := range []string{"OK", "OK", "OVER_LIMIT"} { // 2 per hour
			if got := ask(1, "database", "users"); got[0] != want {
				t.Fatalf("database %d: %v, want %s", i, got, want)
			}
		}
		for range 2 { // 1 per hour, in shadow mode: the second is over, OK
			if got := ask(1, "shadow", "s"); got[0] != "OK" {
				t.Fatalf("shadow: %v", got)
			}
		}
		ask(2, "a", "x", "b", "c")
		ask(1, "free", "f") // unlimited: no series
		ask(1, "nothing", "n")
		want := map[string]map[string]float64{
			"ratelimit_service_rate_limit_total_hits":   {"st/database_users//st.database_users": 3, "st/shadow//st.shadow": 2, "st/a/b_c/st.a.b_c": 2},
			"ratelimit_service_rate_limit_within_limit": {"st/database_users//st.database_users": 2, "st/shadow//st.shadow": 1, "st/a/b_c/st.a.b_c": 2},
			// near: past floor(0.8 × limit): the second of 2 (past 1), the hit of 1 (past 0), none of 2 of 5 (past 4).
			"ratelimit_service_rate_limit_near_limit":  {"st/database_users//st.database_users": 1, "st/shadow//st.shadow": 1, "st/a/b_c/st.a.b_c": 0},
			"ratelimit_service_rate_limit_over_limit":  {"st/database_users//st.database_users": 1, "st/shadow//st.shadow": 1, "st/a/b_c/st.a.b_c": 0},
			"ratelimit_service_rate_limit_shadow_mode": {"st/database_users//st.database_users": 0, "st/shadow//st.shadow": 1, "st/a/b_c/st.a.b_c": 0},
		}
		got := gather()
		for name, series := range want {
			if len(got[name]) != len(series) {
				t.Errorf("%s: series %v, want %v", name, got[name], series)
				continue
			}
			for labels, v := range series {
				if g, ok := got[name][labels]; !ok || g != v {
					t.Errorf("%s{%s} = %v (present %v), want %v", name, labels, g, ok, v)
				}
			}
		}
	})
}

// TestEnvoyStatsBounded: many distinct values of a rule without detailed_metric make one series;
// with detailed_metric, a series per value, at most metrics.MaxEnvoyDetailed, the others counted
// in the rule's own; a limit override with no rule is counted by its keys, not its values.
func TestEnvoyStatsBounded(t *testing.T) {
	ask, gather := statsServe(t, memStore(t))
	n := metrics.MaxEnvoyDetailed + 50
	for i := range n {
		ask(1, "user", fmt.Sprintf("u%d", i))
		ask(1, "ip", fmt.Sprintf("10.0.0.%d", i))
		ask(1, "user", fmt.Sprintf("u%d", i), "session", fmt.Sprintf("s%d", i)) // no rule: no series
	}
	total := gather()["ratelimit_service_rate_limit_total_hits"]
	if v := total["st/user//st.user"]; v != float64(n) {
		t.Errorf("user: %v hits, want %d in one series", v, n)
	}
	perValue, sum := 0, 0.0
	for labels, v := range total {
		if labels != "st/user//st.user" {
			sum += v
		}
		if labels != "st/user//st.user" && labels != "st/ip//st.ip" {
			perValue++
		}
	}
	if perValue != metrics.MaxEnvoyDetailed || sum != float64(n) {
		t.Errorf("ip: %d series of values holding, with the rule's, %v hits; want %d of them and %d hits\n%v", perValue, sum, metrics.MaxEnvoyDetailed, n, total)
	}
	if v := total["st/ip_10_0_0_0//st.ip_10_0_0_0"]; v != 1 {
		t.Errorf("ip 10.0.0.0: %v hits, want 1 in st.ip_10_0_0_0, its dots made '_' as envoyproxy/ratelimit names it\n%v", v, total)
	}
	if v := total["st/ip//st.ip"]; v != float64(n-metrics.MaxEnvoyDetailed) {
		t.Errorf("ip's own series: %v hits, want %d", v, n-metrics.MaxEnvoyDetailed)
	}
}

// valueToMetricConfig has value_to_metric at the top, in the middle, on a wildcard, under
// share_threshold, and under a detailed_metric rule, which wins.
const valueToMetricConfig = `domain: vm
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {unit: hour, requests_per_unit: 60}
      - key: detailed
        descriptors:
          - key: subject_id
            detailed_metric: true
            rate_limit: {unit: hour, requests_per_unit: 60}
  - key: k1
    descriptors:
      - key: k2
        value_to_metric: true
        descriptors:
          - key: k3
            rate_limit: {unit: hour, requests_per_unit: 1}
      - key: plain
        rate_limit: {unit: hour, requests_per_unit: 1}
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: read*
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit: {unit: hour, requests_per_unit: 100}
      - key: shared
        value: s*
        share_threshold: true
        value_to_metric: true
        rate_limit: {unit: hour, requests_per_unit: 100}
      - key: fixed
        value: f1
        rate_limit: {unit: hour, requests_per_unit: 100}
`

// TestEnvoyStatsValueToMetric: value_to_metric names a rule's series as envoyproxy/ratelimit's
// value_to_metric key names its stats (its own tests' keys): the request's value at each level that
// sets it, the value as written where the descriptor has one (a wildcard's pattern under
// share_threshold), the key alone elsewhere; detailed_metric wins; bounded as detailed_metric is.
func TestEnvoyStatsValueToMetric(t *testing.T) {
	stores(t, func(t *testing.T, store admit.Store) {
		ask, gather := statsServeOf(t, store, "vm", valueToMetricConfig)
		for _, kv := range [][]string{
			{"route", "draw", "http_method", "GET", "subject_id", "123"},
			{"route", "draw", "detailed", "x", "subject_id", "123"},
			{"k1", "X", "k2", "Y", "k3", "Z"},
			{"k1", "X", "plain", "P"},
			{"user", "alice", "action", "readfile", "resource", "documents"},
			{"user", "bob", "shared", "sa"},
			{"user", "bob", "shared", "sb"},
			{"user", "carol", "fixed", "f1"},
		} {
			if got := ask(1, kv...); got[0] != "OK" {
				t.Fatalf("%v: %v", kv, got)
			}
		}
		want := map[string]float64{
			"vm.route_draw.http_method_GET.subject_id": 1,
			"vm.route_draw.detailed_x.subject_id_123":  1, // detailed_metric: every value
			"vm.k1.k2_Y.k3":                          1,
			"vm.k1.plain":                            1, // no value_to_metric on its path: the rule's key
			"vm.user_alice.action_readfile.resource": 1,
			"vm.user_bob.shared_s*":                  2, // share_threshold: the wildcard as written
			"vm.user_carol.fixed_f1":                 1,
		}
		total := gather()["ratelimit_service_rate_limit_total_hits"]
		got := map[string]float64{}
		for labels, v := range total {
			got[labels[strings.LastIndexByte(labels, '/')+1:]] = v
		}
		if !maps.Equal(got, want) {
			t.Errorf("series by key %v, want %v", got, want)
		}
		// The mapping's labels split the key at '.' as for any other.
		if v := total["vm/route_draw/http_method_GET/vm.route_draw.http_method_GET.subject_id"]; v != 1 {
			t.Errorf("labels of the value_to_metric key: %v", total)
		}
	})
}

// TestEnvoyStatsValueToMetricBounded: a rule with value_to_metric has at most
// metrics.MaxEnvoyDetailed series of values, the hits of further values counted in its own.
func TestEnvoyStatsValueToMetricBounded(t *testing.T) {
	ask, gather := statsServeOf(t, memStore(t), "vm", valueToMetricConfig)
	n := metrics.MaxEnvoyDetailed + 30
	for i := range n {
		ask(1, "k1", "X", "k2", fmt.Sprintf("y%d", i), "k3", "Z")
	}
	total := gather()["ratelimit_service_rate_limit_total_hits"]
	series, sum := 0, 0.0
	for labels, v := range total {
		sum += v
		if strings.HasSuffix(labels, "/vm.k1.k2.k3") {
			if v != float64(n-metrics.MaxEnvoyDetailed) {
				t.Errorf("the rule's own series: %v hits, want %d", v, n-metrics.MaxEnvoyDetailed)
			}
			continue
		}
		series++
	}
	if series != metrics.MaxEnvoyDetailed || sum != float64(n) || len(total) != metrics.MaxEnvoyDetailed+1 {
		t.Errorf("%d series of values, %v hits in %d series; want %d, %d in %d", series, sum, len(total), metrics.MaxEnvoyDetailed, n, metrics.MaxEnvoyDetailed+1)
	}
}

// TestEnvoyStatsSanitized: a stats key is named as envoyproxy/ratelimit's stats name it: ':' and
// '|' are '_', and so are the dots of an IPv4 address; other dots part the key, as the mapping
// parts it.
func TestEnvoyStatsSanitized(t *testing.T) {
	ask, gather := statsServe(t, memStore(t))
	for _, ip := range []string{"fe80::1", "a|b", "v1.2", "192.168.0.1:8080"} {
		ask(1, "ip", ip)
	}
	want := map[string]float64{
		"st/ip_fe80__1//st.ip_fe80__1":                   1,
		"st/ip_a_b//st.ip_a_b":                           1,
		"st/ip_v1/2/st.ip_v1.2":                          1,
		"st/ip_192_168_0_1_8080//st.ip_192_168_0_1_8080": 1,
	}
	if got := gather()["ratelimit_service_rate_limit_total_hits"]; !maps.Equal(got, want) {
		t.Errorf("series %v, want %v", got, want)
	}
}
