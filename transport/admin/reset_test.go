package admin_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/admin"
)

// customer is the subject the reset tests reset: a value that must never reach a log.
const customer = "customer-4711@example.com"

// An audited is a Handler whose audit records and changes are kept for the test to read.
type audited struct {
	h   *admin.Handler
	svc *service.Service

	mu      sync.Mutex
	log     bytes.Buffer // the JSON log
	changes []string     // the actions reported to OnChange
}

// Write appends p to the log.
func (a *audited) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.log.Write(p)
}

// newAudited returns an audited Handler over a Service on store (a new memstore for nil) under
// testConfig.
func newAudited(t *testing.T, store admit.Store) *audited {
	t.Helper()
	_, svc := newHandler(t, store)
	a := &audited{svc: svc}
	h, err := admin.New(admin.Options{Service: svc, Token: []byte(testToken), Logger: slog.New(slog.NewJSONHandler(a, nil)),
		OnChange: func(action string) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.changes = append(a.changes, action)
		}})
	if err != nil {
		t.Fatal(err)
	}
	a.h = h
	return a
}

// records returns the audit records logged so far, each as its fields.
func (a *audited) records(t *testing.T) []map[string]any {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(a.log.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line that is not JSON: %q", line)
		}
		if rec["msg"] == "admin change" {
			out = append(out, rec)
		}
	}
	return out
}

// counted returns the actions reported to OnChange so far.
func (a *audited) counted() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.changes...)
}

// postReset sends POST /v1/reset with body and testToken.
func postReset(h http.Handler, body string) *httptest.ResponseRecorder {
	return serve(h, call{method: http.MethodPost, target: "/v1/reset", auth: bearer(testToken), body: strings.NewReader(body), remote: "198.51.100.20:5555"})
}

// remaining returns what subject has left under policy P, by GET /v1/state.
func remaining(t *testing.T, h http.Handler, policy, subject string) int64 {
	t.Helper()
	st := getState(t, h, "/v1/state?policy="+policy+"&key="+subject)
	return st.Decisions[0].Remaining
}

// spend checks subject under both policies until each refuses it.
func spend(t *testing.T, svc *service.Service, subject string) {
	t.Helper()
	for _, p := range []string{"per-minute", "per-day"} {
		for {
			res, err := svc.Check(t.Context(), service.Check{Policies: []string{p}, Subject: admit.Subject{ID: subject}, Cost: 1})
			if err != nil {
				t.Fatal(err)
			}
			if res.Decisions[0].Remaining == 0 {
				break
			}
		}
	}
}

// wantRecord checks that rec is the audit record of a reset of customer under policy, with reason,
// from 198.51.100.20, and result.
func wantRecord(t *testing.T, a *audited, rec map[string]any, policy, reason, result string) {
	t.Helper()
	digest, err := a.svc.SubjectDigest(admit.Subject{ID: customer})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"level": "INFO", "msg": "admin change", "action": "reset", "policy": policy, "subject_digest": digest,
		"client": "198.51.100.20", "result": result}
	if reason != "" {
		want["reason"] = reason
	}
	delete(rec, "time")
	if fmt.Sprint(rec) != fmt.Sprint(want) {
		t.Errorf("audit record %v; want %v", rec, want)
	}
}

// wantOneRefusal checks that no change was counted, and that the one audit record is of a reset of
// customer under policy, refused as result.
func (a *audited) wantOneRefusal(t *testing.T, policy, result string) {
	t.Helper()
	if got := a.counted(); len(got) != 0 {
		t.Errorf("refused resets counted: %q", got)
	}
	records := a.records(t)
	if len(records) != 1 {
		t.Fatalf("%d audit records; want 1, the refusal's:\n%s", len(records), &a.log)
	}
	wantRecord(t, a, records[0], policy, "", result)
}

// TestReset resets a spent subject under one policy, then under every policy: 200 with the number
// of keys, the allowance back where it was reset and nowhere else, each reset audited with the
// subject's digest (never the subject) and counted once.
func TestReset(t *testing.T) {
	a := newAudited(t, nil)
	spend(t, a.svc, customer)
	spend(t, a.svc, "bob")

	rec := postReset(a.h, `{"policy":"per-minute","key":"`+customer+`","reason":"ticket: refund"}`)
	if rec.Code != http.StatusOK || rec.Body.String() != `{"reset":true,"policy":"per-minute","keys":1}`+"\n" {
		t.Fatalf("POST /v1/reset under per-minute = %d %s; want 200, 1 key (tier pro shares the policy's)", rec.Code, rec.Body)
	}
	if m, d := remaining(t, a.h, "per-minute", customer), remaining(t, a.h, "per-day", customer); m != 3 || d != 0 {
		t.Errorf("after the reset under per-minute: %d per minute, %d per day left; want 3 and 0", m, d)
	}
	rec = postReset(a.h, `{"key":"`+customer+`"}`)
	if rec.Code != http.StatusOK || rec.Body.String() != `{"reset":true,"keys":2}`+"\n" {
		t.Fatalf("POST /v1/reset under every policy = %d %s; want 200, 2 keys", rec.Code, rec.Body)
	}
	if d := remaining(t, a.h, "per-day", customer); d != 5 {
		t.Errorf("after the reset under every policy: %d per day left; want 5", d)
	}
	if m, d := remaining(t, a.h, "per-minute", "bob"), remaining(t, a.h, "per-day", "bob"); m != 0 || d != 0 {
		t.Errorf("bob after resets of another subject: %d and %d left; want 0 and 0", m, d)
	}
	if got := a.counted(); len(got) != 2 || got[0] != admin.ActionReset || got[1] != admin.ActionReset {
		t.Errorf("OnChange got %q; want reset twice", got)
	}
	records := a.records(t)
	if len(records) != 2 {
		t.Fatalf("%d audit records; want 2:\n%s", len(records), &a.log)
	}
	wantRecord(t, a, records[0], "per-minute", "ticket: refund", "ok")
	wantRecord(t, a, records[1], "", "", "ok")
	if strings.Contains(a.log.String(), customer) {
		t.Errorf("the log holds the subject:\n%s", &a.log)
	}
}

// TestResetBadBodies checks that each mistake in a body is a 400 that names it, and an unknown
// policy a 404; none of them changes anything or is counted, and only the unknown policy, a reset
// the body asked for, is audited.
func TestResetBadBodies(t *testing.T) {
	a := newAudited(t, nil)
	spend(t, a.svc, customer)
	for _, c := range []struct {
		body   string
		status int
		msg    string
	}{
		{``, 400, "empty body; want a reset request"},
		{` `, 400, "empty body"},
		{`{`, 400, "body is not a reset request: unexpected EOF"},
		{`{"key":"` + customer + `",}`, 400, "body is not a reset request: invalid character"},
		{`[]`, 400, "cannot unmarshal array"},
		{`{"key":5}`, 400, "ResetRequest.key of type string"},
		{`{"key":"` + customer + `","cost":1}`, 400, `unknown field "cost"`},
		{`{"key":"` + customer + `","Tier":"pro"}`, 400, `unknown field "Tier"`},
		{`{"key":"` + customer + `"} {"key":"` + customer + `"}`, 400, "more than one JSON value"},
		{`{"key":"` + customer + `"}]`, 400, "more than one JSON value"},
		{`{}`, 400, `"key" is required`},
		{`null`, 400, `"key" is required`},
		{`{"policy":"per-minute","key":""}`, 400, `"key" is required`},
		{`{"key":"` + strings.Repeat("k", admin.MaxKeyLen+1) + `"}`, 400, fmt.Sprintf(`"key" of %d bytes; want at most %d`, admin.MaxKeyLen+1, admin.MaxKeyLen)},
		{`{"key":"` + customer + `","reason":"` + strings.Repeat("r", admin.MaxReasonLen+1) + `"}`, 400, fmt.Sprintf(`"reason" of %d bytes; want at most %d`, admin.MaxReasonLen+1, admin.MaxReasonLen)},
		{`{"policy":"per-hour","key":"` + customer + `"}`, 404, `unknown policy "per-hour"`},
	} {
		wantError(t, fmt.Sprintf("POST /v1/reset %.60s", c.body), postReset(a.h, c.body), c.status, c.msg)
	}
	if m, d := remaining(t, a.h, "per-minute", customer), remaining(t, a.h, "per-day", customer); m != 0 || d != 0 {
		t.Errorf("after refused resets: %d and %d left; want 0 and 0, nothing reset", m, d)
	}
	a.wantOneRefusal(t, "per-hour", "unknown_policy")
	// The bounds themselves are allowed.
	rec := postReset(a.h, `{"key":"`+strings.Repeat("k", admin.MaxKeyLen)+`","reason":"`+strings.Repeat("r", admin.MaxReasonLen)+`"}`)
	if rec.Code != http.StatusOK {
		t.Errorf("a key of MaxKeyLen, a reason of MaxReasonLen = %d %s; want 200", rec.Code, rec.Body)
	}
}

// TestResetUnavailable checks that a Store that cannot reset is a 503 with a Retry-After, audited
// as unavailable and not counted.
func TestResetUnavailable(t *testing.T) {
	down, err := redisstore.New(redisstore.Config{URL: "redis://" + redistest.ClosedPort(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	a := newAudited(t, down)
	rec := postReset(a.h, `{"key":"`+customer+`"}`)
	wantError(t, "POST /v1/reset on a closed port", rec, http.StatusServiceUnavailable, "limiter unavailable")
	if ra := rec.Header().Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After %q; want 1", ra)
	}
	a.wantOneRefusal(t, "", "unavailable")
}
