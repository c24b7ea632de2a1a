package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/httplimit"
)

// TestShadowPolicy rolls out a tighter limit in shadow mode beside an enforced one: requests the
// shadow policy would have limited pass, are reported to the hook and in the header, and the
// RateLimit fields name only the enforced policy.
func TestShadowPolicy(t *testing.T) {
	enforced := admit.Limit{Name: "per-minute", Algorithm: admit.FixedWindow, Rate: 10, Period: time.Minute}
	shadow := admit.Limit{Name: "tighter", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Minute, Shadow: true}
	var reported []admit.Decision
	var reportedFor []*http.Request
	m := &httplimit.Middleware{
		Limiter:      newLimiter(t, newMemstore(t), enforced, shadow),
		Subject:      httplimit.Constant("alice"),
		ShadowHeader: "admit-shadow-limited",
		OnShadowLimit: func(r *http.Request, d admit.Decision) {
			reportedFor = append(reportedFor, r)
			reported = append(reported, d)
		},
	}
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for i := range 12 {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		h.ServeHTTP(rec, req)
		wantStatus, wantShadow := http.StatusOK, ""
		if i >= 2 {
			wantShadow = `"tighter"`
		}
		if i >= 10 {
			wantStatus, wantShadow = http.StatusTooManyRequests, ""
		}
		if rec.Code != wantStatus || rec.Header().Get("Admit-Shadow-Limited") != wantShadow {
			t.Fatalf("request %d: %d, Admit-Shadow-Limited %q; want %d, %q", i, rec.Code, rec.Header().Get("Admit-Shadow-Limited"), wantStatus, wantShadow)
		}
		if p := rec.Header().Get("RateLimit-Policy"); p != `"per-minute";q=10;w=60` {
			t.Fatalf("request %d: RateLimit-Policy %q; want the enforced policy only", i, p)
		}
		if f := rec.Header().Get("RateLimit"); len(f) < 14 || f[:13] != `"per-minute";` {
			t.Fatalf("request %d: RateLimit %q; want the enforced policy only", i, f)
		}
		if i >= 2 && i < 10 && (len(reportedFor) != i-1 || reportedFor[i-2] != req) {
			t.Fatalf("request %d: %d reports; want this request reported", i, len(reportedFor))
		}
	}
	if len(reported) != 8 || reported[0].Limit != shadow || reported[0].Allowed {
		t.Errorf("reported %d shadow rejections, the first %+v; want 8 of the shadow policy", len(reported), reported)
	}
}
