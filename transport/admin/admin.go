// Package admin is the admin API of `admit serve`: an http.Handler for a listener of its own, never
// the data plane's, that answers only requests bearing the admin token (`Authorization: Bearer
// TOKEN`). It reads a subject's state under the loaded policies (GET /v1/state) and the subjects
// a policy rejected most in this process (GET /v1/top), resets a subject (POST /v1/reset), and
// sets, deletes and lists the overrides of a subject's numbers (PUT, DELETE, GET /v1/overrides),
// through a service.Service; every change is logged, as an audit record with the subject's digest
// and never the subject, and counted through Options.OnChange.
//
// GET /ui is the operator console, one page embedded in the binary: it keeps the token in the
// browser's sessionStorage and sends it as the Authorization field of each API call it makes.
//
// The token is compared in constant time, by its SHA-256 digest, so that neither its bytes nor its
// length leak through timing. A request without the right token is answered 401
// `{"error":"unauthorized"}` and nothing more, and counted against its client address (an IPv6
// client by its /64): an address that fails FailureLimit times in FailureWindow is answered 429,
// the right token included, until that window ends. The answers, the budget and why:
// docs/operations.md#the-admin-api.
package admin

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/jsonanswer"
	"github.com/admit-dev/admit/internal/lograte"
	"github.com/admit-dev/admit/internal/validate"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
)

// Bounds of the admin API.
const (
	// MinTokenLen is the shortest admin token New accepts, in bytes.
	MinTokenLen = 16
	// MaxBody is the largest request body read: a larger one is answered 413.
	MaxBody = 64 << 10
	// FailureLimit is the most requests without the right token one client address may send per
	// FailureWindow; once it has, every request from it is answered 429 until the window ends.
	FailureLimit = 10
	// FailureWindow is the window of FailureLimit, from the address's first failure.
	FailureWindow = time.Minute
	// maxAddresses bounds the client addresses whose failures are counted at once: when they are
	// all counting, a request without the right token is answered 429.
	maxAddresses = 1 << 16
)

// Options configures a Handler. Service and Token are required.
type Options struct {
	// Service is what the endpoints read; required.
	Service *service.Service
	// Token is the admin token, at least MinTokenLen bytes; required. New keeps its digest only.
	Token []byte
	// Logger receives a record, at a bounded rate, of each request refused for want of the right
	// token, with its client address, never the token; and every audit record of a change, at
	// Info. Nil means slog.Default().
	Logger *slog.Logger
	// OnChange, if not nil, is called with the action (ActionReset, …) of every change made, once
	// it is made: refused changes are not.
	OnChange func(action string)
	// Stats, if not nil, returns the instance's own counters and gauges for GET /v1/stats (admit
	// serve: the admit_* series of its metrics registry). Nil answers GET /v1/stats 404.
	Stats func() ([]Sample, error)
}

// A Handler serves the admin API. It is safe for concurrent use. Make one with [New]; the zero
// value is not usable.
//
// Every request needs the token, but for the operator console's page (GET /ui and its script and
// style sheet, which hold no data: every call it makes is one of these, with the token); then:
//
//	GET /v1/policies                         the policies in force, their tiers, modes and failure modes
//	GET /v1/stats                            the instance's own counters (Options.Stats), for rates
//	GET /v1/state?policy=P&key=K[&tier=T]   the state of the subject K under each policy, or P
//	POST /v1/reset {"policy":P,"key":K}      forget K's state under each policy, or P
//	GET /v1/top?policy=P[&n=N]              the N subjects (default DefaultTopN) P rejected most here,
//	                                         or, without policy, each policy's
//	PUT /v1/overrides {"policy":P,"key":K,"limit":L,...}   K's numbers under P in place of P's
//	DELETE /v1/overrides {"policy":P,"key":K}             back to P's numbers
//	GET /v1/overrides?policy=P[&cursor=C][&n=N]         P's overrides, a page of N (default 100)
//
// An unknown path is answered 404, another method 405 with an Allow field, a body over MaxBody 413;
// every error is JSON, {"error":"..."}.
type Handler struct {
	svc      *service.Service
	token    [sha256.Size]byte
	logger   *slog.Logger        // the audit records'
	onChange func(action string) // never nil
	statsOf  func() ([]Sample, error)
	failures *service.Service // failed authentications per client address: failurePolicy
	log      *lograte.Limiter
	routes   map[string][]route
}

// A route is a method of a path and its handler, which gets the body read.
type route struct {
	method string
	serve  func(w http.ResponseWriter, r *http.Request, body []byte)
}

// failurePolicy names the policy of failed authentications per client address, which
// failureConfig holds: FailureLimit per FailureWindow, in a fixed window from the first failure.
const failurePolicy = "admin-auth"

// failureConfig is the configuration of the Handler's own Service, which counts failures.
var failureConfig = fmt.Sprintf("policies:\n  - name: %s\n    algorithm: fixed_window\n    limit: %d\n    window: %s\n",
	failurePolicy, FailureLimit, FailureWindow)

// The kinds of the Handler's log records: indexes of logKinds.
const (
	logRefused = iota
	logUnavailable
)

// logKinds are the Handler's kinds of log records.
var logKinds = []lograte.Kind{
	logRefused:     {Level: slog.LevelWarn, Msg: "admin API: request without the right token refused"},
	logUnavailable: {Level: slog.LevelWarn, Msg: "admin API: limiter unavailable"},
}

// New returns a Handler for opts. It reports an error if opts.Service is nil or opts.Token is
// shorter than MinTokenLen.
func New(opts Options) (*Handler, error) {
	switch {
	case opts.Service == nil:
		return nil, errors.New("admin: New needs a Service")
	case len(opts.Token) < MinTokenLen:
		return nil, fmt.Errorf("admin: token of %d bytes; want at least %d", len(opts.Token), MinTokenLen)
	}
	secret := make([]byte, 32) // the failure counters' keys are this process's alone
	rand.Read(secret)
	keys, err := admit.NewKeyBuilder(secret)
	if err != nil {
		return nil, err
	}
	cfg, err := policy.Parse("admin", []byte(failureConfig))
	if err != nil {
		return nil, err
	}
	// No sweeper, so no goroutine: an insert reclaims expired counters.
	failures, err := service.New(memstore.New(memstore.Options{SweepInterval: -1, MaxEntries: maxAddresses}), keys, cfg)
	if err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	onChange := opts.OnChange
	if onChange == nil {
		onChange = func(string) {}
	}
	h := &Handler{
		svc:      opts.Service,
		token:    sha256.Sum256(opts.Token),
		logger:   logger,
		onChange: onChange,
		statsOf:  opts.Stats,
		failures: failures,
		log:      lograte.New(logger, lograte.DefaultInterval, logKinds...),
	}
	h.routes = map[string][]route{
		"/v1/state":    {{http.MethodGet, h.state}},
		"/v1/reset":    {{http.MethodPost, h.reset}},
		"/v1/top":      {{http.MethodGet, h.top}},
		"/v1/policies": {{http.MethodGet, h.policies}},
		"/v1/stats":    {{http.MethodGet, h.stats}},
		"/v1/overrides": {
			{http.MethodGet, h.listOverrides}, {http.MethodPut, h.setOverride}, {http.MethodDelete, h.deleteOverride},
		},
	}
	return h, nil
}

// ServeHTTP answers r: 401 or 429 without the right token, else its endpoint's answer.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isConsole(r.URL.Path) {
		h.console(w, r)
		return
	}
	if !h.authorized(w, r) {
		return
	}
	routes, ok := h.routes[r.URL.Path]
	i := slices.IndexFunc(routes, func(rt route) bool { return rt.method == r.Method })
	switch {
	case !ok:
		writeError(w, http.StatusNotFound, fmt.Sprintf("no admin endpoint %q", r.URL.Path))
		return
	case i < 0:
		methods := make([]string, len(routes))
		for j, rt := range routes {
			methods[j] = rt.method
		}
		w.Header().Set("Allow", strings.Join(methods, ", "))
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s answers %s only", r.URL.Path, strings.Join(methods, ", ")))
		return
	case r.ContentLength > MaxBody:
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body of %d bytes; want at most %d", r.ContentLength, MaxBody))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", MaxBody))
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "cannot read the body")
		return
	}
	routes[i].serve(w, r, body)
}

// authorized reports whether r bears the token and its client address has failures left in its
// budget; if not, it has answered r: 429 once the budget is spent, else 401, counting a failure.
func (h *Handler) authorized(w http.ResponseWriter, r *http.Request) bool {
	client := clientAddr(r.RemoteAddr)
	failure := service.Check{Policies: []string{failurePolicy}, Subject: admit.Subject{ID: client}}
	// A spent budget refuses the right token too: else a guesser would learn which guess is right.
	if res, err := h.failures.Check(r.Context(), failure); err == nil && res.Decisions[0].Remaining == 0 {
		h.refused(w, r, client, res.Decisions[0].ResetAfter)
		return false
	}
	if h.bearsToken(r) {
		return true
	}
	failure.Cost = 1
	res, err := h.failures.Check(r.Context(), failure)
	if err != nil || !res.Allowed { // counters full, or the budget spent meanwhile
		wait := time.Second
		if err == nil {
			wait = max(res.Decisions[0].ResetAfter, wait)
		}
		h.refused(w, r, client, wait)
		return false
	}
	h.log.Log(r.Context(), logRefused, errors.New("unauthorized"), slog.String("client", client))
	w.Header().Set("WWW-Authenticate", "Bearer")
	writeError(w, http.StatusUnauthorized, "unauthorized")
	return false
}

// refused answers r 429: client has spent its budget of failures, for wait more.
func (h *Handler) refused(w http.ResponseWriter, r *http.Request, client string, wait time.Duration) {
	h.log.Log(r.Context(), logRefused, errors.New("too many requests without the right token"), slog.String("client", client))
	w.Header().Set("Retry-After", strconv.FormatInt(ceilSeconds(wait), 10))
	writeError(w, http.StatusTooManyRequests, "too many requests without the right token")
}

// bearsToken reports whether r has one Authorization field, `Bearer TOKEN` with the Handler's
// token, compared by digest in constant time.
func (h *Handler) bearsToken(r *http.Request) bool {
	fields := r.Header.Values("Authorization")
	if len(fields) != 1 {
		return false
	}
	scheme, token, ok := strings.Cut(fields[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	given := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(given[:], h.token[:]) == 1
}

// clientAddr returns the client address of a request from remote (host:port): the IP, an IPv6
// one as its /64, so that one host cannot mint budgets; remote itself if it is no address.
func clientAddr(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return remote
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.WithZone("").Prefix(64)
		return p.String()
	}
	return ip.String()
}

// ceilSeconds returns d in whole seconds, rounded up, at least 1: a Retry-After.
func ceilSeconds(d time.Duration) int64 {
	return max(1, int64((d+time.Second-1)/time.Second))
}

// An ErrorResponse is the body of every error the admin API answers.
type ErrorResponse struct {
	// Error says what went wrong; for a 401, only "unauthorized".
	Error string `json:"error"`
}

// writeError answers status with the JSON error msg.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorResponse{Error: msg})
}

// decodeBody decodes body into v strictly: one JSON value, with no field v does not have. Its error
// says what is wrong, for a 400; what names the value ("a reset request").
func decodeBody(body []byte, v any, what string) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return fmt.Errorf("empty body; want %s as a JSON object", what)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("body is not %s: %s", what, strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("body holds more than one JSON value")
	}
	return nil
}

// writeJSON answers status with v as JSON, not to be cached.
func writeJSON(w http.ResponseWriter, status int, v any) { jsonanswer.Write(w, status, v) }

// unavailable answers r 503: the Store could not decide, for err.
func (h *Handler) unavailable(ctx context.Context, w http.ResponseWriter, path string, err error) {
	h.log.Log(ctx, logUnavailable, err, slog.String("path", path))
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, "limiter unavailable")
}

// failed answers err, a Service's, and reports whether there was one: 404 when it matches one of
// notFound, 400 for a caller's mistake (admit.ErrInvalidRequest, admit.ErrInvalidLimit), each with
// the client's message; 503 saying what is corrupt and how to mend it for admit.ErrCorruptState,
// logged, without Retry-After (a retry meets the same bytes); anything else 503, logged
// (unavailable).
func (h *Handler) failed(w http.ResponseWriter, r *http.Request, err error, notFound ...error) bool {
	if err == nil {
		return false
	}
	for _, kind := range notFound {
		if errors.Is(err, kind) {
			writeError(w, http.StatusNotFound, validate.ClientMessage(err))
			return true
		}
	}
	switch {
	case errors.Is(err, admit.ErrInvalidRequest) || errors.Is(err, admit.ErrInvalidLimit):
		writeError(w, http.StatusBadRequest, validate.ClientMessage(err))
	case errors.Is(err, admit.ErrCorruptState):
		h.log.Log(r.Context(), logUnavailable, err, slog.String("path", r.URL.Path))
		writeError(w, http.StatusServiceUnavailable, corruptMessage(err))
	default:
		h.unavailable(r.Context(), w, r.URL.Path, err)
	}
	return true
}

// corruptMessage returns what an answer says of err, which matches admit.ErrCorruptState: what is
// corrupt, with the key where the Store's error names it, and how to mend it.
func corruptMessage(err error) string {
	msg := err.Error()
	detail := ""
	if i := strings.LastIndex(msg, admit.ErrCorruptState.Error()); i >= 0 {
		detail = strings.TrimLeft(msg[i+len(admit.ErrCorruptState.Error()):], ": ")
	}
	what, mend := "limiter state is corrupt", "; reset the subject (admit reset --policy P --key K) to start it afresh"
	if strings.Contains(detail, "override") {
		what, mend = "override state is corrupt", "; delete the override (admit override delete --policy P --key K, or DEL its key in Redis) and set it again"
	}
	if detail != "" {
		what += ": " + detail
	}
	return what + mend
}

// strictQuery returns the query of r, whose parameters must be among params and each given once; if
// not, it has answered r 400 and reports false.
func strictQuery(w http.ResponseWriter, r *http.Request, params ...string) (url.Values, bool) {
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "malformed query")
		return nil, false
	}
	for name, vs := range query {
		switch {
		case !slices.Contains(params, name):
			want := strings.Join(params[:len(params)-1], ", ") + " and " + params[len(params)-1]
			writeError(w, http.StatusBadRequest, fmt.Sprintf("unknown query parameter %q; want %s", name, want))
			return nil, false
		case len(vs) > 1:
			writeError(w, http.StatusBadRequest, fmt.Sprintf("%s given %d times; want it once", name, len(vs)))
			return nil, false
		}
	}
	return query, true
}
