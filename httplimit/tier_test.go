package httplimit_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/httplimit"
	"github.com/admit-dev/admit/memstore"
)

// TestMiddlewareTier: the Tier function's tier goes into the Subject the Limiter decides, so a
// pro request is decided under the pro Limit, with the RateLimit fields of the Limits that decided;
// without a tier, the policy's own; the Tier function's errors are answered as the subject
// function's; an unknown tier is the server's mistake, 500.
func TestMiddlewareTier(t *testing.T) {
	own := admit.Limit{Name: "api", Algorithm: admit.FixedWindow, Rate: 1, Period: 10 * time.Second}
	pro := own
	pro.Tier, pro.Rate = "pro", 3
	store := memstore.New(memstore.Options{})
	defer store.Close()
	m := httplimit.Middleware{
		Limiter:     newLimiter(t, store, own, pro),
		Subject:     principal,
		LogInterval: -1,
		Tier: func(r *http.Request) (string, error) {
			switch tier := r.Header.Get("Test-Tier"); tier {
			case "malformed":
				return "", fmt.Errorf("bad plan: %w", httplimit.ErrMalformedRequest)
			case "down":
				return "", errors.New("the accounts service is down")
			default:
				return tier, nil
			}
		},
	}
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("next\n")) }))
	send := func(principal, tier string) *http.Response {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Test-Principal", principal)
		r.Header.Set("Test-Tier", tier)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Result()
	}
	for i, want := range []int{200, 200, 200, 429} {
		res := send("alice", "pro")
		if res.StatusCode != want {
			t.Fatalf("pro request %d: %d; want %d", i+1, res.StatusCode, want)
		}
		if got := res.Header.Get("RateLimit-Policy"); got != `"api";q=3;w=10` {
			t.Errorf("pro request %d: RateLimit-Policy %q; want the pro Limit's q=3", i+1, got)
		}
	}
	for i, want := range []int{200, 429} {
		res := send("bob", "")
		if res.StatusCode != want || res.Header.Get("RateLimit-Policy") != `"api";q=1;w=10` {
			t.Errorf("request %d without a tier: %d, RateLimit-Policy %q; want %d under the policy's own q=1", i+1, res.StatusCode, res.Header.Get("RateLimit-Policy"), want)
		}
	}
	for tier, want := range map[string]int{"malformed": 400, "down": 503, "gold": 500} {
		if res := send("carol", tier); res.StatusCode != want {
			t.Errorf("tier %q: %d; want %d", tier, res.StatusCode, want)
		}
	}
}
