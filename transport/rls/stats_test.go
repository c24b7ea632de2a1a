package rls_test

import (
	"fmt"
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
	cfg, err := envoyconf.Parse(envoyconf.File{Name: "st.yaml", Data: []byte(statsConfig)})
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
		r := ask(t, c, "st", hits, desc(kv...))
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
	if v := total["st/ip_10.0.0.0//st.ip_10.0.0.0"]; v != 0 {
		t.Errorf("a value with a '.' is split as the mapping splits it: %v", total)
	}
	if v := total["st/ip_10/0/st.ip_10.0.0.0"]; v != 1 {
		t.Errorf("ip 10.0.0.0: %v hits, want 1 in domain st, key1 ip_10, key2 0\n%v", v, total)
	}
	if v := total["st/ip//st.ip"]; v != float64(n-metrics.MaxEnvoyDetailed) {
		t.Errorf("ip's own series: %v hits, want %d", v, n-metrics.MaxEnvoyDetailed)
	}
}
