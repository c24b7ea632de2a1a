package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/admin"
)

// The admin API answers only the token: here it reads alice's state under a policy after one request.
func Example() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	keys, err := admit.NewKeyBuilder([]byte("a secret every instance shares"))
	if err != nil {
		panic(err)
	}
	cfg, err := policy.Parse("admit.yaml", []byte("policies:\n  - name: per-minute\n    algorithm: fixed_window\n    limit: 3\n    window: 1m\n"))
	if err != nil {
		panic(err)
	}
	svc, err := service.New(store, keys, cfg)
	if err != nil {
		panic(err)
	}
	h, err := admin.New(admin.Options{Service: svc, Token: []byte("an admin token of 32 bytes or so")})
	if err != nil {
		panic(err)
	}
	if _, err := svc.Check(context.Background(), service.Check{Policies: []string{"per-minute"}, Subject: admit.Subject{ID: "alice"}, Cost: 1}); err != nil {
		panic(err)
	}

	for _, token := range []string{"a guess", "an admin token of 32 bytes or so"} {
		r := httptest.NewRequest(http.MethodGet, "/v1/state?policy=per-minute&key=alice", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK {
			fmt.Printf("%d %s", rec.Code, rec.Body)
			continue
		}
		var state admin.StateResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &state); err != nil {
			panic(err)
		}
		d := state.Decisions[0]
		fmt.Printf("%d %s: %d of %d left (from the %s), reset within the window: %v\n", rec.Code, d.Policy, d.Remaining, d.Limit, d.Source, d.ResetAfterMS > 0 && d.ResetAfterMS <= d.WindowMS)
	}
	// Output:
	// 401 {"error":"unauthorized"}
	// 200 per-minute: 2 of 3 left (from the policy), reset within the window: true
}

// A reset gives a subject its whole allowance back, and logs the change with the subject's digest.
func ExampleHandler_reset() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	keys, err := admit.NewKeyBuilder([]byte("a secret every instance shares"))
	if err != nil {
		panic(err)
	}
	cfg, err := policy.Parse("admit.yaml", []byte("policies:\n  - name: per-minute\n    algorithm: fixed_window\n    limit: 1\n    window: 1m\n"))
	if err != nil {
		panic(err)
	}
	svc, err := service.New(store, keys, cfg)
	if err != nil {
		panic(err)
	}
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	h, err := admin.New(admin.Options{
		Service:  svc,
		Token:    []byte("an admin token of 32 bytes or so"),
		Logger:   slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: noTime})),
		OnChange: func(action string) { fmt.Println("counted:", action) },
	})
	if err != nil {
		panic(err)
	}
	check := service.Check{Policies: []string{"per-minute"}, Subject: admit.Subject{ID: "alice"}, Cost: 1}
	svc.Check(context.Background(), check)

	r := httptest.NewRequest(http.MethodPost, "/v1/reset", strings.NewReader(`{"policy":"per-minute","key":"alice","reason":"ticket 12"}`))
	r.RemoteAddr = "192.0.2.7:50000"
	r.Header.Set("Authorization", "Bearer an admin token of 32 bytes or so")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	fmt.Print(rec.Code, " ", rec.Body)
	res, _ := svc.Check(context.Background(), check)
	fmt.Println("alice admitted again:", res.Allowed)
	// Output:
	// level=INFO msg="admin change" action=reset policy=per-minute subject_digest=744b6e9d73ffad6cdff12e638c468022 reason="ticket 12" client=192.0.2.7 result=ok
	// counted: reset
	// 200 {"reset":true,"policy":"per-minute","keys":1}
	// alice admitted again: true
}
