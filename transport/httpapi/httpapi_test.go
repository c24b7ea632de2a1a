package httpapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/syncbuf"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/httpapi"
)

// demoYAML is the configuration the tests give /demo: cmd/admit's built-in one.
const demoYAML = "policies:\n  - name: demo\n    algorithm: fixed_window\n    limit: 3\n    window: 10s\n"

// demoConfig returns the configuration of demoYAML.
func demoConfig(t *testing.T) *policy.Config { return parseConfig(t, demoYAML) }

// parseConfig returns the configuration of yaml.
func parseConfig(t *testing.T, yaml string) *policy.Config {
	t.Helper()
	cfg, err := policy.Parse("demo.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// testSecret is the HMAC secret of every test's KeyBuilder.
var testSecret = []byte("httpapi test secret of 32 bytes!")

// newService returns a Service on store under cfg, with a KeyBuilder on testSecret.
func newService(t *testing.T, store admit.Store, cfg *policy.Config) *service.Service {
	t.Helper()
	keys, err := admit.NewKeyBuilder(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(store, keys, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// failingStore is a Store whose decisions all fail with err. Its Release and Settle are never
// called: they would panic.
type failingStore struct {
	admit.Store
	err error
}

func (s failingStore) Take(context.Context, admit.Request) (admit.Decision, error) {
	return admit.Decision{}, s.err
}

func (s failingStore) TakeAll(context.Context, []admit.Request, []admit.Decision) (bool, error) {
	return false, s.err
}

// untouchable is a Store that fails t if it is ever called.
type untouchable struct {
	admit.Store
	t *testing.T
}

func (s untouchable) Take(context.Context, admit.Request) (admit.Decision, error) {
	s.t.Error("the store was called")
	return admit.Decision{}, admit.ErrUnavailable
}

func (s untouchable) TakeAll(context.Context, []admit.Request, []admit.Decision) (bool, error) {
	s.t.Error("the store was called")
	return false, admit.ErrUnavailable
}

// newHandler returns a Handler whose /demo is limited by the policies of demo, decided by svc. It
// logs into a buffer rather than into t.Output(), which panics if written after the test: the
// log summaries are written by a timer, up to an interval after the last request.
func newHandler(t *testing.T, svc *service.Service, demo *policy.Config) *httpapi.Handler {
	t.Helper()
	logs := &syncbuf.Buffer{}
	t.Cleanup(func() { t.Logf("log:\n%s", logs) })
	h, err := httpapi.New(httpapi.Options{Demo: demo, Service: svc, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// newDemoHandler returns a Handler whose /demo is limited by demoYAML's policy on store.
func newDemoHandler(t *testing.T, store admit.Store) *httpapi.Handler {
	t.Helper()
	cfg := demoConfig(t)
	return newHandler(t, newService(t, store, cfg), cfg)
}

func newMemstore(t *testing.T) *memstore.Store {
	s := memstore.New(memstore.Options{})
	t.Cleanup(func() { s.Close() })
	return s
}

// step is one request and the response it expects; empty want fields are not checked.
type step struct {
	method, path string
	status       int
	body         string
	header       map[string]string
}

func run(t *testing.T, h http.Handler, steps []step) {
	t.Helper()
	for i, s := range steps {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(s.method, s.path, nil))
		where := fmt.Sprintf("step %d: %s %s", i+1, s.method, s.path)
		if rec.Code != s.status {
			t.Errorf("%s: status %d, want %d", where, rec.Code, s.status)
		}
		// A recorder keeps the body of a HEAD response, which a server would not send.
		if got := rec.Body.String(); got != s.body && s.method != http.MethodHead {
			t.Errorf("%s: body %q, want %q", where, got, s.body)
		}
		for k, v := range s.header {
			if got := rec.Header().Values(k); len(got) != 1 || got[0] != v {
				t.Errorf("%s: %s = %q, want %q", where, k, got, v)
			}
		}
	}
}

var (
	okStep = step{method: "GET", path: "/demo", status: 200, body: "ok\n",
		header: map[string]string{"Cache-Control": "no-store"}}
	limitedStep = step{method: "GET", path: "/demo", status: 429, body: "rate limit exceeded\n",
		header: map[string]string{"Retry-After": "10", "Cache-Control": "no-store", "Content-Type": "text/plain; charset=utf-8"}}
	unavailableStep = step{method: "GET", path: "/demo", status: 503, body: "limiter unavailable\n",
		header: map[string]string{"Retry-After": "1", "Cache-Control": "no-store", "Content-Type": "text/plain; charset=utf-8"}}
	healthStep = step{method: "GET", path: "/healthz", status: 200, body: "ok\n"}
)

func TestDemo(t *testing.T) {
	run(t, newDemoHandler(t, newMemstore(t)), []step{okStep, okStep, okStep, limitedStep, limitedStep})
}

// TestDemoLimitsDemoSubject checks that /demo takes one unit of DemoSubject under the Demo
// configuration's policy, and nothing else.
func TestDemoLimitsDemoSubject(t *testing.T) {
	cfg := demoConfig(t)
	svc := newService(t, newMemstore(t), cfg)
	run(t, newHandler(t, svc, cfg), []step{okStep})
	for subject, want := range map[string]int64{httpapi.DemoSubject: 2, "other": 3} {
		res, err := svc.Check(context.Background(), service.Check{Policies: []string{"demo"}, Subject: admit.Subject{ID: subject}, Cost: 0}) // a peek
		if err != nil {
			t.Fatal(err)
		}
		if d := res.Decisions[0]; d.Remaining != want {
			t.Errorf("subject %q has %d left after one GET /demo, want %d", subject, d.Remaining, want)
		}
	}
}

// TestDemoUsesTheGivenPolicies checks that /demo applies the policies of Options.Demo, not its own
// nor those of the Service's loaded configuration.
func TestDemoUsesTheGivenPolicies(t *testing.T) {
	once := parseConfig(t, "policies:\n  - name: once\n    algorithm: fixed_window\n    limit: 1\n    window: 1m\n")
	limited := limitedStep
	limited.header = map[string]string{"Retry-After": "60"}
	run(t, newHandler(t, newService(t, newMemstore(t), demoConfig(t)), once), []step{okStep, limited})
}

func TestDemoHeadCounts(t *testing.T) {
	head := okStep
	head.method = "HEAD"
	run(t, newDemoHandler(t, newMemstore(t)), []step{head, okStep, head, {method: "HEAD", path: "/demo", status: 429}})
}

func TestDemoUnavailable(t *testing.T) {
	store := failingStore{err: fmt.Errorf("teststore: %w", admit.ErrUnavailable)}
	run(t, newDemoHandler(t, store), []step{unavailableStep, unavailableStep, healthStep})
}

func TestHealthzNeverCallsStore(t *testing.T) {
	head := healthStep
	head.method = "HEAD"
	run(t, newDemoHandler(t, untouchable{t: t}), []step{healthStep, head, healthStep})
}

func TestHealthzVersion(t *testing.T) {
	cfg := demoConfig(t)
	svc := newService(t, untouchable{t: t}, cfg)
	h, err := httpapi.New(httpapi.Options{Demo: cfg, Service: svc, Version: "v1.2.0"})
	if err != nil {
		t.Fatal(err)
	}
	run(t, h, []step{
		{method: "GET", path: "/healthz", status: 200, body: "ok v1.2.0\n"},
		{method: "GET", path: "/readyz", status: 200, body: "ok\n"},
	})
	if _, err := httpapi.New(httpapi.Options{Demo: cfg, Service: svc, Version: "v1 2"}); err == nil {
		t.Error(`New accepted the Version "v1 2"`)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	h := newDemoHandler(t, untouchable{t: t})
	for _, path := range []string{"/demo", "/healthz"} {
		for _, method := range []string{"POST", "PUT", "DELETE", "PATCH"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
			if rec.Code != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: status %d, want 405", method, path, rec.Code)
			}
			if got := rec.Header().Get("Allow"); got != "GET, HEAD" {
				t.Errorf("%s %s: Allow %q, want %q", method, path, got, "GET, HEAD")
			}
		}
	}
}

func TestNotFound(t *testing.T) {
	run(t, newDemoHandler(t, untouchable{t: t}), []step{
		{method: "GET", path: "/", status: 404, body: "404 page not found\n"},
		{method: "GET", path: "/demo/x", status: 404, body: "404 page not found\n"},
	})
}

func TestNewWithoutDemo(t *testing.T) {
	if _, err := httpapi.New(httpapi.Options{}); err == nil {
		t.Error("New without a Demo configuration and a Service succeeded")
	}
	if _, err := httpapi.New(httpapi.Options{Demo: demoConfig(t)}); err == nil {
		t.Error("New without a Service succeeded")
	}
}
