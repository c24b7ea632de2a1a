package admin_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/admin"
)

// topConfig is testConfig's per-minute with the sketch settings top.
const topConfig = "server:\n  top: %s\npolicies:\n  - {name: per-minute, algorithm: fixed_window, limit: 1, window: 1m}\n"

// countingStore is a memstore that counts the calls that reach it.
type countingStore struct {
	*memstore.Store
	calls atomic.Int64
}

func (s *countingStore) TakeAll(ctx context.Context, rs []admit.Request, ds []admit.Decision) (bool, error) {
	s.calls.Add(1)
	return s.Store.TakeAll(ctx, rs, ds)
}

func (s *countingStore) Take(ctx context.Context, r admit.Request) (admit.Decision, error) {
	s.calls.Add(1)
	return s.Store.Take(ctx, r)
}

// topHandler returns a Handler over a Service under topConfig with top, its Service and its Store.
func topHandler(t *testing.T, top string) (*admin.Handler, *service.Service, *countingStore) {
	t.Helper()
	return topHandlerOf(t, strings.Replace(topConfig, "%s", top, 1))
}

// topHandlerOf returns a Handler over a Service under the configuration src, its Service and its
// Store.
func topHandlerOf(t *testing.T, src string) (*admin.Handler, *service.Service, *countingStore) {
	t.Helper()
	mem := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { mem.Close() })
	store := &countingStore{Store: mem}
	keys, err := admit.NewKeyBuilder([]byte("admin test secret of 32 bytes.."))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := policy.Parse("test.yaml", []byte(src))
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
	return h, svc, store
}

// reject makes subject spend its one unit of per-minute, then be refused times times.
func reject(t *testing.T, svc *service.Service, subject string, times int) {
	t.Helper()
	c := service.Check{Policies: []string{"per-minute"}, Subject: admit.Subject{ID: subject}, Cost: 1}
	for i := range times + 1 {
		res, err := svc.Check(t.Context(), c)
		if err != nil || res.Allowed != (i == 0) {
			t.Fatalf("check %d of %s: %+v, %v", i, subject, res, err)
		}
	}
}

// getTop sends GET target with testToken and returns a 200 answer's body, raw and decoded.
func getTop(t *testing.T, h http.Handler, target string) (map[string]any, admin.TopResponse) {
	t.Helper()
	rec := serve(h, call{method: http.MethodGet, target: target, auth: bearer(testToken)})
	var raw map[string]any
	var out admin.TopResponse
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &raw) != nil || json.Unmarshal(rec.Body.Bytes(), &out) != nil {
		t.Fatalf("GET %s = %d %s; want 200 and a top", target, rec.Code, rec.Body)
	}
	return raw, out
}

// TestTop lists the subjects a policy rejected most, most first, by digest alone without
// reveal_subjects, from memory: the Store is not asked.
func TestTop(t *testing.T) {
	h, svc, store := topHandler(t, "{size: 50, period: 2m}")
	before := time.Now().UTC()
	reject(t, svc, "alice", 3)
	reject(t, svc, "bob", 1)
	reject(t, svc, "carol", 2)
	calls := store.calls.Load()
	raw, top := getTop(t, h, "/v1/top?policy=per-minute")
	if store.calls.Load() != calls {
		t.Errorf("GET /v1/top called the Store %d times", store.calls.Load()-calls)
	}
	if top.Policy != "per-minute" || top.Size != 50 || top.PeriodMS != 120000 || top.Revealed || top.ErrorBound != 0 || len(top.Subjects) != 3 {
		t.Fatalf("%+v; want per-minute's 3 subjects, size 50, period 2m, exact", top)
	}
	for i, want := range []uint64{3, 2, 1} {
		s := top.Subjects[i]
		if s.Rejected != want || s.Error != 0 || s.Key != "" || len(s.Digest) != 32 ||
			s.FirstSeen.Before(before.Add(-time.Second)) || s.LastSeen.Before(s.FirstSeen) {
			t.Errorf("subject %d: %+v; want %d rejections, a digest and no key", i, s, want)
		}
	}
	first := raw["subjects"].([]any)[0].(map[string]any)
	for _, f := range []string{"digest", "rejected", "error", "first_seen", "last_seen"} {
		if _, ok := first[f]; !ok {
			t.Errorf("a subject has no %q: %v", f, first)
		}
	}
	if _, ok := first["key"]; ok {
		t.Errorf("a subject has a key without reveal_subjects: %v", first)
	}
	if _, one := getTop(t, h, "/v1/top?policy=per-minute&n=1"); len(one.Subjects) != 1 || one.Subjects[0].Digest != top.Subjects[0].Digest {
		t.Errorf("n=1: %+v; want alice's digest alone", one.Subjects)
	}
}

// With reveal_subjects the raw subject is beside its digest; a sketch of fewer than 20 subjects
// answers as many as it counts without n.
func TestTopRevealed(t *testing.T) {
	h, svc, _ := topHandler(t, "{size: 2, reveal_subjects: true}")
	reject(t, svc, "alice", 3)
	reject(t, svc, "bob", 1)
	reject(t, svc, "carol", 1)
	_, top := getTop(t, h, "/v1/top?policy=per-minute")
	if !top.Revealed || len(top.Subjects) != 2 || top.Subjects[0].Key != "alice" || top.Subjects[0].Rejected != 3 {
		t.Fatalf("%+v; want alice first, by name, of 2", top)
	}
	if top.ErrorBound == 0 || top.Subjects[1].Key != "carol" || top.Subjects[1].Rejected != 2 || top.Subjects[1].Error != 1 {
		t.Errorf("%+v; want carol replacing bob, counted 2 of which 1 may be bob's, a bound above 0", top)
	}
}

// TestTopBadQueries checks that each mistake in a query is a 400 or 404 that names it.
func TestTopBadQueries(t *testing.T) {
	h, _, _ := topHandler(t, "{size: 10}")
	for _, c := range []struct {
		query  string
		status int
		msg    string
	}{
		{"n=11", 400, "n 11; want 1-10"},
		{"policy=per-minute&key=alice", 400, `unknown query parameter "key"`},
		{"policy=per-minute&n=1&n=2", 400, "n given 2 times"},
		{"policy=per-minute&n=0", 400, "n 0; want 1-10"},
		{"policy=per-minute&n=11", 400, "n 11; want 1-10"},
		{"policy=per-minute&n=-1", 400, "n -1; want 1-10"},
		{"policy=per-minute&n=ten", 400, `n "ten": want a whole number`},
		{"policy=per-minute&n=", 400, `n "": want a whole number`},
		{"policy=%zz", 400, "malformed query"},
		{"policy=per-hour", 404, `unknown policy "per-hour"`},
	} {
		rec := serve(h, call{method: http.MethodGet, target: "/v1/top?" + c.query, auth: bearer(testToken)})
		wantError(t, "GET /v1/top?"+c.query, rec, c.status, c.msg)
	}
	off, _, _ := topHandler(t, "{size: 0}")
	for _, target := range []string{"/v1/top?policy=per-minute", "/v1/top"} {
		rec := serve(off, call{method: http.MethodGet, target: target, auth: bearer(testToken)})
		wantError(t, "GET "+target+" under size 0", rec, 404, "server.top.size is 0")
	}
	rec := serve(h, call{method: http.MethodPost, target: "/v1/top?policy=per-minute", auth: bearer(testToken)})
	wantError(t, "POST /v1/top", rec, 405, "/v1/top answers GET only")
	if rec := serve(h, call{method: http.MethodGet, target: "/v1/top?policy=per-minute"}); rec.Code != 401 {
		t.Errorf("GET /v1/top without the token = %d; want 401", rec.Code)
	}
}

// Without a policy (or with policy=""), GET /v1/top answers every policy's list, in the
// configuration's order, n subjects each.
func TestTopEveryPolicy(t *testing.T) {
	h, svc, _ := topHandlerOf(t, strings.Replace(topConfig, "%s", "{size: 5}", 1)+"  - {name: idle, algorithm: gcra, limit: 3, window: 1m}\n")
	reject(t, svc, "alice", 2)
	reject(t, svc, "bob", 1)
	for _, target := range []string{"/v1/top", "/v1/top?policy=", "/v1/top?n=1"} {
		rec := serve(h, call{method: http.MethodGet, target: target, auth: bearer(testToken)})
		var all admin.TopAllResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &all); rec.Code != http.StatusOK || err != nil || len(all.Policies) != 2 {
			t.Fatalf("GET %s = %d %s (%v); want 200 and two policies", target, rec.Code, rec.Body, err)
		}
		want := 2
		if strings.Contains(target, "n=1") {
			want = 1
		}
		if p := all.Policies[0]; p.Policy != "per-minute" || p.Size != 5 || len(p.Subjects) != want || p.Subjects[0].Rejected != 2 {
			t.Errorf("GET %s: per-minute %+v; want alice's 2 rejections first, %d subjects", target, p, want)
		}
		if p := all.Policies[1]; p.Policy != "idle" || len(p.Subjects) != 0 || p.Subjects == nil {
			t.Errorf("GET %s: idle %+v; want no subject, as []", target, p)
		}
	}
}
