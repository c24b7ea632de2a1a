package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/admit-dev/admit/internal/redistest"
)

// admit serve --redis with a Redis Cluster's URL (one node as host, the others as addr= seeds) and
// with a Sentinel URL (sentinels, master_set): the real binary is ready, serves the demo and
// POST /v1/check, and its counters land where the topology keeps them — on the master of the key's
// slot, on the primary the sentinels name.

func TestE2EServeRedisCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	testServeTopology(t, c.URL())
	key := demoKey(t, testSecret)
	wantCount(t, c.MasterOfKey(t, key), key, "3")
}

func TestE2EServeRedisSentinel(t *testing.T) {
	st := redistest.StartSentinel(t)
	testServeTopology(t, st.URL())
	wantCount(t, st.Primary(t), demoKey(t, testSecret), "3")
}

// testServeTopology starts admit serve on the Redis at url with serviceConfig and checks /readyz,
// the demo (200, 200, 200, 429) and POST /v1/check: one policy, two policies at once, a cost of 2.
func testServeTopology(t *testing.T, url string) {
	config := filepath.Join(t.TempDir(), "admit.yaml")
	writeConfig(t, config, fmt.Sprintf(serviceConfig, 3))
	p := startAdmit(t, "--config", config, "--redis", url)
	if r := get(t, p.base+"/readyz"); r.status != 200 {
		t.Fatalf("/readyz: %d %q; want 200", r.status, r.body)
	}
	checkDemo(t, p.base, 200, 200, 200, 429)
	for i := range 3 {
		if res := postCheck(t, p, `{"policy":"per-second","key":"alice"}`); res.status != 200 || !res.Allowed || res.Remaining != int64(2-i) {
			t.Fatalf("check %d: %+v; want 200, %d left", i, res, 2-i)
		}
	}
	if res := postCheck(t, p, `{"policies":["per-second","per-day"],"key":"alice"}`); res.status != 429 || res.Policy != "per-second" || len(res.Decisions) != 2 {
		t.Fatalf("over the limit: %+v; want 429 by per-second, two decisions", res)
	}
	if res := postCheck(t, p, `{"policies":["per-second","per-day"],"key":"bob","cost":2}`); res.status != 200 || !res.Allowed || len(res.Decisions) != 2 {
		t.Fatalf("bob, two policies, cost 2: %+v; want 200, two decisions", res)
	}
	if res := postCheck(t, p, `{"policy":"per-second","key":"bob"}`); res.status != 200 || res.Remaining != 0 {
		t.Fatalf("bob's last unit: %+v; want 200, 0 left", res)
	}
	if !strings.Contains(p.logs.String(), "backend=redis") {
		t.Errorf("the log lacks backend=redis")
	}
}
