package rls_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/policy/envoyconf"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/rls"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
)

func Example() {
	cfg, err := envoyconf.Parse(envoyconf.File{Name: "mongo_cps.yaml", Data: []byte(`
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: day
      requests_per_unit: 2
`)})
	if err != nil {
		panic(err)
	}
	store := memstore.New(memstore.Options{})
	defer store.Close()
	keys, _ := admit.NewKeyBuilder([]byte("a secret of at least 16 bytes"))
	svc, _ := service.New(store, keys, &policy.Config{}) // no policies of its own: it decides Envoy's rules
	s, _ := rls.New(rls.Options{Service: svc, Config: cfg})
	g, _ := rls.NewGRPCServer(s)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go g.Serve(ln)
	defer g.GracefulStop()

	conn, _ := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	req := &rlsv3.RateLimitRequest{Domain: "mongo_cps", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "database", Value: "users"}},
	}}}
	for range 3 {
		resp, err := client.ShouldRateLimit(context.Background(), req)
		if err != nil {
			fmt.Println(err)
			return
		}
		st := resp.Statuses[0]
		fmt.Println(resp.OverallCode, st.CurrentLimit.RequestsPerUnit, st.CurrentLimit.Unit, st.LimitRemaining)
	}
	// Output:
	// OK 2 DAY 1
	// OK 2 DAY 0
	// OVER_LIMIT 2 DAY 0
}

// JSONHandler answers envoyproxy/ratelimit's POST /json: 200, then 429 when over the limit.
func ExampleJSONHandler() {
	cfg, err := envoyconf.Parse(envoyconf.File{Name: "mongo_cps.yaml", Data: []byte(`
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: day
      requests_per_unit: 1
`)})
	if err != nil {
		panic(err)
	}
	store := memstore.New(memstore.Options{})
	defer store.Close()
	keys, _ := admit.NewKeyBuilder([]byte("a secret of at least 16 bytes"))
	svc, _ := service.New(store, keys, &policy.Config{})
	s, _ := rls.New(rls.Options{Service: svc, Config: cfg, Ops: rls.Ops{ResponseHeaders: true}})
	web := httptest.NewServer(rls.JSONHandler(s))
	defer web.Close()
	for range 2 {
		resp, err := http.Post(web.URL, "application/json",
			strings.NewReader(`{"domain": "mongo_cps", "descriptors": [{"entries": [{"key": "database", "value": "users"}]}]}`))
		if err != nil {
			fmt.Println(err)
			return
		}
		var answer rlsv3.RateLimitResponse
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := protojson.Unmarshal(body, &answer); err != nil {
			fmt.Println(err)
			return
		}
		h := answer.ResponseHeadersToAdd
		fmt.Println(resp.StatusCode, answer.OverallCode, h[0].Key, h[0].Value, h[1].Key, h[1].Value)
	}
	// Output:
	// 200 OK RateLimit-Limit 1 RateLimit-Remaining 0
	// 429 OVER_LIMIT RateLimit-Limit 1 RateLimit-Remaining 0
}
