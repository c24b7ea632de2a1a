package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/policy/envoyconf"
	"github.com/admit-dev/admit/transport/admin"
	"github.com/admit-dev/admit/transport/rls"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// adminDo sends method url with body and the bearer token, and returns the status and the body.
func adminDo(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, url, err)
	}
	return res.StatusCode, string(b)
}

// putOverride sets an override through the admin API at adminURL and returns it as answered.
func putOverride(t *testing.T, adminURL, body string) admin.OverrideResponse {
	t.Helper()
	status, answer := adminDo(t, http.MethodPut, adminURL+"/v1/overrides", testAdminToken, body)
	var o admin.OverrideResponse
	if err := json.Unmarshal([]byte(answer), &o); status != http.StatusOK || err != nil {
		t.Fatalf("PUT /v1/overrides %s = %d %s (%v); want 200", body, status, answer, err)
	}
	return o
}

// wantChecks checks subject under hourly on p, once per status of want, and returns the last answer.
func wantChecks(t *testing.T, p *proc, what, subject string, want ...int) checkResult {
	t.Helper()
	var r checkResult
	for i, status := range want {
		if r = postCheck(t, p, `{"policy":"hourly","key":"`+subject+`"}`); r.status != status {
			t.Fatalf("%s: check %d of %s: %d %+v; want %d", what, i+1, subject, r.status, r, status)
		}
	}
	return r
}

// TestE2EOverrideAcrossInstances runs two admit serve processes on one Redis, A with the admin API.
// An override set through A changes B's very next decision of a subject B had not refused (the
// override is read with the state, in one script call), and, for a subject B had refused and
// cached, the next decision once B heard the override on rl:reset (polled for at most 10 s, as
// TestE2EResetAcrossInstances polls for a reset); an override that expires stops deciding by itself
// (its expiry measured on the clock, not assumed from a sleep); a delete through A restores the
// policy's numbers on B.
func TestE2EOverrideAcrossInstances(t *testing.T) {
	s := redistest.Start(t)
	config := filepath.Join(t.TempDir(), "admit.yaml")
	writeConfig(t, config, hourlyConfig)
	a := startAdmitEnv(t, admitEnv(secretEnv+"="+testSecret, adminTokenEnv+"="+testAdminToken),
		"--redis", s.URL(), "--config", config, "--admin-listen", "127.0.0.1:0")
	adminURL := "http://" + a.logs.waitAdminAddr(t)
	b := startAdmit(t, "--redis", s.URL(), "--config", config)
	for deadline := time.Now().Add(30 * time.Second); resetSubscribers(t, s) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections subscribed to rl:reset after 30 s; want 2, one per instance", resetSubscribers(t, s))
		}
	}

	// bob: spent on B but never refused there, so B caches nothing: B's next decision is the override's.
	wantChecks(t, b, "bob within the policy", "bob", 200, 200)
	putOverride(t, adminURL, `{"policy":"hourly","key":"bob","limit":4,"reason":"e2e"}`)
	if r := wantChecks(t, b, "bob right after the override", "bob", 200); r.Remaining != 1 {
		t.Errorf("bob under the override of 4 after 3 checks: %+v; want 1 remaining", r)
	}

	// alice: refused on B until its over-limit cache answers; the override makes B forget it.
	wantChecks(t, b, "alice filled", "alice", 200, 200, 429, 429, 429)
	if hits, ok := overLimitHits(t, b); !ok || hits < 1 {
		t.Fatalf("B's over-limit cache hits: %d (series present: %v); want its 429s answered from the cache", hits, ok)
	}
	putOverride(t, adminURL, `{"policy":"hourly","key":"alice","limit":20,"reason":"e2e"}`)
	start := time.Now()
	for attempt := 1; ; attempt++ {
		r := postCheck(t, b, `{"policy":"hourly","key":"alice"}`)
		took := time.Since(start)
		if r.status == http.StatusOK {
			t.Logf("B admitted alice on check %d after the override, %v after A answered it", attempt, took.Round(time.Microsecond))
			break
		}
		if took > 10*time.Second {
			t.Fatalf("B still answers %d %+v %v after the override through A (check %d); want 200: B did not forget its cached rejection",
				r.status, r, took.Round(time.Millisecond), attempt)
		}
		time.Sleep(5 * time.Millisecond)
	}

	// carol: an override of 2 s, which expires by itself.
	wantChecks(t, b, "carol within the policy", "carol", 200, 200)
	set := time.Now()
	o := putOverride(t, adminURL, `{"policy":"hourly","key":"carol","limit":50,"expires_in":"2s"}`)
	expires, err := time.Parse(time.RFC3339Nano, o.ExpiresAt)
	if err != nil || expires.Before(set) || expires.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("carol's override expires at %q (%v); want within 2 s of the PUT", o.ExpiresAt, err)
	}
	r := postCheck(t, b, `{"policy":"hourly","key":"carol"}`)
	if before := time.Now().Before(expires.Add(-100 * time.Millisecond)); before && r.status != http.StatusOK {
		t.Errorf("carol before the override expired: %d %+v; want 200", r.status, r)
	} else if !before {
		t.Logf("the check of carol came %v after the PUT, too close to the expiry to tell", time.Since(set))
	}
	for time.Now().Before(expires.Add(50 * time.Millisecond)) {
		time.Sleep(time.Until(expires.Add(50 * time.Millisecond)))
	}
	wantChecks(t, b, "carol after the expiry", "carol", 429)
	status, body := adminDo(t, http.MethodGet, adminURL+"/v1/state?policy=hourly&key=carol", testAdminToken, "")
	if status != http.StatusOK || !strings.Contains(body, `"source":"policy"`) {
		t.Errorf("carol's state after the expiry: %d %s; want source policy", status, body)
	}

	// A delete through A: alice is back under the policy's 2 on B.
	status, body = adminDo(t, http.MethodDelete, adminURL+"/v1/overrides", testAdminToken, `{"policy":"hourly","key":"alice"}`)
	if status != http.StatusOK {
		t.Fatalf("DELETE /v1/overrides = %d %s; want 200", status, body)
	}
	wantChecks(t, b, "alice after the delete", "alice", 429)
	status, body = adminDo(t, http.MethodGet, adminURL+"/v1/overrides?policy=hourly", testAdminToken, "")
	var list admin.OverridesResponse
	if err := json.Unmarshal([]byte(body), &list); status != http.StatusOK || err != nil || len(list.Overrides) != 1 || list.Overrides[0].Limit != 4 {
		t.Errorf("the listing at the end: %d %s (%v); want bob's override alone", status, body, err)
	}
	if strings.Contains(a.logs.String(), `"alice"`) || strings.Contains(a.logs.String(), "key=alice") {
		t.Errorf("A's log holds a subject:\n%s", a.logs)
	}
}

// TestE2EEnvoyOverride runs admit serve --envoy-config with the admin API: a descriptor spent under
// its rule is admitted again once an override is set through the admin API, addressed by the
// rule's name and the descriptor's key (rls.DescriptorKey), and limited again once it is deleted.
func TestE2EEnvoyOverride(t *testing.T) {
	dir := t.TempDir()
	yaml := "domain: mongo_cps\ndescriptors:\n  - key: database\n    value: users\n    rate_limit:\n      name: users-db\n      unit: day\n      requests_per_unit: 2\n"
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startAdmitEnv(t, admitEnv(secretEnv+"="+testSecret, adminTokenEnv+"="+testAdminToken),
		"--envoy-config", dir, "--grpc-listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0")
	adminURL := "http://" + p.logs.waitAdminAddr(t)
	p.logs.waitLine(t, "listening for gRPC")
	m := grpcListeningRE.FindStringSubmatch(p.logs.String())
	if m == nil {
		t.Fatalf("no gRPC address in the log:\n%s", p.logs)
	}
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := rlsv3.NewRateLimitServiceClient(conn)
	ask := func(what string, want rlsv3.RateLimitResponse_Code) *rlsv3.RateLimitResponse {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		resp, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "mongo_cps", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "database", Value: "users"}},
		}}})
		if err != nil || resp.OverallCode != want {
			t.Fatalf("%s: ShouldRateLimit = %v, %v; want %v", what, resp, err, want)
		}
		return resp
	}
	ask("request 1", rlsv3.RateLimitResponse_OK)
	ask("request 2", rlsv3.RateLimitResponse_OK)
	ask("request 3, over the rule's 2", rlsv3.RateLimitResponse_OVER_LIMIT)
	key := rls.DescriptorKey("mongo_cps", envoyconf.Entry{Key: "database", Value: "users"})
	body, _ := json.Marshal(admin.OverrideRequest{Policy: "users-db", Key: key, Limit: 5, Reason: "batch import"})
	o := putOverride(t, adminURL, string(body))
	if o.Policy != "users-db" || o.Limit != 5 {
		t.Errorf("the override as stored: %+v", o)
	}
	if r := ask("under the override of 5", rlsv3.RateLimitResponse_OK); r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 5 {
		t.Errorf("under the override: current_limit %v; want 5 per day", r.Statuses[0].CurrentLimit)
	}
	body, _ = json.Marshal(admin.OverrideDeleteRequest{Policy: "users-db", Key: key})
	if status, answer := adminDo(t, http.MethodDelete, adminURL+"/v1/overrides", testAdminToken, string(body)); status != http.StatusOK {
		t.Fatalf("DELETE /v1/overrides = %d %s; want 200", status, answer)
	}
	ask("after the delete", rlsv3.RateLimitResponse_OVER_LIMIT)
	body, _ = json.Marshal(admin.OverrideRequest{Policy: "no-such-rule", Key: key, Limit: 5})
	if status, answer := adminDo(t, http.MethodPut, adminURL+"/v1/overrides", testAdminToken, string(body)); status != http.StatusBadRequest || !strings.Contains(answer, `unknown policy \"no-such-rule\"`) {
		t.Errorf("an override of a name no rule has = %d %s; want 400 unknown policy", status, answer)
	}
}
