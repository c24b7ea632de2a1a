package admin_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/admin"
)

// overrideCall sends method /v1/overrides with body and testToken.
func overrideCall(h http.Handler, method, body string) *httptest.ResponseRecorder {
	return serve(h, call{method: method, target: "/v1/overrides", auth: bearer(testToken), body: strings.NewReader(body), remote: "198.51.100.20:5555"})
}

// listOverrides lists policy's overrides by GET /v1/overrides?query and decodes a 200 answer.
func listOverrides(t *testing.T, h http.Handler, query string) admin.OverridesResponse {
	t.Helper()
	rec := serve(h, call{method: http.MethodGet, target: "/v1/overrides?" + query, auth: bearer(testToken)})
	var out admin.OverridesResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &out); rec.Code != http.StatusOK || err != nil {
		t.Fatalf("GET /v1/overrides?%s = %d %s (%v); want 200 and a listing", query, rec.Code, rec.Body, err)
	}
	return out
}

// TestOverrides sets an override of a spent customer through the API, reads it back in the state
// and the listing (by digest, never the subject), deletes it, and checks each change's audit
// record and count; a second delete is a 404, audited as none and not counted.
func TestOverrides(t *testing.T) {
	a := newAudited(t, nil)
	digest, err := a.svc.SubjectDigest(admit.Subject{ID: customer})
	if err != nil {
		t.Fatal(err)
	}
	spend(t, a.svc, customer)
	rec := overrideCall(a.h, http.MethodPut, `{"policy":"per-minute","key":"`+customer+`","limit":7,"expires_in":"7d","reason":"ticket 12"}`)
	var got admin.OverrideResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("PUT /v1/overrides = %d %s (%v); want 200", rec.Code, rec.Body, err)
	}
	expiresAt, err := time.Parse(time.RFC3339Nano, got.ExpiresAt)
	week := 7 * 24 * time.Hour
	if err != nil || got.Policy != "per-minute" || got.Digest != digest || got.Limit != 7 || got.Burst != 0 || got.Reason != "ticket 12" ||
		got.ExpiresInMS <= (week-time.Minute).Milliseconds() || got.ExpiresInMS > week.Milliseconds() || time.Until(expiresAt) > week || got.Unused {
		t.Errorf("PUT /v1/overrides answered %+v (%v); want per-minute, the digest %s, 7, a week, the reason", got, err, digest)
	}
	if strings.Contains(rec.Body.String(), customer) {
		t.Errorf("the answer holds the subject: %s", rec.Body)
	}
	st := getState(t, a.h, "/v1/state?policy=per-minute&key="+customer).Decisions[0]
	if st.Source != "override" || st.Limit != 7 || st.Remaining != 4 || st.Reason != "ticket 12" || st.ExpiresInMS <= 0 || st.ExpiresInMS > week.Milliseconds() {
		t.Errorf("the state under the override: %+v; want source override, 7, 4 remaining, the reason and expiry", st)
	}
	if st := getState(t, a.h, "/v1/state?policy=per-minute&tier=pro&key="+customer).Decisions[0]; st.Source != "override" || st.Limit != 7 {
		t.Errorf("the state in tier pro under the override: %+v; want the override's 7", st)
	}
	list := listOverrides(t, a.h, "policy=per-minute")
	if len(list.Overrides) != 1 || list.Overrides[0] != got && list.Overrides[0].Digest != digest || list.NextCursor != "" {
		t.Errorf("the listing: %+v; want the one override", list)
	}
	if l := listOverrides(t, a.h, "policy=per-day"); len(l.Overrides) != 0 {
		t.Errorf("per-day's listing: %+v; want none", l)
	}
	rec = overrideCall(a.h, http.MethodDelete, `{"policy":"per-minute","key":"`+customer+`","reason":"done"}`)
	if rec.Code != http.StatusOK || rec.Body.String() != `{"deleted":true,"policy":"per-minute"}`+"\n" {
		t.Errorf("DELETE /v1/overrides = %d %s; want 200, deleted", rec.Code, rec.Body)
	}
	if st := getState(t, a.h, "/v1/state?policy=per-minute&key="+customer).Decisions[0]; st.Source != "policy" || st.Limit != 3 || st.Remaining != 0 {
		t.Errorf("the state after the delete: %+v; want the policy's 3, spent", st)
	}
	wantError(t, "a second DELETE", overrideCall(a.h, http.MethodDelete, `{"policy":"per-minute","key":"`+customer+`"}`),
		http.StatusNotFound, `no override of this key under policy "per-minute"`)
	if c := a.counted(); !slices.Equal(c, []string{admin.ActionOverrideSet, admin.ActionOverrideDelete}) {
		t.Errorf("counted %q; want one set, one delete", c)
	}
	records := a.records(t)
	if len(records) != 3 {
		t.Fatalf("%d audit records; want 3:\n%s", len(records), &a.log)
	}
	for i, want := range []struct{ action, reason, result string }{
		{"override_set", "ticket 12", "ok"}, {"override_delete", "done", "ok"}, {"override_delete", "", "none"},
	} {
		r := records[i]
		if r["action"] != want.action || r["policy"] != "per-minute" || r["subject_digest"] != digest || r["result"] != want.result ||
			want.reason != "" && r["reason"] != want.reason || r["client"] != "198.51.100.20" {
			t.Errorf("audit record %d: %v; want %+v with the digest", i, r, want)
		}
	}
	if strings.Contains(a.log.String(), customer) {
		t.Errorf("the log holds the subject:\n%s", &a.log)
	}
}

// TestOverridesPages lists overrides in pages of n, following next_cursor.
func TestOverridesPages(t *testing.T) {
	h, _ := newHandler(t, nil)
	for i := range 5 {
		if rec := overrideCall(h, http.MethodPut, fmt.Sprintf(`{"policy":"per-day","key":"k%d","limit":9,"burst":3}`, i)); rec.Code != http.StatusOK {
			t.Fatalf("PUT %d = %d %s", i, rec.Code, rec.Body)
		}
	}
	seen := map[string]bool{}
	query, pages := "policy=per-day&n=2", 0
	for ; pages < 5; pages++ {
		l := listOverrides(t, h, query)
		for _, o := range l.Overrides {
			if seen[o.Digest] || o.Limit != 9 || o.Burst != 3 || o.ExpiresAt != "" || o.ExpiresInMS != 0 {
				t.Errorf("page %d: %+v; want a new digest, 9, burst 3, no expiry", pages, o)
			}
			seen[o.Digest] = true
		}
		if l.NextCursor == "" {
			break
		}
		query = "policy=per-day&n=2&cursor=" + l.NextCursor
	}
	if len(seen) != 5 || pages != 2 {
		t.Errorf("listed %d overrides in %d pages; want 5 in 3", len(seen), pages+1)
	}
	if l := listOverrides(t, h, "policy=per-day"); len(l.Overrides) != 5 {
		t.Errorf("a listing of the default n: %d; want all 5", len(l.Overrides))
	}
}

// TestOverrideBadRequests checks the 400s, each naming the field, with nothing stored, audited
// only when the body is well formed; and the listing's bad queries.
func TestOverrideBadRequests(t *testing.T) {
	a := newAudited(t, nil)
	key := `"key":"` + customer + `"`
	for _, c := range []struct{ body, msg string }{
		{``, "empty body; want an override as a JSON object"},
		{`{"policy":"per-minute",` + key + `,"limit":5}{}`, "more than one JSON value"},
		{`{"policy":"nope",` + key + `,"limit":5}`, `unknown policy "nope"`},
		{`{` + key + `,"limit":5}`, `"policy" is required`},
		{`{"policy":"per-minute","limit":5}`, `"key" is required`},
		{`{"policy":"per-minute",` + key + `}`, `"limit" 0: want 1 or more`},
		{`{"policy":"per-minute",` + key + `,"limit":-3}`, `"limit" -3`},
		{`{"policy":"per-minute",` + key + `,"limit":1000000000000001}`, `override limit of policy "per-minute": rate 1000000000000001 outside`},
		{`{"policy":"per-minute",` + key + `,"limit":"5"}`, "cannot unmarshal string"},
		{`{"policy":"per-minute",` + key + `,"limit":5,"burst":9}`, `override burst 9: policy "per-minute" is fixed_window, which has no burst`},
		{`{"policy":"per-minute",` + key + `,"limit":5,"window":"1h"}`, `unknown field "window": an override changes the numbers only`},
		{`{"policy":"per-minute",` + key + `,"limit":5,"algorithm":"gcra"}`, `unknown field "algorithm": an override changes the numbers only`},
		{`{"policy":"per-minute",` + key + `,"limit":5,"expires_in":"-1h"}`, `"expires_in" "-1h": want more than 0`},
		{`{"policy":"per-minute",` + key + `,"limit":5,"expires_in":"367d"}`, `"expires_in" "367d": want at most 366d`},
		{`{"policy":"per-minute",` + key + `,"limit":5,"expires_in":"8785h"}`, `"expires_in" "8785h": want more than 0 and at most 366d`},
		{`{"policy":"per-minute",` + key + `,"limit":5,"expires_in":"soon"}`, `"expires_in" "soon": want a duration`},
		{`{"policy":"per-minute",` + key + `,"limit":5,"expires_in":"1us"}`, `want a whole number of milliseconds`},
		{`{"policy":"per-minute",` + key + `,"limit":5,"reason":"` + strings.Repeat("r", 10<<10) + `"}`, `"reason" of 10240 bytes; want at most 200`},
		{`{"policy":"per-minute","key":"` + strings.Repeat("k", admin.MaxKeyLen+1) + `","limit":5}`, `"key" of 8193 bytes; want at most 8192`},
	} {
		wantError(t, fmt.Sprintf("PUT %.100s", c.body), overrideCall(a.h, http.MethodPut, c.body), http.StatusBadRequest, c.msg)
	}
	for _, c := range []struct{ body, msg string }{
		{`{"policy":"per-minute"}`, `"key" is required`},
		{`{` + key + `}`, `"policy" is required`},
		{`{"policy":"Bad Name",` + key + `}`, `policy name "Bad Name"`},
		{`{"policy":"per-minute",` + key + `,"limit":5}`, `unknown field "limit"`},
	} {
		wantError(t, "DELETE "+c.body, overrideCall(a.h, http.MethodDelete, c.body), http.StatusBadRequest, c.msg)
	}
	if c := a.counted(); len(c) != 0 {
		t.Errorf("refusals counted: %q", c)
	}
	for _, r := range a.records(t) {
		if r["result"] != "invalid" && r["result"] != "unknown_policy" {
			t.Errorf("a refusal audited %v; want invalid or unknown_policy", r)
		}
	}
	if l := listOverrides(t, a.h, "policy=per-minute"); len(l.Overrides) != 0 {
		t.Errorf("after the refusals: %+v; want no override", l)
	}
	for _, c := range []struct{ query, msg string }{
		{"", "policy is required"},
		{"policy=", "policy is required"},
		{"policy=per-minute&n=0", `n "0": want 1-1000`},
		{"policy=per-minute&n=1001", `n "1001": want 1-1000`},
		{"policy=per-minute&n=x", `n "x": want 1-1000`},
		{"policy=per-minute&key=k", `unknown query parameter "key"`},
		{"policy=per-minute&policy=per-day", "policy given 2 times"},
		{"policy=per-minute&cursor=rl:per-day:o:{x}", `override cursor is not one of policy "per-minute"`},
		{"policy=Bad", `override listing of policy "Bad"`},
	} {
		wantError(t, "GET /v1/overrides?"+c.query, serve(a.h, call{method: http.MethodGet, target: "/v1/overrides?" + c.query, auth: bearer(testToken)}), http.StatusBadRequest, c.msg)
	}
}

// TestOverridesUnavailable checks that a Store that cannot be reached answers each of the
// endpoints 503, audited as unavailable and not counted.
func TestOverridesUnavailable(t *testing.T) {
	down, err := redisstore.New(redisstore.Config{URL: "redis://" + redistest.ClosedPort(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	a := newAudited(t, down)
	for _, c := range []struct{ method, target, body string }{
		{http.MethodPut, "/v1/overrides", `{"policy":"per-minute","key":"` + customer + `","limit":5}`},
		{http.MethodDelete, "/v1/overrides", `{"policy":"per-minute","key":"` + customer + `"}`},
		{http.MethodGet, "/v1/overrides?policy=per-minute", ""},
	} {
		rec := serve(a.h, call{method: c.method, target: c.target, auth: bearer(testToken), body: strings.NewReader(c.body)})
		wantError(t, c.method+" "+c.target+" on a closed port", rec, http.StatusServiceUnavailable, "limiter unavailable")
	}
	if c := a.counted(); len(c) != 0 {
		t.Errorf("refusals counted: %q", c)
	}
	for _, r := range a.records(t) {
		if r["result"] != "unavailable" {
			t.Errorf("audited %v; want unavailable", r)
		}
	}
}

// TestOverridesGuarded checks the overrides' paths behind the token: 401 without it or with a
// wrong one, 405 with Allow for another method, 413 for a body over MaxBody.
func TestOverridesGuarded(t *testing.T) {
	h, _ := newHandler(t, nil)
	body := `{"policy":"per-minute","key":"k","limit":5}`
	for i, c := range []call{
		{method: "PUT", target: "/v1/overrides", body: strings.NewReader(body)},
		{method: "PUT", target: "/v1/overrides", auth: bearer("wrong-token-of-the-tests-0123456789"), body: strings.NewReader(body)},
		{method: "DELETE", target: "/v1/overrides", body: strings.NewReader(body)},
		{method: "GET", target: "/v1/overrides?policy=per-minute", auth: bearer(testToken + "x")},
	} {
		c.remote = fmt.Sprintf("192.0.2.%d:1234", 100+i)
		if rec := serve(h, c); rec.Code != http.StatusUnauthorized || rec.Body.String() != `{"error":"unauthorized"}`+"\n" {
			t.Errorf("%s %s with %q = %d %q; want a bare 401", c.method, c.target, c.auth, rec.Code, rec.Body)
		}
	}
	if l := listOverrides(t, h, "policy=per-minute"); len(l.Overrides) != 0 {
		t.Errorf("an unauthorized PUT stored %+v", l)
	}
	rec := serve(h, call{method: "POST", target: "/v1/overrides", auth: bearer(testToken), body: strings.NewReader(body)})
	wantError(t, "POST /v1/overrides", rec, http.StatusMethodNotAllowed, "/v1/overrides answers GET, PUT, DELETE only")
	if a := rec.Header().Get("Allow"); a != "GET, PUT, DELETE" {
		t.Errorf("POST /v1/overrides: Allow %q; want GET, PUT, DELETE", a)
	}
	big := `{"policy":"per-minute","key":"k","limit":5,"reason":"` + strings.Repeat("r", admin.MaxBody) + `"}`
	rec = serve(h, call{method: "PUT", target: "/v1/overrides", auth: bearer(testToken), body: bytes.NewReader([]byte(big))})
	wantError(t, "PUT /v1/overrides over MaxBody", rec, http.StatusRequestEntityTooLarge, "want at most")
}

// TestOverridesOfARemovedPolicy checks a reload that removes a policy: its overrides stay, listed
// "unused": true, and the state shows them so, by the policy's name or without one; a new one is
// refused, and the old ones can still be deleted. A reload that brings the policy back applies them.
func TestOverridesOfARemovedPolicy(t *testing.T) {
	h, svc := newHandler(t, nil)
	if rec := overrideCall(h, http.MethodPut, `{"policy":"per-day","key":"k","limit":9,"expires_in":"2d","reason":"trial"}`); rec.Code != http.StatusOK {
		t.Fatalf("PUT = %d %s", rec.Code, rec.Body)
	}
	if rec := serve(h, call{method: http.MethodGet, target: "/v1/overrides?policy=per-day", auth: bearer(testToken)}); rec.Code != http.StatusOK ||
		!strings.Contains(rec.Body.String(), `"limit":9`) || strings.Contains(rec.Body.String(), "unused") {
		t.Errorf("while per-day is loaded: %d %s; want one override, without \"unused\"", rec.Code, rec.Body)
	}
	cfg, err := policy.Parse("test.yaml", []byte(testConfig[:strings.Index(testConfig, "  - name: per-day")]))
	if err != nil {
		t.Fatal(err)
	}
	loaded := svc.Swap(cfg)
	rec := serve(h, call{method: http.MethodGet, target: "/v1/overrides?policy=per-day", auth: bearer(testToken)})
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"limit":9`) || !strings.Contains(rec.Body.String(), `"unused":true`) {
		t.Errorf("after a reload without per-day: %d %s; want the override, unused", rec.Code, rec.Body)
	}
	twoDays := (48 * time.Hour).Milliseconds()
	wantUnused := func(what string, st admin.PolicyState) {
		t.Helper()
		if st != (admin.PolicyState{Policy: "per-day", Source: "override", Unused: true, Limit: 9, Reason: "trial", ExpiresInMS: st.ExpiresInMS}) ||
			st.ExpiresInMS <= twoDays-time.Minute.Milliseconds() || st.ExpiresInMS > twoDays {
			t.Errorf("%s: %+v; want per-day's override, unused, 9, the reason and two days", what, st)
		}
	}
	one := getState(t, h, "/v1/state?policy=per-day&key=k")
	if len(one.Decisions) != 1 {
		t.Fatalf("the state of per-day: %+v; want one decision", one)
	}
	wantUnused("the state of the removed per-day", one.Decisions[0])
	all := getState(t, h, "/v1/state?key=k")
	if len(all.Decisions) != 2 || all.Decisions[0].Policy != "per-minute" || all.Decisions[0].Unused || all.Decisions[0].Source != "policy" {
		t.Fatalf("the state under every policy: %+v; want per-minute's, then per-day's unused override", all)
	}
	wantUnused("the state under every policy", all.Decisions[1])
	if rec := serve(h, call{method: http.MethodGet, target: "/v1/state?key=k", auth: bearer(testToken)}); strings.Contains(rec.Body.String(), `"algorithm":""`) ||
		!strings.Contains(rec.Body.String(), `"unused":true`) {
		t.Errorf("the state's JSON: %s; want unused, without an algorithm", rec.Body)
	}
	if st := getState(t, h, "/v1/state?key=other"); len(st.Decisions) != 1 {
		t.Errorf("the state of a subject without an override: %+v; want per-minute's alone", st)
	}
	wantError(t, "the state of the removed per-day without an override", serve(h, call{method: http.MethodGet, target: "/v1/state?policy=per-day&key=other", auth: bearer(testToken)}),
		http.StatusNotFound, `unknown policy "per-day"`)
	wantError(t, "a tier of the removed per-day", serve(h, call{method: http.MethodGet, target: "/v1/state?policy=per-day&tier=pro&key=k", auth: bearer(testToken)}),
		http.StatusNotFound, `unknown policy "per-day"`)
	svc.Swap(loaded) // per-day is back: its override applies again
	if st := getState(t, h, "/v1/state?policy=per-day&key=k").Decisions[0]; st.Unused || st.Source != "override" || st.Algorithm != "gcra" || st.Limit != 9 {
		t.Errorf("the state once per-day is back: %+v; want its override in force, gcra, 9", st)
	}
	if all := getState(t, h, "/v1/state?key=k"); len(all.Decisions) != 2 || all.Decisions[1].Unused {
		t.Errorf("the state under every policy once per-day is back: %+v; want two policies, none unused", all)
	}
	svc.Swap(cfg)
	wantError(t, "a new override of the removed policy", overrideCall(h, http.MethodPut, `{"policy":"per-day","key":"k2","limit":9}`),
		http.StatusBadRequest, `unknown policy "per-day"`)
	if rec := overrideCall(h, http.MethodDelete, `{"policy":"per-day","key":"k"}`); rec.Code != http.StatusOK {
		t.Errorf("DELETE of the unused override = %d %s; want 200", rec.Code, rec.Body)
	}
}

// TestCorruptOverride writes bytes no SetOverride writes at a subject's override key in a real
// Redis: its decisions fail and the key stays as it was; GET /v1/state answers 200, that policy
// marked corrupt, naming the key and how to mend it, and the other policy read as ever; the
// listing answers 503 saying so; once the override is deleted, the state is the policy's again.
func TestCorruptOverride(t *testing.T) {
	srv := redistest.Start(t)
	store, err := redisstore.New(redisstore.Config{URL: srv.URL(), CommandTimeout: 2 * time.Second, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	h, svc := newHandler(t, store)
	if rec := overrideCall(h, http.MethodPut, `{"policy":"per-minute","key":"`+customer+`","limit":7}`); rec.Code != http.StatusOK {
		t.Fatalf("PUT = %d %s", rec.Code, rec.Body)
	}
	keys, err := srv.Do(t, "KEYS", "rl:per-minute:o:{*").AsStrSlice()
	if err != nil || len(keys) != 1 {
		t.Fatalf("KEYS of the override = %q, %v; want one", keys, err)
	}
	const garbage = "seven, please"
	srv.Do(t, "SET", keys[0], garbage)

	if _, err := svc.Check(t.Context(), service.Check{Policies: []string{"per-minute"}, Subject: admit.Subject{ID: customer}, Cost: 1}); !errors.Is(err, admit.ErrCorruptState) {
		t.Errorf("a decision under the corrupt override: %v; want corrupt state", err)
	}
	for _, target := range []string{"/v1/state?key=" + customer, "/v1/state?policy=per-minute&key=" + customer} {
		st := getState(t, h, target)
		minute := st.Decisions[0]
		if minute.Policy != "per-minute" || !minute.Corrupt || minute.Source != "override" || minute.Limit != 3 || minute.Remaining != 0 || !minute.Limited ||
			!strings.Contains(minute.Error, "override state is corrupt") || !strings.Contains(minute.Error, keys[0]) || !strings.Contains(minute.Error, "admit override delete") {
			t.Errorf("GET %s: per-minute %+v; want corrupt, source override, the policy's 3, an error naming %s and the delete", target, minute, keys[0])
		}
		if strings.Contains(target, "policy=") {
			if len(st.Decisions) != 1 {
				t.Errorf("GET %s: %d decisions; want 1", target, len(st.Decisions))
			}
			continue
		}
		if len(st.Decisions) != 2 || st.Decisions[1].Policy != "per-day" || st.Decisions[1].Corrupt || st.Decisions[1].Error != "" ||
			st.Decisions[1].Source != "policy" || st.Decisions[1].Remaining != 5 {
			t.Errorf("GET %s: %+v; want per-day read as ever beside the corrupt one", target, st.Decisions)
		}
	}
	rec := serve(h, call{method: http.MethodGet, target: "/v1/overrides?policy=per-minute", auth: bearer(testToken)})
	wantError(t, "the listing of a corrupt override", rec, http.StatusServiceUnavailable, "override state is corrupt: override \""+keys[0]+"\"")
	if rec.Header().Get("Retry-After") != "" {
		t.Errorf("the listing of a corrupt override: Retry-After %q; want none, a retry meets the same bytes", rec.Header().Get("Retry-After"))
	}
	if v, err := srv.Do(t, "GET", keys[0]).ToString(); err != nil || v != garbage {
		t.Errorf("the corrupt override is now %q, %v; want it unchanged", v, err)
	}
	if rec := overrideCall(h, http.MethodDelete, `{"policy":"per-minute","key":"`+customer+`"}`); rec.Code != http.StatusOK {
		t.Fatalf("DELETE of the corrupt override = %d %s; want 200", rec.Code, rec.Body)
	}
	if st := getState(t, h, "/v1/state?policy=per-minute&key="+customer).Decisions[0]; st.Corrupt || st.Source != "policy" || st.Remaining != 3 {
		t.Errorf("the state once the corrupt override is deleted: %+v; want the policy's 3", st)
	}
	if l := listOverrides(t, h, "policy=per-minute"); len(l.Overrides) != 0 {
		t.Errorf("the listing once the corrupt override is deleted: %+v; want none", l)
	}
}
