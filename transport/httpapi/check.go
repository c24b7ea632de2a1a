package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/httplimit"
	"github.com/admit-dev/admit/internal/jsonanswer"
	"github.com/admit-dev/admit/internal/lograte"
	"github.com/admit-dev/admit/internal/policyjson"
	"github.com/admit-dev/admit/internal/ratelimitfield"
	"github.com/admit-dev/admit/internal/validate"
	"github.com/admit-dev/admit/service"
)

// MaxCheckBody is the largest body POST /v1/check reads: a larger one is answered 400.
const MaxCheckBody = 64 << 10

// CheckRequest is the JSON body of POST /v1/check. Exactly one of Policy and Policies is set.
type CheckRequest struct {
	// Policy names the one policy to check.
	Policy string `json:"policy,omitempty"`
	// Policies names several policies, checked together, all-or-nothing.
	Policies []string `json:"policies,omitempty"`
	// Key is the subject: who is limited, such as a user ID. It is digested with the server's
	// secret into one key per policy; never stored or logged.
	Key string `json:"key"`
	// Cost is the units asked for under each policy; absent means 1, 0 is a peek.
	Cost *int64 `json:"cost,omitempty"`
	// RequestID makes a retry idempotent: a repeat returns the first answer, marked replayed.
	RequestID string `json:"request_id,omitempty"`
	// Tier is the subject's tier, such as "pro": each policy with tiers decides under that tier's
	// numbers, an unknown one a 400 (service.Check.Tier). Absent means none: the policies' own.
	Tier string `json:"tier,omitempty"`
}

// CheckResponse is the JSON body of an answer of POST /v1/check: the decision, or Error alone.
type CheckResponse struct {
	// Allowed reports whether the request was admitted under every policy.
	Allowed bool `json:"allowed"`
	// Policy names the deciding policy: the rejection to wait for longest, or, when allowed, the
	// policy nearest to its limit.
	Policy string `json:"policy"`
	// Limit, Remaining, RetryAfterMS and ResetAfterMS are the deciding policy's. Limit is its
	// quota, the q of its RateLimit-Policy member (admit.Limit.Capacity): for gcra, the burst.
	Limit        int64 `json:"limit"`
	Remaining    int64 `json:"remaining"`
	RetryAfterMS int64 `json:"retry_after_ms"`
	ResetAfterMS int64 `json:"reset_after_ms"`
	// Replayed reports whether this is the recorded answer of an earlier request with the same ID.
	Replayed bool `json:"replayed"`
	// Degraded reports whether a local limiter decided while the backend could not (a policy with
	// failure: open): the decision is this instance's, not global. Limit and Remaining are then the
	// local limiter's.
	Degraded bool `json:"degraded"`
	// Decisions holds one decision per policy, in the request's order.
	Decisions []PolicyDecision `json:"decisions"`
}

// PolicyDecision is one policy's decision in a CheckResponse.
type PolicyDecision struct {
	Policy string `json:"policy"`
	// Allowed reports whether the policy admitted the request; for a policy in shadow mode, false
	// means it would have limited it, and did not.
	Allowed bool `json:"allowed"`
	// Shadow reports that the policy is in shadow mode: it rejects nothing. Omitted when false.
	Shadow bool `json:"shadow,omitempty"`
	// Degraded reports that a local limiter decided this policy while the backend could not; Limit
	// is then the policy's local limit. Omitted when false.
	Degraded     bool  `json:"degraded,omitempty"`
	Limit        int64 `json:"limit"`
	Remaining    int64 `json:"remaining"`
	RetryAfterMS int64 `json:"retry_after_ms"`
	ResetAfterMS int64 `json:"reset_after_ms"`
}

// ErrorResponse is the JSON body of a 400 or 503 answer of the API.
type ErrorResponse struct {
	// Error says what went wrong; for a 503, only that the limiter is unavailable.
	Error string `json:"error"`
}

// The forward-auth form of /v1/check: the check in the query string, or in these header fields
// that the proxy sets, and the status code the answer.
const (
	// PolicyField names the policies to check, separated by commas, as the query's policy does.
	PolicyField = "X-Admit-Policy"
	// KeyField is the subject, as the query's key is.
	KeyField = "X-Admit-Key"
	// CostField is the cost, as the query's cost is.
	CostField = "X-Admit-Cost"
	// RequestIDField is the request ID, as the query's request_id is.
	RequestIDField = "X-Admit-Request-Id"
	// SubjectField says where the subject is, as the query's subject does: key or client_ip.
	SubjectField = "X-Admit-Subject"
	// TierField is the subject's tier, as the query's tier is.
	TierField = "X-Admit-Tier"
)

// The kinds of /v1/check's log records, each at a bounded rate: indexes of checkLogKinds.
const (
	logUnavailable = iota
	logPanic
)

// checkLogKinds are /v1/check's kinds of log records.
var checkLogKinds = []lograte.Kind{
	logUnavailable: {Level: slog.LevelWarn, Msg: "limiter unavailable"},
	logPanic:       {Level: slog.LevelError, Msg: "panic in limiter"},
}

// check serves /v1/check: POST with a JSON body, or the forward-auth form.
type check struct {
	svc      *service.Service
	clientIP *httplimit.ClientIP // for the subject client_ip of the forward-auth form; nil for none
	log      *lograte.Limiter    // of checkLogKinds
	answers  *httplimit.Answers  // the fields of its answers: Retry-After, RateLimit
}

func (c *check) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req CheckRequest
	var err error
	limited := http.StatusTooManyRequests
	switch {
	case isForwardAuth(r):
		req, limited, err = c.fromForwardAuth(r)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/check":
		req, err = decodeCheck(w, r)
	default:
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, ErrorResponse{Error: "POST a JSON check, or name the policy in the query or in " + PolicyField})
		return
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, ErrorResponse{Error: err.Error()})
		return
	}
	chk := service.Check{Policies: req.Policies, Subject: admit.Subject{ID: req.Key}, Tier: req.Tier, Cost: 1, RequestID: req.RequestID}
	if req.Policy != "" {
		chk.Policies = []string{req.Policy}
	}
	if req.Cost != nil {
		chk.Cost = *req.Cost
	}
	res, err := c.decide(r.Context(), chk)
	switch {
	case err == nil:
	case c.panicked(r, err):
		w.Header().Set("Retry-After", c.answers.UnavailableRetryAfter())
		writeJSON(w, http.StatusServiceUnavailable, ErrorResponse{Error: "limiter unavailable"})
		return
	case errors.Is(err, admit.ErrInvalidRequest), errors.Is(err, admit.ErrInvalidLimit):
		// The field and its bound, for the client; not the packages the error came through.
		writeJSON(w, http.StatusBadRequest, ErrorResponse{Error: validate.ClientMessage(err)})
		return
	case err != nil:
		c.log.Log(r.Context(), logUnavailable, err, slog.String("path", r.URL.Path))
		w.Header().Set("Retry-After", c.answers.UnavailableRetryAfter())
		writeJSON(w, http.StatusServiceUnavailable, ErrorResponse{Error: "limiter unavailable"})
		return
	}
	status, retry := http.StatusOK, int64(0)
	if !res.Allowed {
		status, retry = limited, ratelimitfield.RetryAfter(res.Decisions[res.Deciding])
	}
	c.answers.SetFields(w.Header(), res.Decisions, retry)
	writeCheck(w, status, res)
}

// panicked reports whether err is a panic in the limiter, and logs it if so. It is a function of
// its own so that the target of errors.As escapes to the heap only on an error.
func (c *check) panicked(r *http.Request, err error) bool {
	var pe *httplimit.PanicError
	if !errors.As(err, &pe) {
		return false
	}
	c.log.Log(r.Context(), logPanic, err, slog.String("path", r.URL.Path), slog.String("stack", string(pe.Stack)))
	return true
}

// decide runs the service's check, a panic in it turned into a *httplimit.PanicError.
func (c *check) decide(ctx context.Context, chk service.Check) (res service.Result, err error) {
	defer httplimit.Recover(&err)
	return c.svc.Check(ctx, chk)
}

// isForwardAuth reports whether r is a check in the forward-auth form: its query names a policy,
// or a PolicyField is set.
func isForwardAuth(r *http.Request) bool {
	// An empty query holds no policy: not parsed, for the map Query would allocate.
	return (r.URL.RawQuery != "" && r.URL.Query().Has("policy")) || len(r.Header.Values(PolicyField)) > 0
}

// The parameters of a check in the forward-auth form: each query parameter, and the header field
// that stands for it.
var forwardAuthParams = [...]struct{ query, field string }{
	{"policy", PolicyField},
	{"key", KeyField},
	{"subject", SubjectField},
	{"cost", CostField},
	{"request_id", RequestIDField},
	{"tier", TierField},
}

// fromForwardAuth reads the check of a request in the forward-auth form, whatever its method and
// path below /v1/check (see forwardedCheck). It returns the status of a limited answer too: 429,
// or the query's limited_status, 401 or 403, for a proxy that passes no other (nginx).
func (c *check) fromForwardAuth(r *http.Request) (req CheckRequest, limited int, err error) {
	req, err = c.forwardedCheck(r)
	vs := r.URL.Query()["limited_status"]
	if len(vs) > 1 {
		return req, 0, errors.New("limited_status given more than once; want it once")
	}
	switch v := strings.Join(vs, ""); v {
	case "", "429":
		return req, http.StatusTooManyRequests, err
	case "401", "403":
		limited, _ = strconv.Atoi(v)
		return req, limited, err
	default:
		return req, 0, fmt.Errorf("limited_status=%q: want 429, 401 or 403", v)
	}
}

// forwardedCheck reads the check of a request in the forward-auth form from one source: the query
// when it names a policy, else the header fields (PolicyField, KeyField, SubjectField, CostField,
// RequestIDField, TierField). A parameter of the check in the other source too is an error, and so is one
// given twice (but policy, which the query may repeat): a proxy forwards the client's own header
// fields (nginx, Traefik) or its own query (Envoy), and a check that mixed them, or took the first
// of two, would let a client choose its own subject, tier or cost. The subject is key; or, with
// subject=client_ip, the client's address as the server's trusted proxies resolve it.
func (c *check) forwardedCheck(r *http.Request) (CheckRequest, error) {
	var req CheckRequest
	q := r.URL.Query()
	fromQuery := q.Has("policy")
	values := make(map[string][]string, len(forwardAuthParams))
	for _, p := range forwardAuthParams {
		inQuery, inHeader := q[p.query], r.Header.Values(p.field)
		switch {
		case fromQuery && len(inHeader) > 0:
			return req, fmt.Errorf("%s: the check is in the query (policy=), so no %s header field may come with it; name each parameter in one place", p.field, p.field)
		case !fromQuery && len(inQuery) > 0:
			return req, fmt.Errorf("%s=: the check is in the %s header field, so the query may not name %s too; name each parameter in one place", p.query, PolicyField, p.query)
		case fromQuery && len(inQuery) > 1 && p.query != "policy":
			return req, fmt.Errorf("%s given %d times in the query; want it once", p.query, len(inQuery))
		case !fromQuery && len(inHeader) > 1:
			return req, fmt.Errorf("%s given in %d header fields; want one (several policies: separated by commas in one)", p.field, len(inHeader))
		case fromQuery:
			values[p.query] = inQuery
		default:
			values[p.query] = inHeader
		}
	}
	param := func(name string) string { return strings.Join(values[name], "") } // at most one value
	for _, p := range values["policy"] {
		for _, name := range strings.Split(p, ",") {
			if name = strings.TrimSpace(name); name != "" {
				req.Policies = append(req.Policies, name)
			}
		}
	}
	if len(req.Policies) == 0 {
		return req, errors.New("want a policy")
	}
	switch from := param("subject"); from {
	case "", "key":
		if req.Key = param("key"); req.Key == "" {
			if fromQuery {
				return req, errors.New("want a key: key= in the query, or subject=client_ip")
			}
			return req, fmt.Errorf("want a key: %s, or %s: client_ip", KeyField, SubjectField)
		}
	case "client_ip":
		if c.clientIP == nil {
			return req, errors.New("subject=client_ip: the server resolves no client addresses")
		}
		s, err := c.clientIP.Subject(r)
		if err != nil {
			// The header and what is wrong with it; not the package that found it.
			return req, fmt.Errorf("subject=client_ip: %s", strings.ReplaceAll(err.Error(), "httplimit: ", ""))
		}
		req.Key = s.ID
	default:
		return req, fmt.Errorf("subject=%q: want key or client_ip", from)
	}
	if v := param("cost"); v != "" {
		cost, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return req, fmt.Errorf("cost %q: want a whole number", v)
		}
		req.Cost = &cost
	}
	req.RequestID, req.Tier = param("request_id"), param("tier")
	return req, nil
}

// A body is what decodeCheck reads a request's body with: the bytes, and a reader of them for the
// JSON decoder.
type body struct {
	buf bytes.Buffer
	rd  bytes.Reader
}

// bodies are decodeCheck's bodies, reused: io.ReadAll's slice was a fifth of /v1/check's
// allocated bytes.
var bodies = sync.Pool{New: func() any { return new(body) }}

// decodeCheck reads r's body as a CheckRequest: strict JSON (no unknown fields, nothing after the
// object) of at most MaxCheckBody bytes, with exactly one of policy and policies, and a key. The
// plain shape is read by quickCheck, the rest by encoding/json, whose errors these are.
func decodeCheck(w http.ResponseWriter, r *http.Request) (CheckRequest, error) {
	var req CheckRequest
	b := bodies.Get().(*body)
	b.buf.Reset()
	defer bodies.Put(b) // at most MaxCheckBody and a read's slack: every one is worth keeping
	_, err := b.buf.ReadFrom(http.MaxBytesReader(w, r.Body, MaxCheckBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return req, fmt.Errorf("body larger than %d bytes", MaxCheckBody)
		}
		return req, fmt.Errorf("reading the body: %v", err)
	}
	var ok bool
	if req, ok = quickCheck(b.buf.Bytes()); !ok {
		if req, err = b.decode(); err != nil {
			return req, err
		}
	}
	switch {
	case req.Policy == "" && len(req.Policies) == 0:
		return req, errors.New(`want "policy" or "policies"`)
	case req.Policy != "" && len(req.Policies) > 0:
		return req, errors.New(`want "policy" or "policies", not both`)
	case req.Key == "":
		return req, errors.New(`want a "key": the subject to limit`)
	}
	return req, nil
}

// decode decodes b's bytes with encoding/json: strict, one value. A method of its own, so that the
// CheckRequest it decodes into escapes to the heap only on this path.
func (b *body) decode() (CheckRequest, error) {
	var req CheckRequest
	b.rd.Reset(b.buf.Bytes())
	dec := json.NewDecoder(&b.rd)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("body is not a check request: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return req, errors.New("body holds more than one JSON value")
	}
	return req, nil
}

// NewCheckResponse returns the CheckResponse of res: what POST /v1/check answers, and `admit check`
// prints.
func NewCheckResponse(res service.Result) CheckResponse {
	d := res.Decisions[res.Deciding]
	out := CheckResponse{
		Allowed:      res.Allowed,
		Policy:       d.Limit.Name,
		Limit:        d.Limit.Capacity(),
		Remaining:    d.Remaining,
		RetryAfterMS: d.RetryAfter.Milliseconds(),
		ResetAfterMS: d.ResetAfter.Milliseconds(),
		Replayed:     res.Replayed,
		Degraded:     res.Degraded,
		Decisions:    make([]PolicyDecision, len(res.Decisions)),
	}
	for i, d := range res.Decisions {
		out.Decisions[i] = PolicyDecision{Policy: d.Limit.Name, Allowed: d.Allowed, Shadow: d.Limit.Shadow, Degraded: d.Degraded, Limit: d.Limit.Capacity(),
			Remaining: d.Remaining, RetryAfterMS: d.RetryAfter.Milliseconds(), ResetAfterMS: d.ResetAfter.Milliseconds()}
	}
	return out
}

// writeJSON answers status with v as its JSON body, not to be cached.
func writeJSON(w http.ResponseWriter, status int, v any) { jsonanswer.Write(w, status, v) }

// PolicyInfo describes one policy in the answer of GET /v1/policies: name, algorithm, limit,
// window_ms, burst (gcra only), aligned, mode and failure, as the admin API's GET /v1/policies
// describes it too.
type PolicyInfo = policyjson.Policy

// policies serves GET /v1/policies: the loaded configuration's policies, in its order.
func policies(svc *service.Service) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		cfg := svc.Config()
		out := struct {
			Policies []PolicyInfo `json:"policies"`
			Hash     string       `json:"config_hash"`
		}{Policies: make([]PolicyInfo, len(cfg.Policies)), Hash: cfg.Hash}
		for i, p := range cfg.Policies {
			out.Policies[i] = policyjson.Of(p)
		}
		writeJSON(w, http.StatusOK, out)
	}
}
