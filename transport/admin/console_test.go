package admin_test

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/policyjson"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/admin"
)

// TestConsoleFiles checks the console's files: served without the token, each with its media type
// and the headers that keep the page to its own files, HEAD without a body, another method 405,
// another path below /ui 404.
func TestConsoleFiles(t *testing.T) {
	h, _ := newHandler(t, nil)
	for path, typ := range map[string]string{
		"/ui": "text/html", "/ui/": "text/html", "/ui/console.js": "text/javascript", "/ui/console.css": "text/css",
		"/ui/algorithms.svg": "image/svg+xml",
	} {
		rec := serve(h, call{method: http.MethodGet, target: path})
		hdr := rec.Header()
		if rec.Code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), typ) || rec.Body.Len() == 0 {
			t.Errorf("GET %s = %d %q, %d bytes; want 200 %s", path, rec.Code, hdr.Get("Content-Type"), rec.Body.Len(), typ)
		}
		if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") ||
			hdr.Get("X-Content-Type-Options") != "nosniff" || hdr.Get("Referrer-Policy") != "no-referrer" || hdr.Get("Set-Cookie") != "" {
			t.Errorf("GET %s: headers %v; want its CSP, nosniff, no referrer, no cookie", path, hdr)
		}
		if head := serve(h, call{method: http.MethodHead, target: path}); head.Code != http.StatusOK || head.Body.Len() != 0 {
			t.Errorf("HEAD %s = %d, %d bytes; want 200 and no body", path, head.Code, head.Body.Len())
		}
	}
	if rec := serve(h, call{method: http.MethodPost, target: "/ui"}); rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /ui = %d, Allow %q; want 405, GET, HEAD", rec.Code, rec.Header().Get("Allow"))
	}
	wantError(t, "GET /ui/secrets", serve(h, call{method: http.MethodGet, target: "/ui/secrets"}), http.StatusNotFound, "no console file /ui/secrets")
}

// get fetches path from h without the token and returns the body, failing t unless it is a 200.
func get(t *testing.T, h http.Handler, path string) string {
	t.Helper()
	rec := serve(h, call{method: http.MethodGet, target: path})
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s = %d", path, rec.Code)
	}
	return rec.Body.String()
}

// TestConsoleIsOffline checks that the console's files name no other origin: no script, style,
// font or picture from elsewhere, so that it works offline (the SVG namespace is a name, not a
// fetch). And that the page loads only its own two files.
func TestConsoleIsOffline(t *testing.T) {
	h, _ := newHandler(t, nil)
	page := get(t, h, "/ui")
	for _, path := range []string{"/ui", "/ui/console.js", "/ui/console.css", "/ui/algorithms.svg"} {
		body := strings.ReplaceAll(get(t, h, path), "http://www.w3.org/2000/svg", "")
		if m := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|@import|url\(`).FindString(body); m != "" {
			t.Errorf("%s names %q: the console must need nothing but its own files", path, m)
		}
	}
	var refs []string
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		refs = append(refs, m[1])
	}
	slices.Sort(refs)
	if want := []string{"/ui/algorithms.svg", "/ui/console.css", "/ui/console.js", "data:,"}; !slices.Equal(refs, want) {
		t.Errorf("the page loads %q; want %q", refs, want)
	}
}

// TestConsoleAlgorithmsPicture checks that the console's picture of the algorithms is
// docs/algorithms.svg, which internal/tools/algopicture keeps current: make pictures copies it.
func TestConsoleAlgorithmsPicture(t *testing.T) {
	h, _ := newHandler(t, nil)
	docs, err := os.ReadFile("../../docs/algorithms.svg")
	if err != nil {
		t.Fatal(err)
	}
	if get(t, h, "/ui/algorithms.svg") != string(docs) {
		t.Error("the console's algorithms.svg differs from docs/algorithms.svg: run make pictures and commit both")
	}
}

// TestConsoleCallsNeedTheToken reads every admin API call the console's script makes and checks
// that each is an endpoint of the API that answers 401 without the token, and answers with it.
func TestConsoleCallsNeedTheToken(t *testing.T) {
	h, _ := newHandler(t, nil)
	script := get(t, h, "/ui/console.js")
	calls := regexp.MustCompile(`"(GET|POST|PUT|DELETE)",\s*"(/v1/[a-z]+)`).FindAllStringSubmatch(script, -1)
	seen := map[string]bool{}
	for _, c := range calls {
		seen[c[1]+" "+c[2]] = true
	}
	want := []string{"DELETE /v1/overrides", "GET /v1/policies", "GET /v1/state", "GET /v1/stats", "GET /v1/top", "POST /v1/reset", "PUT /v1/overrides"}
	var got []string
	for k := range seen {
		got = append(got, k)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("the console calls %q; want %q", got, want)
	}
	if strings.Contains(script, "document.cookie") || strings.Contains(script, "localStorage") || strings.Contains(script, "innerHTML") {
		t.Error("the script uses cookies, localStorage or innerHTML: the token belongs in sessionStorage only, text is set as text")
	}
	for _, c := range want {
		method, path, _ := strings.Cut(c, " ")
		if rec := serve(h, call{method: method, target: path}); rec.Code != http.StatusUnauthorized {
			t.Errorf("%s without the token = %d; want 401", c, rec.Code)
		}
		if rec := serve(h, call{method: method, target: path, auth: bearer(testToken)}); rec.Code == http.StatusUnauthorized || rec.Code == http.StatusNotFound && !strings.Contains(rec.Body.String(), "counters") {
			t.Errorf("%s with the token = %d %s; want an answer of the endpoint", c, rec.Code, rec.Body)
		}
	}
}

// TestPolicies reads the policies in force: numbers, tiers, mode and failure mode as configured.
func TestPolicies(t *testing.T) {
	h, svc := newHandler(t, nil)
	rec := serve(h, call{method: http.MethodGet, target: "/v1/policies", auth: bearer(testToken)})
	var got admin.PoliciesResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &got); rec.Code != http.StatusOK || err != nil {
		t.Fatalf("GET /v1/policies = %d %s (%v)", rec.Code, rec.Body, err)
	}
	want := admin.PoliciesResponse{
		ConfigHash: svc.Config().Hash,
		Policies: []admin.PolicyInfo{
			{Policy: policyjson.Policy{Name: "per-minute", Algorithm: "fixed_window", Limit: 3, WindowMS: 60000, Mode: "enforce", Failure: "closed"},
				Tiers: []admin.TierInfo{{Name: "pro", Limit: 10, WindowMS: 60000}}},
			{Policy: policyjson.Policy{Name: "per-day", Algorithm: "gcra", Limit: 5, WindowMS: 86400000, Burst: 5, Mode: "shadow", Failure: "closed"}},
		},
		Top: admin.TopSettings{Size: policy.DefaultTopSize, PeriodMS: policy.DefaultTopPeriod.Milliseconds()},
	}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) || want.ConfigHash == "" {
		t.Errorf("GET /v1/policies:\n got %s\nwant %s", gotJSON, wantJSON)
	}
	wantError(t, "GET /v1/policies?x=1", serve(h, call{method: http.MethodGet, target: "/v1/policies?x=1", auth: bearer(testToken)}),
		http.StatusBadRequest, "takes no query")
}

// TestPoliciesFailOpen reads a policy failing open: its local limit is shown.
func TestPoliciesFailOpen(t *testing.T) {
	cfg, err := policy.Parse("open.yaml", []byte("server:\n  top: {size: 0}\npolicies:\n  - {name: login, algorithm: sliding_log, limit: 4, window: 10s, failure: open, local_limit: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := handlerOf(t, cfg, nil)
	rec := serve(h, call{method: http.MethodGet, target: "/v1/policies", auth: bearer(testToken)})
	if want := `"policies":[{"name":"login","algorithm":"sliding_log","limit":4,"window_ms":10000,"mode":"enforce","failure":"open","local_limit":2}],"top":{"size":0,`; !strings.Contains(rec.Body.String(), want) {
		t.Errorf("GET /v1/policies = %d %s; want it to hold %s", rec.Code, rec.Body, want)
	}
}

// handlerOf returns a Handler of testToken over a memstore Service under cfg, with stats.
func handlerOf(t *testing.T, cfg *policy.Config, stats func() ([]admin.Sample, error)) *admin.Handler {
	t.Helper()
	mem := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { mem.Close() })
	keys, err := admit.NewKeyBuilder([]byte("admin test secret of 32 bytes.."))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(mem, keys, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := admin.New(admin.Options{Service: svc, Token: []byte(testToken), Logger: slog.New(slog.DiscardHandler), Stats: stats})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestStats reads the counters Options.Stats returns, stamped with the time they were read; 404
// without Stats, 503 when it fails, 400 for a query.
func TestStats(t *testing.T) {
	cfg, err := policy.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	samples := []admin.Sample{
		{Name: "admit_decisions_total", Labels: map[string]string{"policy": "per-minute", "result": "limited"}, Value: 7},
		{Name: "admit_log_lines_dropped_total", Value: 0},
	}
	h := handlerOf(t, cfg, func() ([]admin.Sample, error) { return samples, nil })
	before := time.Now().UnixMilli()
	rec := serve(h, call{method: http.MethodGet, target: "/v1/stats", auth: bearer(testToken)})
	after := time.Now().UnixMilli()
	var got admin.StatsResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &got); rec.Code != http.StatusOK || err != nil {
		t.Fatalf("GET /v1/stats = %d %s (%v)", rec.Code, rec.Body, err)
	}
	gotJSON, _ := json.Marshal(got.Samples)
	wantJSON, _ := json.Marshal(samples)
	if string(gotJSON) != string(wantJSON) || got.TimeMS < before || got.TimeMS > after {
		t.Errorf("GET /v1/stats = %s at %d; want %s between %d and %d", gotJSON, got.TimeMS, wantJSON, before, after)
	}
	wantError(t, "GET /v1/stats?x", serve(h, call{method: http.MethodGet, target: "/v1/stats?x", auth: bearer(testToken)}), http.StatusBadRequest, "takes no query")

	failing := handlerOf(t, cfg, func() ([]admin.Sample, error) { return nil, errors.New("collector broke") })
	wantError(t, "GET /v1/stats, failing", serve(failing, call{method: http.MethodGet, target: "/v1/stats", auth: bearer(testToken)}),
		http.StatusServiceUnavailable, "cannot read the counters")

	none := handlerOf(t, cfg, nil)
	wantError(t, "GET /v1/stats without Stats", serve(none, call{method: http.MethodGet, target: "/v1/stats", auth: bearer(testToken)}),
		http.StatusNotFound, "no counters")
}
