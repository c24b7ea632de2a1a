package admin_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/admin"
)

// testToken is the admin token of the tests' Handlers.
const testToken = "admin-token-of-the-tests-0123456789"

// testConfig has a policy with a tier beside one without.
const testConfig = `
policies:
  - name: per-minute
    algorithm: fixed_window
    limit: 3
    window: 1m
    tiers:
      pro:
        limit: 10
  - name: per-day
    algorithm: gcra
    limit: 5
    window: 24h
    mode: shadow
`

// newHandler returns a Handler of testToken over a Service on store (a new memstore for nil) under
// testConfig, and the Service.
func newHandler(t *testing.T, store admit.Store) (*admin.Handler, *service.Service) {
	t.Helper()
	if store == nil {
		mem := memstore.New(memstore.Options{SweepInterval: -1})
		t.Cleanup(func() { mem.Close() })
		store = mem
	}
	keys, err := admit.NewKeyBuilder([]byte("admin test secret of 32 bytes.."))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := policy.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(store, keys, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := admin.New(admin.Options{Service: svc, Token: []byte(testToken), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return h, svc
}

// A call is one request to a Handler.
type call struct {
	method, target string
	auth           []string  // the Authorization fields; nil for none
	remote         string    // the client's host:port; "" for 192.0.2.1:1234
	body           io.Reader // nil for none
}

// bearer returns the Authorization field of token.
func bearer(token string) []string { return []string{"Bearer " + token} }

// serve sends c to h and returns the answer.
func serve(h http.Handler, c call) *httptest.ResponseRecorder {
	r := httptest.NewRequest(c.method, c.target, c.body)
	for _, v := range c.auth {
		r.Header.Add("Authorization", v)
	}
	if c.remote != "" {
		r.RemoteAddr = c.remote
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// getState sends GET target with testToken and decodes a 200 answer.
func getState(t *testing.T, h http.Handler, target string) admin.StateResponse {
	t.Helper()
	rec := serve(h, call{method: http.MethodGet, target: target, auth: bearer(testToken)})
	var out admin.StateResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &out); rec.Code != http.StatusOK || err != nil {
		t.Fatalf("GET %s = %d %s (%v); want 200 and a state", target, rec.Code, rec.Body, err)
	}
	return out
}

// wantError checks that rec is status with the JSON error msg, not to be cached.
func wantError(t *testing.T, what string, rec *httptest.ResponseRecorder, status int, msg string) {
	t.Helper()
	var e admin.ErrorResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != status || !strings.Contains(e.Error, msg) ||
		rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("%s = %d %s %q; want %d, a JSON error saying %q", what, rec.Code, rec.Header(), rec.Body, status, msg)
	}
}

// TestState reads subjects' states: every policy, one, one's tier, with the numbers in force and
// their source; and the reads consume nothing.
func TestState(t *testing.T) {
	h, svc := newHandler(t, nil)
	for range 3 {
		if _, err := svc.Check(t.Context(), service.Check{Policies: []string{"per-minute", "per-day"}, Subject: admit.Subject{ID: "alice"}, Cost: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		all := getState(t, h, "/v1/state?key=alice")
		if len(all.Decisions) != 2 {
			t.Fatalf("decisions %+v; want 2", all.Decisions)
		}
		minute, day := all.Decisions[0], all.Decisions[1]
		if minute.Policy != "per-minute" || minute.Source != "policy" || minute.Tier != "" || minute.Algorithm != "fixed_window" ||
			minute.Limit != 3 || minute.WindowMS != 60000 || minute.Remaining != 0 || !minute.Limited ||
			minute.ResetAfterMS <= 0 || minute.ResetAfterMS > 60000 || minute.RetryAfterMS != 0 || minute.Shadow {
			t.Errorf("per-minute %+v; want 3 per 60000 ms from the policy, spent, a reset within the window", minute)
		}
		if day.Policy != "per-day" || day.Source != "policy" || day.Algorithm != "gcra" || day.Limit != 5 ||
			day.Remaining != 2 || day.Limited || day.RetryAfterMS != 0 || !day.Shadow {
			t.Errorf("per-day %+v; want 2 of 5 left, in shadow mode", day)
		}
	}
	pro := getState(t, h, "/v1/state?policy=per-minute&key=alice&tier=pro")
	if len(pro.Decisions) != 1 || pro.Decisions[0] != (admin.PolicyState{Policy: "per-minute", Tier: "pro", Source: "tier",
		Algorithm: "fixed_window", Limit: 10, WindowMS: 60000, Remaining: 7, ResetAfterMS: pro.Decisions[0].ResetAfterMS}) {
		t.Errorf("tier pro: %+v; want the tier's 10, 7 left on the policy's count", pro.Decisions)
	}
	bob := getState(t, h, "/v1/state?policy=per-minute&key=bob")
	if len(bob.Decisions) != 1 || bob.Decisions[0].Remaining != 3 || bob.Decisions[0].Limited {
		t.Errorf("bob: %+v; want 3 left", bob.Decisions)
	}
}

// TestStateBadQueries checks that each mistake in a query is a 400 or 404 that names it.
func TestStateBadQueries(t *testing.T) {
	h, _ := newHandler(t, nil)
	for _, c := range []struct {
		query  string
		status int
		msg    string
	}{
		{"", 400, "key is required"},
		{"policy=per-minute", 400, "key is required"},
		{"key=", 400, "key is required"},
		{"key=alice&cost=1", 400, `unknown query parameter "cost"`},
		{"key=alice&key=bob", 400, "key given 2 times"},
		{"key=alice&policy=", 400, "policy and tier, when given, name one"},
		{"key=alice&policy=per-minute&tier=", 400, "policy and tier, when given, name one"},
		{"key=alice&tier=pro", 400, `tier "pro" names no policy`},
		{"key=%zz", 400, "malformed query"},
		{"key=alice&policy=per-hour", 404, `unknown policy "per-hour"`},
		{"key=alice&policy=per-minute&tier=gold", 404, `unknown tier "gold" for policy "per-minute"`},
		{"key=alice&policy=per-day&tier=pro", 404, `unknown tier "pro" for policy "per-day"`},
	} {
		rec := serve(h, call{method: http.MethodGet, target: "/v1/state?" + c.query, auth: bearer(testToken)})
		wantError(t, "GET /v1/state?"+c.query, rec, c.status, c.msg)
	}
}

// TestStateUnavailable checks that a Store that cannot decide is a 503 with a Retry-After.
func TestStateUnavailable(t *testing.T) {
	down, err := redisstore.New(redisstore.Config{URL: "redis://" + redistest.ClosedPort(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	h, _ := newHandler(t, down)
	rec := serve(h, call{method: http.MethodGet, target: "/v1/state?key=alice", auth: bearer(testToken)})
	wantError(t, "GET /v1/state on a closed port", rec, http.StatusServiceUnavailable, "limiter unavailable")
	if ra := rec.Header().Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After %q; want 1", ra)
	}
}

// TestUnauthorized checks that every request without the right token is a bare 401, whatever its
// path: it learns nothing, not even which endpoints exist.
func TestUnauthorized(t *testing.T) {
	h, _ := newHandler(t, nil)
	for i, c := range []call{
		{method: "GET", target: "/v1/state?key=alice"},
		{method: "GET", target: "/v1/state?key=alice", auth: bearer("wrong-token-of-the-tests-0123456789")},
		{method: "GET", target: "/v1/state?key=alice", auth: bearer(testToken + " ")},
		{method: "GET", target: "/v1/state?key=alice", auth: []string{"Basic " + testToken}},
		{method: "GET", target: "/v1/state?key=alice", auth: []string{testToken}},
		{method: "GET", target: "/v1/state?key=alice", auth: []string{"Bearer"}},
		{method: "GET", target: "/v1/state?key=alice", auth: []string{"Bearer " + testToken, "Bearer " + testToken}}, // one field, or none
		{method: "GET", target: "/v1/state?key=alice&token=" + testToken},
		{method: "GET", target: "/v1/nothing-here", auth: bearer("x")},
		{method: "DELETE", target: "/v1/state", auth: bearer("x")},
		{method: "PUT", target: "/v1/state", auth: bearer("x"), body: bytes.NewReader(make([]byte, admin.MaxBody+1))},
		{method: "PUT", target: "/v1/overrides", body: strings.NewReader(`{"policy":"per-minute","key":"k","limit":9}`)},
		{method: "DELETE", target: "/v1/overrides", auth: bearer("x"), body: strings.NewReader(`{"policy":"per-minute","key":"k"}`)},
		{method: "GET", target: "/v1/overrides?policy=per-minute", auth: bearer(testToken[1:])},
		{method: "GET", target: "/v1/policies"},
		{method: "GET", target: "/v1/stats", auth: bearer("x")},
		{method: "GET", target: "/uix"},
	} {
		c.remote = fmt.Sprintf("192.0.2.%d:1234", i+1) // each within its budget of failures
		rec := serve(h, c)
		if rec.Code != http.StatusUnauthorized || rec.Body.String() != `{"error":"unauthorized"}`+"\n" ||
			rec.Header().Get("WWW-Authenticate") != "Bearer" || rec.Header().Get("Allow") != "" {
			t.Errorf("%s %s with %q = %d %v %q; want a bare 401", c.method, c.target, c.auth, rec.Code, rec.Header(), rec.Body)
		}
	}
	// Lower case scheme is the same scheme (RFC 9110): the right token passes.
	if rec := serve(h, call{method: "GET", target: "/v1/state?key=alice", auth: []string{"bearer " + testToken}}); rec.Code != http.StatusOK {
		t.Errorf("with bearer in lower case: %d %s; want 200", rec.Code, rec.Body)
	}
}

// TestWrongTokenOfEachLength checks that a wrong token of every length, shorter and longer than the
// right one, is refused: among them each prefix of the right token, the right token with a byte
// more, and the right token with its last byte changed. (The comparison is of SHA-256 digests, equal
// in length whatever the token, in constant time: the length leaks nothing by construction.)
func TestWrongTokenOfEachLength(t *testing.T) {
	h, _ := newHandler(t, nil)
	var wrong []string
	for n := range 2*len(testToken) + 2 {
		wrong = append(wrong, strings.Repeat("x", n))
		if n < len(testToken) {
			wrong = append(wrong, testToken[:n])
		}
	}
	wrong = append(wrong, testToken+"x", testToken[:len(testToken)-1]+"8", testToken+"\n")
	for i, tok := range wrong {
		remote := fmt.Sprintf("[2001:db8:%x::1]:1234", i) // each in a /64 of its own: within its budget
		rec := serve(h, call{method: "GET", target: "/v1/state?key=alice", auth: bearer(tok), remote: remote})
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("a token of %d bytes (%q) = %d; want 401", len(tok), tok, rec.Code)
		}
	}
	if rec := serve(h, call{method: "GET", target: "/v1/state?key=alice", auth: bearer(testToken)}); rec.Code != http.StatusOK {
		t.Errorf("the right token = %d %s; want 200", rec.Code, rec.Body)
	}
}

// TestFailuresRateLimited checks the budget of failures per client address, on a fake clock: 401
// for FailureLimit failures, then 429 with a Retry-After for every request from the address, the
// right token included, until FailureWindow has passed since its first failure; another address,
// meanwhile, is served. An IPv6 client is counted by its /64.
func TestFailuresRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := newHandler(t, nil)
		for _, c := range []struct{ name, first, again string }{
			{"IPv4", "198.51.100.7:1000", "198.51.100.7:2000"},
			{"IPv6 in one /64", "[2001:db8:1:2::1]:1000", "[2001:db8:1:2:ffff::9]:2000"},
			{"IPv4 mapped in IPv6", "[::ffff:198.51.100.8]:1000", "198.51.100.8:2000"},
		} {
			ask := func(remote, token string) *httptest.ResponseRecorder {
				return serve(h, call{method: "GET", target: "/v1/state?key=alice", auth: bearer(token), remote: remote})
			}
			for i := range admin.FailureLimit {
				if rec := ask(c.first, "wrong-token-0123456789"); rec.Code != http.StatusUnauthorized {
					t.Fatalf("%s: failure %d = %d; want 401", c.name, i+1, rec.Code)
				}
				time.Sleep(time.Second)
			}
			for _, token := range []string{"wrong-token-0123456789", testToken} {
				rec := ask(c.again, token)
				ra, err := strconv.Atoi(rec.Header().Get("Retry-After"))
				wantError(t, c.name+": over the budget", rec, http.StatusTooManyRequests, "too many requests without the right token")
				if want := int(admin.FailureWindow/time.Second) - admin.FailureLimit; err != nil || ra != want {
					t.Errorf("%s: Retry-After %q; want %d, the rest of the window", c.name, rec.Header().Get("Retry-After"), want)
				}
			}
			if rec := ask("203.0.113.1:1000", testToken); rec.Code != http.StatusOK {
				t.Errorf("%s: another address = %d; want 200", c.name, rec.Code)
			}
			time.Sleep(admin.FailureWindow - admin.FailureLimit*time.Second)
			if rec := ask(c.again, testToken); rec.Code != http.StatusOK {
				t.Errorf("%s: after the window: the right token = %d %s; want 200", c.name, rec.Code, rec.Body)
			}
			if rec := ask(c.again, "wrong-token-0123456789"); rec.Code != http.StatusUnauthorized {
				t.Errorf("%s: after the window: a wrong token = %d; want 401, a new budget", c.name, rec.Code)
			}
		}
	})
}

// TestRoutes checks the answers of an authorized request to an unknown path and with another
// method: JSON 404 and 405 with Allow.
func TestRoutes(t *testing.T) {
	h, _ := newHandler(t, nil)
	for _, path := range []string{"/", "/v1/nothing", "/v1/state/", "/v1/overrides/", "/v1/reset/"} {
		wantError(t, "GET "+path, serve(h, call{method: "GET", target: path, auth: bearer(testToken)}), http.StatusNotFound, fmt.Sprintf("no admin endpoint %q", path))
	}
	for _, method := range []string{"POST", "PUT", "DELETE", "HEAD"} {
		rec := serve(h, call{method: method, target: "/v1/state?key=alice", auth: bearer(testToken)})
		if method == "HEAD" {
			if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET" {
				t.Errorf("HEAD /v1/state = %d, Allow %q; want 405, GET", rec.Code, rec.Header().Get("Allow"))
			}
			continue
		}
		wantError(t, method+" /v1/state", rec, http.StatusMethodNotAllowed, "/v1/state answers GET only")
		if a := rec.Header().Get("Allow"); a != "GET" {
			t.Errorf("%s /v1/state: Allow %q; want GET", method, a)
		}
	}
	for _, method := range []string{"GET", "PUT", "DELETE"} {
		rec := serve(h, call{method: method, target: "/v1/reset", auth: bearer(testToken)})
		wantError(t, method+" /v1/reset", rec, http.StatusMethodNotAllowed, "/v1/reset answers POST only")
		if a := rec.Header().Get("Allow"); a != "POST" {
			t.Errorf("%s /v1/reset: Allow %q; want POST", method, a)
		}
	}
}

// TestOversizedBody checks that an authorized request with a body over MaxBody is a 413, whether
// its length is declared or not, and that a body within it is read and served.
func TestOversizedBody(t *testing.T) {
	h, _ := newHandler(t, nil)
	big := make([]byte, admin.MaxBody+1)
	rec := serve(h, call{method: "GET", target: "/v1/state?key=alice", auth: bearer(testToken), body: bytes.NewReader(big)})
	wantError(t, "a declared length over MaxBody", rec, http.StatusRequestEntityTooLarge, fmt.Sprintf("body of %d bytes; want at most %d", len(big), admin.MaxBody))
	r := httptest.NewRequest("GET", "/v1/state?key=alice", io.MultiReader(bytes.NewReader(big))) // no length
	r.ContentLength = -1
	r.Header.Set("Authorization", "Bearer "+testToken)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	wantError(t, "an undeclared length over MaxBody", rec, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", admin.MaxBody))
	rec = serve(h, call{method: "GET", target: "/v1/state?key=alice", auth: bearer(testToken), body: bytes.NewReader(big[:admin.MaxBody])})
	if rec.Code != http.StatusOK {
		t.Errorf("a body of MaxBody = %d %s; want 200", rec.Code, rec.Body)
	}
}

// TestNewRefuses checks New's refusals: no Service, a token shorter than MinTokenLen.
func TestNewRefuses(t *testing.T) {
	_, svc := newHandler(t, nil)
	for _, c := range []struct {
		opts admin.Options
		msg  string
	}{
		{admin.Options{Token: []byte(testToken)}, "needs a Service"},
		{admin.Options{Service: svc, Token: []byte(testToken[:admin.MinTokenLen-1])}, "token of 15 bytes; want at least 16"},
		{admin.Options{Service: svc}, "token of 0 bytes"},
	} {
		if _, err := admin.New(c.opts); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("New(%+v) = %v; want an error saying %q", c.opts, err, c.msg)
		}
	}
	if _, err := admin.New(admin.Options{Service: svc, Token: []byte(testToken[:admin.MinTokenLen])}); err != nil {
		t.Errorf("New with a token of MinTokenLen bytes: %v", err)
	}
}

// TestRefusalsLogged checks that a refusal is logged with the client's address, and never with the
// token it bore, right or wrong.
func TestRefusalsLogged(t *testing.T) {
	_, svc := newHandler(t, nil)
	var logs bytes.Buffer
	h, err := admin.New(admin.Options{Service: svc, Token: []byte(testToken), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	guess := "a-guess-that-must-not-be-logged"
	serve(h, call{method: "GET", target: "/v1/state?key=alice", auth: bearer(guess), remote: "198.51.100.9:4321"})
	serve(h, call{method: "GET", target: "/v1/state?key=alice", auth: bearer(testToken)})
	got := logs.String()
	if !strings.Contains(got, `msg="admin API: request without the right token refused" client=198.51.100.9`) {
		t.Errorf("the log lacks the refusal of 198.51.100.9:\n%s", got)
	}
	if strings.Contains(got, guess) || strings.Contains(got, testToken) {
		t.Errorf("the log holds a token:\n%s", got)
	}
}
