// Command barecheck is the reference admit serve's POST /v1/check is measured against in the
// service benchmark (bench/service_test.go): a bare net/http handler that decodes the same JSON
// with encoding/json, makes the same Store call (admit.Limiter's Take of one policy, the keys
// digested alike) on a memstore or a redisstore with its defaults, and answers the same JSON
// fields. No metrics, no guards, no tracing, no logging: what a hand-written service would do.
//
//	ADMIT_HMAC_SECRET=... barecheck [-listen 127.0.0.1:0] [-redis URL] [-policy NAME] [-limit N] [-window D]
//
// It logs "listening addr=HOST:PORT" on stderr once it accepts connections.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/redisstore"
)

// checkRequest is the body of a check, the fields of admit serve's that the benchmark sends.
type checkRequest struct {
	Policy string `json:"policy"`
	Key    string `json:"key"`
	Cost   *int64 `json:"cost,omitempty"`
}

// checkResponse is the answer, the fields of admit serve's.
type checkResponse struct {
	Allowed      bool   `json:"allowed"`
	Policy       string `json:"policy"`
	Limit        int64  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	RetryAfterMS int64  `json:"retry_after_ms"`
	ResetAfterMS int64  `json:"reset_after_ms"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "barecheck:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:0", "`address` to serve on")
	redisURL := flag.String("redis", "", "Redis `URL`; empty for memory")
	policy := flag.String("policy", "bench", "the policy's `name`")
	limit := flag.Int64("limit", 1_000_000_000, "the fixed window's `units`")
	window := flag.Duration("window", time.Second, "the fixed window's `length`")
	flag.Parse()
	keys, err := admit.NewKeyBuilder([]byte(os.Getenv("ADMIT_HMAC_SECRET")))
	if err != nil {
		return err
	}
	var store admit.Store = memstore.New(memstore.Options{})
	if *redisURL != "" {
		rs, err := redisstore.New(redisstore.Config{URL: *redisURL})
		if err != nil {
			return err
		}
		defer rs.Close()
		store = rs
	}
	lim := admit.Limit{Name: *policy, Algorithm: admit.FixedWindow, Rate: *limit, Period: *window}
	limiter := admit.NewLimiter(store, keys, lim)
	if err := limiter.Validate(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "listening addr=%s\n", ln.Addr())
	return http.Serve(ln, handler(limiter, *policy))
}

// handler answers POST /v1/check on limiter.
func handler(limiter *admit.Limiter, policy string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/check", func(w http.ResponseWriter, r *http.Request) {
		var req checkRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.Policy != policy {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		cost := int64(1)
		if req.Cost != nil {
			cost = *req.Cost
		}
		d, err := limiter.Take(r.Context(), admit.Subject{ID: req.Key}, cost, "", nil)
		switch {
		case errors.Is(err, admit.ErrInvalidRequest):
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		case err != nil:
			http.Error(w, `{"error":"unavailable"}`, http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if !d.Allowed {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		json.NewEncoder(w).Encode(checkResponse{Allowed: d.Allowed, Policy: policy, Limit: d.Limit.Capacity(),
			Remaining: d.Remaining, RetryAfterMS: d.RetryAfter.Milliseconds(), ResetAfterMS: d.ResetAfter.Milliseconds()})
	})
	return mux
}
