package httpapi

import (
	"bytes"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/jsonanswer"
	"github.com/admit-dev/admit/service"
)

// TestWriteCheckAsEncodingJSON holds writeCheck to jsonanswer.Write of NewCheckResponse: the same
// status, header fields and bytes for 5,000 random Results, their names plain or not, and the plain
// ones encoded by appendCheck.
func TestWriteCheckAsEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	names := []string{"per-second", "api_v2.read", "a", "é", "a<b", "x&y", `q"uote`, `back\slash`, "tab\t", "del\x7f", "\u2028", "\xff"}
	num := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return -rng.Int64()
		}
		return rng.Int64N(1 << rng.IntN(63))
	}
	appended := 0
	for range 5000 {
		res := service.Result{Allowed: rng.IntN(2) == 0, Replayed: rng.IntN(3) == 0, Degraded: rng.IntN(3) == 0}
		for range 1 + rng.IntN(3) {
			lim := admit.Limit{Name: names[rng.IntN(len(names))], Rate: num(), Shadow: rng.IntN(3) == 0}
			if rng.IntN(2) == 0 {
				lim.Algorithm, lim.Burst = admit.GCRA, num()
			}
			res.Decisions = append(res.Decisions, admit.Decision{Limit: lim, Allowed: rng.IntN(2) == 0, Degraded: rng.IntN(3) == 0,
				Remaining: num(), RetryAfter: time.Duration(num()), ResetAfter: time.Duration(num())})
		}
		res.Deciding = rng.IntN(len(res.Decisions))
		status := []int{http.StatusOK, http.StatusTooManyRequests, http.StatusForbidden}[rng.IntN(3)]
		got, want := httptest.NewRecorder(), httptest.NewRecorder()
		writeCheck(got, status, res)
		jsonanswer.Write(want, status, NewCheckResponse(res))
		if got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) || len(got.Header()) != len(want.Header()) {
			t.Fatalf("writeCheck of %+v:\n%d %v %s\njsonanswer.Write:\n%d %v %s", res, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
		}
		for k, v := range want.Header() {
			if g := got.Header()[k]; len(g) != len(v) || g[0] != v[0] {
				t.Fatalf("header %s: %q, want %q", k, g, v)
			}
		}
		if _, ok := appendCheck(nil, res); ok {
			appended++
		}
	}
	if appended < 500 {
		t.Errorf("appendCheck encoded %d of 5,000 Results: want the plain ones, at least 500", appended)
	}
}
