package httplimit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/httplimit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/ratelimitfield"
	"github.com/admit-dev/admit/limittest"
	"github.com/admit-dev/admit/memstore"
)

// frozenStore returns a memstore whose clock moves only when the returned clock is advanced.
func frozenStore(t testing.TB) (*memstore.Store, *limittest.Clock) {
	clock := limittest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := memstore.New(memstore.Options{Now: clock.Now})
	t.Cleanup(func() { s.Close() })
	return s, clock
}

// member is one member of a RateLimit-Policy or RateLimit field: a policy's name and parameters.
type member struct {
	name   string
	params map[string]any
}

// parseField parses the lines of a RateLimit-Policy or RateLimit field as a structured-field list
// (RFC 9651) whose members are Strings with parameters (draft-ietf-httpapi-ratelimit-headers-11),
// and checks that serializing the list again gives back the field as sent: a round trip.
func parseField(t testing.TB, lines []string) []member {
	t.Helper()
	if len(lines) != 1 {
		t.Fatalf("%d field lines %q, want 1", len(lines), lines)
	}
	list, err := httpsfv.UnmarshalList(lines)
	if err != nil {
		t.Fatalf("%q is not a structured-field list: %v", lines[0], err)
	}
	if again, err := httpsfv.Marshal(list); err != nil || again != lines[0] {
		t.Fatalf("%q serializes again as %q, %v", lines[0], again, err)
	}
	var ms []member
	for _, m := range list {
		item, ok := m.(httpsfv.Item)
		if !ok {
			t.Fatalf("%q: member %v is not an Item", lines[0], m)
		}
		name, ok := item.Value.(string)
		if !ok {
			t.Fatalf("%q: member %v is not a String", lines[0], item.Value)
		}
		mm := member{name: name, params: map[string]any{}}
		for _, k := range item.Params.Names() {
			mm.params[k], _ = item.Params.Get(k)
		}
		ms = append(ms, mm)
	}
	return ms
}

// rateLimitFields parses both fields of h and checks that they name the same policies, in order.
func rateLimitFields(t testing.TB, h http.Header) (policy, limit []member) {
	t.Helper()
	policy, limit = parseField(t, h.Values("RateLimit-Policy")), parseField(t, h.Values("RateLimit"))
	if len(policy) != len(limit) {
		t.Fatalf("RateLimit-Policy has %d members, RateLimit %d", len(policy), len(limit))
	}
	for i := range policy {
		if policy[i].name != limit[i].name {
			t.Fatalf("member %d: RateLimit-Policy names %q, RateLimit %q", i, policy[i].name, limit[i].name)
		}
	}
	return policy, limit
}

// intParam returns m's parameter k, which must be a non-negative Integer.
func intParam(t testing.TB, m member, k string) int64 {
	t.Helper()
	v, ok := m.params[k].(int64)
	if !ok || v < 0 {
		t.Fatalf("%s: %s=%v (%T), want a non-negative Integer", m.name, k, m.params[k], m.params[k])
	}
	return v
}

// checkRetryAfter checks that no member of RateLimit has a t below the response's Retry-After,
// and returns Retry-After.
func checkRetryAfter(t testing.TB, h http.Header, limit []member) int64 {
	t.Helper()
	ra, err := strconv.ParseInt(h.Get("Retry-After"), 10, 64)
	if err != nil || ra < 1 {
		t.Fatalf("Retry-After %q, want an integer ≥ 1", h.Get("Retry-After"))
	}
	for _, m := range limit {
		if tt := intParam(t, m, "t"); tt < ra {
			t.Errorf("%s: t=%d below Retry-After %d", m.name, tt, ra)
		}
	}
	return ra
}

func TestRateLimitHeaders(t *testing.T) {
	store, _ := frozenStore(t)
	m := &httplimit.Middleware{Limiter: newLimiter(t, store, demoLimit), Subject: httplimit.Constant("a")}
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The fields are set before next runs, so next can see them, and they go out with its answer.
		if w.Header().Get("RateLimit") == "" {
			t.Error("next handler: no RateLimit field")
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	for i, wantR := range []int64{2, 1, 0, 0, 0} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		policy, limit := rateLimitFields(t, rec.Header())
		if len(policy) != 1 || policy[0].name != "demo" || intParam(t, policy[0], "q") != 3 || intParam(t, policy[0], "w") != 10 || len(policy[0].params) != 2 {
			t.Errorf("request %d: RateLimit-Policy %q, want \"demo\";q=3;w=10", i+1, rec.Header().Get("RateLimit-Policy"))
		}
		if r, tt := intParam(t, limit[0], "r"), intParam(t, limit[0], "t"); r != wantR || tt != 10 || len(limit[0].params) != 2 {
			t.Errorf("request %d: RateLimit %q, want r=%d;t=10 (a frozen clock)", i+1, rec.Header().Get("RateLimit"), wantR)
		}
		if i < 3 {
			if rec.Code != http.StatusNoContent || rec.Header().Get("Cache-Control") != "" {
				t.Errorf("request %d: %d, Cache-Control %q; want the next handler's 204, cacheable", i+1, rec.Code, rec.Header().Get("Cache-Control"))
			}
			continue
		}
		if rec.Code != http.StatusTooManyRequests || checkRetryAfter(t, rec.Header(), limit) != 10 {
			t.Errorf("request %d: %d, want 429 with Retry-After 10", i+1, rec.Code)
		}
	}
}

// TestRateLimitHeadersManyPolicies checks a Limiter of MaxRequests policies, the most it can have:
// each has its member in both fields, in order, and the one that rejects is named in the problem.
func TestRateLimitHeadersManyPolicies(t *testing.T) {
	store, _ := frozenStore(t)
	limits := make([]admit.Limit, bound.MaxRequests)
	for i := range limits {
		limits[i] = admit.Limit{Name: "p" + strconv.Itoa(i), Algorithm: admit.FixedWindow, Rate: int64(len(limits) - i), Period: time.Minute}
	}
	m := &httplimit.Middleware{Limiter: newLimiter(t, store, limits...), Subject: httplimit.Constant("a"), ProblemDetails: true}
	h := m.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i := range 2 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		policy, limit := rateLimitFields(t, rec.Header())
		if len(policy) != len(limits) {
			t.Fatalf("request %d: %d members, want %d", i+1, len(policy), len(limits))
		}
		for j, l := range limits {
			if policy[j].name != l.Name || intParam(t, policy[j], "q") != l.Rate {
				t.Errorf("request %d: RateLimit-Policy member %d is %q;q=%d, want %q;q=%d", i+1, j, policy[j].name, intParam(t, policy[j], "q"), l.Name, l.Rate)
			}
			if want := max(l.Rate-1, 0); intParam(t, limit[j], "r") != want {
				t.Errorf("request %d: RateLimit member %d has r=%d, want %d", i+1, j, intParam(t, limit[j], "r"), want)
			}
		}
		if i == 0 {
			if rec.Code != http.StatusOK {
				t.Fatalf("request 1: %d, want 200", rec.Code)
			}
			continue
		}
		var p struct {
			Violated []string `json:"violated-policies"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &p); rec.Code != http.StatusTooManyRequests || err != nil || len(p.Violated) != 1 || p.Violated[0] != "p15" {
			t.Errorf("request 2: %d, %s (%v); want 429 violating p15", rec.Code, rec.Body, err)
		}
	}
}

// TestRateLimitHeadersTwoPolicies checks a Limiter of two policies of different windows: both
// fields list both, in the Limiter's order, whichever decides.
func TestRateLimitHeadersTwoPolicies(t *testing.T) {
	store, clock := frozenStore(t)
	perSecond := admit.Limit{Name: "per-second", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Second}
	perDay := admit.Limit{Name: "per-day", Algorithm: admit.FixedWindow, Rate: 3, Period: 24 * time.Hour}
	m := &httplimit.Middleware{Limiter: newLimiter(t, store, perSecond, perDay), Subject: httplimit.Constant("a"), ProblemDetails: true}
	h := m.Wrap(http.NotFoundHandler())
	const policyField = `"per-second";q=2;w=1, "per-day";q=3;w=86400`
	for i, step := range []struct {
		advance  time.Duration
		status   int
		field    string // RateLimit
		violated []string
	}{
		{0, 404, `"per-second";r=1;t=1, "per-day";r=2;t=86400`, nil},
		{0, 404, `"per-second";r=0;t=1, "per-day";r=1;t=86400`, nil},
		// per-second rejects; per-day would have admitted, and keeps its r: nothing is consumed.
		{0, 429, `"per-second";r=0;t=1, "per-day";r=1;t=86400`, []string{"per-second"}},
		{time.Second, 404, `"per-second";r=1;t=1, "per-day";r=0;t=86399`, nil},
		// per-day rejects, for the rest of the day: t is never below Retry-After.
		{0, 429, `"per-second";r=1;t=86399, "per-day";r=0;t=86399`, []string{"per-day"}},
		{time.Second, 429, `"per-second";r=2;t=86398, "per-day";r=0;t=86398`, []string{"per-day"}},
	} {
		clock.Advance(step.advance)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		rateLimitFields(t, rec.Header())
		if rec.Code != step.status || rec.Header().Get("RateLimit-Policy") != policyField || rec.Header().Get("RateLimit") != step.field {
			t.Errorf("request %d: %d\nRateLimit-Policy: %s\nRateLimit: %s\nwant %d\nRateLimit-Policy: %s\nRateLimit: %s",
				i+1, rec.Code, rec.Header().Get("RateLimit-Policy"), rec.Header().Get("RateLimit"), step.status, policyField, step.field)
		}
		if step.status != http.StatusTooManyRequests {
			continue
		}
		_, limit := rateLimitFields(t, rec.Header())
		ra := checkRetryAfter(t, rec.Header(), limit)
		var p struct {
			Type, Title, Detail string
			Status              int
			Violated            []string `json:"violated-policies"`
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("request %d: Content-Type %q, want application/problem+json", i+1, ct)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
			t.Fatalf("request %d: body %q: %v", i+1, rec.Body, err)
		}
		if p.Type != httplimit.QuotaExceededType || p.Title != httplimit.QuotaExceededTitle || p.Status != 429 ||
			fmt.Sprint(p.Violated) != fmt.Sprint(step.violated) || !strings.Contains(p.Detail, strconv.FormatInt(ra, 10)) {
			t.Errorf("request %d: problem %+v, want type %s, status 429, violated-policies %q, the Retry-After in its detail", i+1, p, httplimit.QuotaExceededType, step.violated)
		}
		if rec.Header().Get("Cache-Control") != "no-store" || rec.Header().Get("Content-Length") != strconv.Itoa(rec.Body.Len()) {
			t.Errorf("request %d: Cache-Control %q, Content-Length %q for %d bytes", i+1, rec.Header().Get("Cache-Control"), rec.Header().Get("Content-Length"), rec.Body.Len())
		}
	}
}

// serveOnce sends one GET through a Middleware of limits on store, its subject constant, and
// returns the response.
func serveOnce(t testing.TB, store admit.Store, limits ...admit.Limit) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	m := &httplimit.Middleware{Limiter: newLimiter(t, store, limits...), Subject: httplimit.Constant("a")}
	m.Wrap(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	return rec
}

// TestRateLimitPolicyOfEachAlgorithm checks q, w and qu for each algorithm.
func TestRateLimitPolicyOfEachAlgorithm(t *testing.T) {
	for _, tc := range []struct {
		limit admit.Limit
		want  string
	}{
		{admit.Limit{Name: "fw", Algorithm: admit.FixedWindow, Rate: 100, Period: 1500 * time.Millisecond}, `"fw";q=100;w=2`},
		{admit.Limit{Name: "aligned", Algorithm: admit.FixedWindow, Rate: 7, Period: time.Minute, Aligned: true}, `"aligned";q=7;w=60`},
		{admit.Limit{Name: "sw", Algorithm: admit.SlidingWindow, Rate: 10, Period: time.Hour}, `"sw";q=10;w=3600`},
		{admit.Limit{Name: "log", Algorithm: admit.SlidingLog, Rate: 5, Period: 100 * time.Millisecond}, `"log";q=5;w=1`},
		// GCRA: the bucket, and the time it takes to fill: 20 units at 10 a second.
		{admit.Limit{Name: "gcra", Algorithm: admit.GCRA, Rate: 10, Period: time.Second, Burst: 20}, `"gcra";q=20;w=2`},
		{admit.Limit{Name: "gcra-rate", Algorithm: admit.GCRA, Rate: 60, Period: time.Minute}, `"gcra-rate";q=60;w=60`},
		// The window is Burst × Period / Rate, exactly: not Burst × the emission interval, which
		// rounds 10 s / 3 up to 3.333334 s, and 3 of them up to 11 s.
		{admit.Limit{Name: "gcra-3", Algorithm: admit.GCRA, Rate: 3, Period: 10 * time.Second, Burst: 3}, `"gcra-3";q=3;w=10`},
		{admit.Limit{Name: "gcra-7", Algorithm: admit.GCRA, Rate: 7, Period: time.Second}, `"gcra-7";q=7;w=1`},
		{admit.Limit{Name: "inflight", Algorithm: admit.Concurrency, Rate: 4, Period: time.Minute}, `"inflight";q=4;qu="concurrent-requests"`},
	} {
		if err := tc.limit.Validate(); err != nil {
			t.Fatal(err)
		}
		store := storeFunc(func(_ context.Context, r admit.Request) (admit.Decision, error) {
			return admit.Decision{Allowed: true, Limit: r.Limit, Remaining: 1, ResetAfter: time.Second}, nil
		})
		rec := serveOnce(t, store, tc.limit)
		rateLimitFields(t, rec.Header())
		if got := rec.Header().Get("RateLimit-Policy"); got != tc.want {
			t.Errorf("%v: RateLimit-Policy %s, want %s", tc.limit, got, tc.want)
		}
	}
}

// TestRateLimitTRoundsUp checks t, the effective window, rounded up: a policy (not GCRA) that
// admitted reports its ResetAfter (0 for none), one that rejected its RetryAfter.
func TestRateLimitTRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		d        admit.Decision
		want     string
		retryHdr string
	}{
		{admit.Decision{Allowed: true, Remaining: 5, ResetAfter: 1500 * time.Millisecond}, `"demo";r=5;t=2`, ""},
		{admit.Decision{Allowed: true, Remaining: 3}, `"demo";r=3;t=0`, ""},
		{admit.Decision{Allowed: true, Remaining: -1, ResetAfter: time.Nanosecond}, `"demo";r=0;t=1`, ""},
		{admit.Decision{RetryAfter: 300 * time.Millisecond, ResetAfter: 9 * time.Second}, `"demo";r=0;t=1`, "1"},
		{admit.Decision{RetryAfter: 2001 * time.Millisecond, ResetAfter: 9 * time.Second}, `"demo";r=0;t=3`, "3"},
	} {
		store := storeFunc(func(_ context.Context, r admit.Request) (admit.Decision, error) {
			d := tc.d
			d.Limit = r.Limit
			return d, nil
		})
		rec := serveOnce(t, store, demoLimit)
		rateLimitFields(t, rec.Header())
		if got, ra := rec.Header().Get("RateLimit"), rec.Header().Get("Retry-After"); got != tc.want || ra != tc.retryHdr {
			t.Errorf("%+v: RateLimit %s, Retry-After %q; want %s, %q", tc.d, got, ra, tc.want, tc.retryHdr)
		}
	}
}

// TestRateLimitTIsTheEffectiveWindow checks t against the store that decides, for fixed windows
// and GCRA, at random times: once an admitted response's r units are used, at once, the next unit
// is rejected with a Retry-After of exactly t (no quota beyond r comes back before t: for GCRA
// the next unit regained, not the bucket full again); and a 429's t is its Retry-After.
func TestRateLimitTIsTheEffectiveWindow(t *testing.T) {
	for _, lim := range []admit.Limit{
		{Name: "fw", Algorithm: admit.FixedWindow, Rate: 3, Period: 10 * time.Second},
		{Name: "aligned", Algorithm: admit.FixedWindow, Rate: 5, Period: time.Minute, Aligned: true},
		{Name: "gcra-3", Algorithm: admit.GCRA, Rate: 3, Period: 10 * time.Second, Burst: 3},
		{Name: "gcra-readme", Algorithm: admit.GCRA, Rate: 10, Period: time.Second, Burst: 20},
		{Name: "gcra-7", Algorithm: admit.GCRA, Rate: 7, Period: time.Second, Burst: 1},
		{Name: "gcra-slow", Algorithm: admit.GCRA, Rate: 1, Period: time.Hour, Burst: 5},
	} {
		t.Run(lim.Name, func(t *testing.T) {
			store, clock := frozenStore(t)
			limiter := newLimiter(t, store, lim)
			h := (&httplimit.Middleware{Limiter: limiter, Subject: httplimit.Constant("a")}).Wrap(http.NotFoundHandler())
			rng := rand.New(rand.NewPCG(1, uint64(lim.Rate)))
			admitted, limited := 0, 0
			for step := range 300 {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
				_, members := rateLimitFields(t, rec.Header())
				r, tt := intParam(t, members[0], "r"), intParam(t, members[0], "t")
				switch rec.Code {
				case http.StatusTooManyRequests:
					limited++
					if ra := checkRetryAfter(t, rec.Header(), members); tt != ra {
						t.Fatalf("step %d: 429 with t=%d, Retry-After %d; want t = Retry-After", step, tt, ra)
					}
				case http.StatusNotFound:
					admitted++
					if r > 0 {
						if d, err := limiter.AllowN(context.Background(), admit.Subject{ID: "a"}, r); err != nil || !d.Allowed {
							t.Fatalf("step %d: r=%d, and taking them: %+v, %v", step, r, d, err)
						}
					}
					d, err := limiter.AllowN(context.Background(), admit.Subject{ID: "a"}, 1)
					if err != nil || d.Allowed {
						t.Fatalf("step %d: r=%d;t=%d, and one unit beyond r: %+v, %v; want a rejection", step, r, tt, d, err)
					}
					if got := ratelimitfield.RetryAfter(d); got != tt {
						t.Fatalf("step %d: r=%d;t=%d, but once r is used the next unit comes back after %v (Retry-After %d)", step, r, tt, d.RetryAfter, got)
					}
				default:
					t.Fatalf("step %d: status %d", step, rec.Code)
				}
				// Anything from nothing to past the time the whole quota takes to come back.
				clock.Advance(time.Duration(rng.Int64N(int64(lim.MaxWait()*5/4) + 1)))
			}
			if admitted == 0 || limited == 0 {
				t.Fatalf("%d admitted, %d limited: the test saw too little", admitted, limited)
			}
		})
	}
}

// TestRateLimitHeadersOnlyWhenDecided checks that the fields come with admitted and 429 responses
// only, and with none when switched off.
func TestRateLimitHeadersOnlyWhenDecided(t *testing.T) {
	for _, tc := range []struct {
		name   string
		m      httplimit.Middleware
		status int
		fields bool
	}{
		{"admitted", httplimit.Middleware{Limiter: newLimiter(t, newMemstore(t), demoLimit), Subject: httplimit.Constant("a")}, 404, true},
		{"off", httplimit.Middleware{Limiter: newLimiter(t, newMemstore(t), demoLimit), Subject: httplimit.Constant("a"), OmitRateLimitHeaders: true}, 404, false},
		{"unavailable", httplimit.Middleware{Limiter: newLimiter(t, failingStore(admit.ErrUnavailable), demoLimit), Subject: httplimit.Constant("a")}, 503, false},
		{"malformed", httplimit.Middleware{Limiter: newLimiter(t, newMemstore(t), demoLimit), Subject: func(*http.Request) (admit.Subject, error) {
			return admit.Subject{}, httplimit.ErrMalformedRequest
		}}, 400, false},
		{"invalid", httplimit.Middleware{Limiter: newLimiter(t, newMemstore(t), demoLimit), Subject: httplimit.Constant("")}, 500, false},
	} {
		tc.m.Logger = slog.New(slog.DiscardHandler)
		rec := httptest.NewRecorder()
		tc.m.Wrap(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		_, p := rec.Header()["Ratelimit-Policy"]
		_, l := rec.Header()["Ratelimit"]
		if rec.Code != tc.status || p != tc.fields || l != tc.fields {
			t.Errorf("%s: %d with RateLimit-Policy %v, RateLimit %v; want %d with both %v", tc.name, rec.Code, p, l, tc.status, tc.fields)
		}
	}
}

// FuzzRateLimitHeaders serializes the fields of random Decisions under a random policy beside a
// fixed one, and checks that they parse as structured fields and serialize again the same (a
// round trip), with the policies' names, q, w, r and t, and no t below Retry-After.
func FuzzRateLimitHeaders(f *testing.F) {
	f.Add("demo", uint8(admit.FixedWindow), int64(3), int64(10_000), int64(0), int64(2), int64(0), int64(9e9), true)
	f.Add("g-1_x", uint8(admit.GCRA), int64(10), int64(1000), int64(20), int64(0), int64(3e8), int64(2e9), false)
	f.Add("c", uint8(admit.Concurrency), int64(2), int64(60_000), int64(0), int64(-4), int64(-1), int64(-1), false)
	f.Add("sw", uint8(admit.SlidingWindow), int64(bound.MaxRate), int64(366*24*3600*1000), int64(0), int64(1<<62), int64(1<<62), int64(1<<62), true)
	f.Fuzz(func(t *testing.T, name string, algo uint8, rate, periodMs, burst, remaining, retryAfter, resetAfter int64, allowed bool) {
		lim := admit.Limit{Name: name, Algorithm: admit.Algorithm(algo), Rate: rate, Period: time.Duration(periodMs) * time.Millisecond, Burst: burst}
		if lim.Validate() != nil || lim.Name == "fixed" || !validName(lim.Name) {
			t.Skip()
		}
		fixed := admit.Limit{Name: "fixed", Algorithm: admit.FixedWindow, Rate: 5, Period: time.Minute}
		store := storeFunc(func(_ context.Context, r admit.Request) (admit.Decision, error) {
			if r.Limit.Name == "fixed" {
				return admit.Decision{Allowed: true, Limit: r.Limit, Remaining: 4, ResetAfter: time.Minute}, nil
			}
			return admit.Decision{Allowed: allowed, Limit: r.Limit, Remaining: remaining, RetryAfter: time.Duration(retryAfter), ResetAfter: time.Duration(resetAfter)}, nil
		})
		rec := serveOnce(t, store, lim, fixed)
		policy, limit := rateLimitFields(t, rec.Header())
		if len(policy) != 2 || policy[0].name != lim.Name || policy[1].name != "fixed" {
			t.Fatalf("members %v, want %s and fixed", policy, lim.Name)
		}
		if q := intParam(t, policy[0], "q"); q != min(lim.Capacity(), 999_999_999_999_999) {
			t.Errorf("q=%d, want %d (at most 15 digits)", q, lim.Capacity())
		}
		if lim.Algorithm == admit.Concurrency {
			if policy[0].params["qu"] != "concurrent-requests" || policy[0].params["w"] != nil {
				t.Errorf("concurrency policy %v, want qu=\"concurrent-requests\" and no w", policy[0].params)
			}
		} else if w := intParam(t, policy[0], "w"); w < 1 || time.Duration(w)*time.Second < lim.Period && lim.Algorithm != admit.GCRA {
			t.Errorf("w=%d for %v", w, lim)
		}
		if r, want := intParam(t, limit[0], "r"), min(max(remaining, 0), 999_999_999_999_999); r != want {
			t.Errorf("r=%d, want %d", r, want)
		}
		tt := intParam(t, limit[0], "t")
		if lim.Algorithm == admit.GCRA && allowed && rec.Code != http.StatusTooManyRequests && tt > ratelimitfield.CeilSeconds(lim.EmissionInterval()) {
			// An admitting GCRA policy regains a unit beyond r within one emission interval.
			t.Errorf("GCRA admitted: t=%d beyond the emission interval %v", tt, lim.EmissionInterval())
		}
		if rec.Code == http.StatusTooManyRequests {
			checkRetryAfter(t, rec.Header(), limit)
		} else if allowed == (rec.Code == http.StatusTooManyRequests) {
			t.Errorf("status %d for allowed=%v", rec.Code, allowed)
		}
	})
}

// validName reports whether s is a valid policy name: 1 to 64 of a-z, 0-9, '_' and '-'.
func validName(s string) bool {
	return s != "" && len(s) <= bound.MaxNameLen && strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789_-") == ""
}

// TestRateLimitGCRAExample checks docs/http.md's GCRA examples: 3 per 10 s with a burst of 3
// answers three requests at once with q=3;w=10 and t=4 each (a unit comes back 3.33 s later),
// then 429 with Retry-After: 4; 10 per second with a burst of 20 answers q=20;w=2 and r=19;t=1.
func TestRateLimitGCRAExample(t *testing.T) {
	for _, tc := range []struct {
		limit admit.Limit
		want  []string // RateLimit-Policy, then RateLimit and Retry-After of each request
	}{
		{admit.Limit{Name: "g", Algorithm: admit.GCRA, Rate: 3, Period: 10 * time.Second, Burst: 3},
			[]string{`"g";q=3;w=10`, `"g";r=2;t=4`, "", `"g";r=1;t=4`, "", `"g";r=0;t=4`, "", `"g";r=0;t=4`, "4"}},
		{admit.Limit{Name: "per-second", Algorithm: admit.GCRA, Rate: 10, Period: time.Second, Burst: 20},
			[]string{`"per-second";q=20;w=2`, `"per-second";r=19;t=1`, ""}},
	} {
		store, _ := frozenStore(t)
		h := (&httplimit.Middleware{Limiter: newLimiter(t, store, tc.limit), Subject: httplimit.Constant("a")}).Wrap(http.NotFoundHandler())
		for i := 1; i < len(tc.want); i += 2 {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			rateLimitFields(t, rec.Header())
			if p := rec.Header().Get("RateLimit-Policy"); p != tc.want[0] {
				t.Errorf("%v: RateLimit-Policy %s; want %s", tc.limit, p, tc.want[0])
			}
			if got, ra := rec.Header().Get("RateLimit"), rec.Header().Get("Retry-After"); got != tc.want[i] || ra != tc.want[i+1] {
				t.Errorf("%v, request %d: RateLimit %s, Retry-After %q; want %s, %q", tc.limit, i/2+1, got, ra, tc.want[i], tc.want[i+1])
			}
		}
	}
}
