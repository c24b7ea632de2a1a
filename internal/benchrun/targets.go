package benchrun

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/loadgen"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/httpapi"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// httpTarget is admit serve's POST /v1/check.
type httpTarget struct {
	client   *http.Client
	url      string
	policies []string
	token    string // sent as Authorization: Bearer, if not ""
}

// NewHTTP returns the target admit serve's POST /v1/check at cfg.Target, checking cfg.Policies.
func NewHTTP(cfg Config) Target {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// Enough idle connections for every request in flight to find one, up to a bound.
	inFlight := cfg.Concurrency
	if cfg.Rate > 0 {
		inFlight = cmp.Or(cfg.MaxOutstanding, loadgen.DefaultMaxOutstanding)
	}
	t.MaxIdleConnsPerHost = min(max(inFlight, 256), 4096)
	if cfg.TLS != nil {
		t.TLSClientConfig = cfg.TLS
	}
	return &httpTarget{
		client:   &http.Client{Timeout: cfg.Timeout, Transport: t},
		url:      strings.TrimSuffix(cfg.Target, "/") + "/v1/check",
		policies: cfg.Policies,
		token:    cfg.Token,
	}
}

// newRequest returns a POST of body to the target, with its token.
func (t *httpTarget) newRequest(ctx context.Context, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if t.token != "" {
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	return req, nil
}

// body returns the JSON of a check of key that costs cost, or of 1 if cost is nil.
func (t *httpTarget) body(key string, cost *int64) []byte {
	req := httpapi.CheckRequest{Key: key, Cost: cost}
	if len(t.policies) == 1 {
		req.Policy = t.policies[0]
	} else {
		req.Policies = t.policies
	}
	b, _ := json.Marshal(req) // never fails
	return b
}

// Probe peeks (cost 0) at a key no run uses.
func (t *httpTarget) Probe(ctx context.Context) error {
	zero := int64(0)
	req, err := t.newRequest(ctx, t.body("bench-probe", &zero))
	if err != nil {
		return UsageError{err}
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return errors.New(loadgen.ErrorKind(err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var answer httpapi.ErrorResponse
	json.Unmarshal(body, &answer)
	switch {
	case resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode == http.StatusBadRequest:
		return UsageError{fmt.Errorf("%s answers 400: %s", t.url, answer.Error)}
	case resp.StatusCode == http.StatusUnauthorized:
		return UsageError{fmt.Errorf("%s answers 401: it wants a client token (--client-token-file), and not this one", t.url)}
	case resp.StatusCode == http.StatusServiceUnavailable:
		return fmt.Errorf("%s answers 503: its backend cannot decide", t.url)
	}
	return fmt.Errorf("%s answers %s to a peek: is it admit serve?", t.url, resp.Status)
}

func (t *httpTarget) Do(ctx context.Context, key string) string {
	req, err := t.newRequest(ctx, t.body(key, nil))
	if err != nil {
		return "error: " + err.Error()
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return "error: " + loadgen.ErrorKind(err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case err != nil:
		return "error: body: " + loadgen.ErrorKind(err)
	case resp.StatusCode == http.StatusOK:
		return outcomeAllowed
	case resp.StatusCode == http.StatusTooManyRequests:
		return outcomeLimited
	}
	return "error: HTTP " + strconv.Itoa(resp.StatusCode)
}

func (t *httpTarget) Close() { t.client.CloseIdleConnections() }

// cacheHitsRE matches a series of admit_overlimit_cache_hits_total in a /metrics page.
var cacheHitsRE = regexp.MustCompile(`(?m)^admit_overlimit_cache_hits_total(?:\{[^}]*\})? ([0-9.e+]+)$`)

// cacheHits reads the over-limit cache hits from the service's /metrics: the sum of its series, if
// it has any (admit serve has none in memory, or with server.local_cache_max_age 0).
func (t *httpTarget) cacheHits(ctx context.Context) (uint64, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(t.url, "/v1/check")+"/metrics", nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	switch {
	case err != nil:
		return 0, false, err
	case resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("admit_decisions_total")):
		return 0, false, fmt.Errorf("/metrics: %s, not admit serve's", resp.Status)
	}
	var sum uint64
	found := false
	for _, m := range cacheHitsRE.FindAllSubmatch(body, -1) {
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil || v < 0 {
			return 0, false, fmt.Errorf("/metrics: %q", m[0])
		}
		sum += uint64(v)
		found = true
	}
	return sum, found, nil
}

// grpcTarget is Envoy's rate limit service, ShouldRateLimit.
type grpcTarget struct {
	conn    *grpc.ClientConn
	client  rlsv3.RateLimitServiceClient
	timeout time.Duration
	domain  string
	entries []Entry
}

// NewGRPC returns the target Envoy's rate limit service at cfg.GRPCAddr, asking ShouldRateLimit in
// cfg.Domain with one descriptor of cfg.Descriptor's entries.
func NewGRPC(cfg Config) (Target, error) {
	creds := insecure.NewCredentials()
	if cfg.TLS != nil {
		creds = credentials.NewTLS(cfg.TLS)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if cfg.Token != "" {
		auth := "Bearer " + cfg.Token
		opts = append(opts, grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(metadata.AppendToOutgoingContext(ctx, "authorization", auth), method, req, reply, cc, opts...)
		}))
	}
	conn, err := grpc.NewClient(cfg.GRPCAddr, opts...)
	if err != nil {
		return nil, err
	}
	return &grpcTarget{conn: conn, client: rlsv3.NewRateLimitServiceClient(conn), timeout: cfg.Timeout, domain: cfg.Domain, entries: cfg.Descriptor}, nil
}

// Probe asks the standard health service, which admit serve answers: it consumes nothing.
func (t *grpcTarget) Probe(ctx context.Context) error {
	resp, err := healthpb.NewHealthClient(t.conn).Check(ctx, &healthpb.HealthCheckRequest{})
	switch {
	case err != nil:
		return fmt.Errorf("health check: %v", status.Code(err))
	case resp.Status != healthpb.HealthCheckResponse_SERVING:
		return fmt.Errorf("health check: %v", resp.Status)
	}
	return nil
}

func (t *grpcTarget) Do(ctx context.Context, key string) string {
	entries := make([]*ratelimitv3.RateLimitDescriptor_Entry, len(t.entries))
	for i, e := range t.entries {
		entries[i] = &ratelimitv3.RateLimitDescriptor_Entry{Key: e.Key, Value: strings.ReplaceAll(e.Value, KeyPlaceholder, key)}
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	resp, err := t.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: t.domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: entries}}})
	switch {
	case err != nil:
		return "error: " + status.Code(err).String()
	case resp.OverallCode == rlsv3.RateLimitResponse_OK:
		return outcomeAllowed
	case resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT:
		return outcomeLimited
	}
	return "error: code " + resp.OverallCode.String()
}

func (t *grpcTarget) Close() { t.conn.Close() }

// storeTarget makes decisions in this process, on a Redis or in memory, as admit serve's
// /v1/check does.
type storeTarget struct {
	svc        *service.Service
	policies   []string
	closeStore func()
	timeout    time.Duration
}

// Probe peeks (cost 0) at a key no run uses.
func (t *storeTarget) Probe(ctx context.Context) error {
	_, err := t.svc.Check(ctx, service.Check{Policies: t.policies, Subject: admit.Subject{ID: "bench-probe"}, Cost: 0})
	if errors.Is(err, admit.ErrInvalidRequest) || errors.Is(err, admit.ErrInvalidLimit) {
		return UsageError{err}
	}
	return err
}

func (t *storeTarget) Do(ctx context.Context, key string) string {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	res, err := t.svc.Check(ctx, service.Check{Policies: t.policies, Subject: admit.Subject{ID: key}, Cost: 1})
	switch {
	case errors.Is(err, admit.ErrUnavailable):
		return "error: unavailable"
	case err != nil:
		return "error: " + err.Error()
	case res.Allowed:
		return outcomeAllowed
	}
	return outcomeLimited
}

func (t *storeTarget) Close() { t.closeStore() }

// NewService returns the target svc, in this process, checking policies as admit serve's
// /v1/check does, each decision within timeout; closeStore releases svc's store.
func NewService(svc *service.Service, policies []string, timeout time.Duration, closeStore func()) Target {
	return &storeTarget{svc: svc, policies: policies, closeStore: closeStore, timeout: timeout}
}
