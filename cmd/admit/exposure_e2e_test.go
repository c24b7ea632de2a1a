package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/admit-dev/admit/internal/certtest"
)

// The client tokens of the end-to-end test.
const (
	e2eToken   = "e2e-client-token-0123456789"
	e2eToken2  = "e2e-second-token-9876543210"
	tlsPolicy  = "policies:\n  - name: per-day\n    algorithm: fixed_window\n    limit: 1000\n    window: 24h\n"
	envoyLimit = "domain: edge\ndescriptors:\n  - key: database\n    value: users\n    rate_limit:\n      unit: day\n      requests_per_unit: 1000\n"
)

// secured is a running admit serve with TLS, client certificates and client tokens, and what its
// clients need.
type secured struct {
	p                     *proc
	https, grpcAddr       string
	ca, other             *certtest.CA
	server                *certtest.Pair
	good, expired, alien  *certtest.Pair
	tokensFile, certFiles string
}

// startSecured starts admit serve with server.tls (client_ca_file set), server.client_tokens_file
// and Envoy's rate limit service.
func startSecured(t *testing.T) *secured {
	t.Helper()
	dir := t.TempDir()
	s := &secured{ca: certtest.NewCA(t, "admit CA"), other: certtest.NewCA(t, "another CA"), certFiles: dir}
	s.server = s.ca.Server(t).Write(t, dir, "server")
	s.good, s.expired, s.alien = s.ca.Client(t, "app"), s.ca.ExpiredClient(t, "app"), s.other.Client(t, "app")
	certtest.WriteFile(t, filepath.Join(dir, "ca.crt"), s.ca.PEM)
	s.tokensFile = filepath.Join(dir, "tokens")
	certtest.WriteFile(t, s.tokensFile, []byte("# the app's token\n"+e2eToken+"\n"))
	envoy := filepath.Join(dir, "envoy")
	if err := os.Mkdir(envoy, 0o700); err != nil {
		t.Fatal(err)
	}
	certtest.WriteFile(t, filepath.Join(envoy, "edge.yaml"), []byte(envoyLimit))
	config := filepath.Join(dir, "admit.yaml")
	certtest.WriteFile(t, config, []byte("server:\n  tls:\n    cert_file: "+s.server.CertFile+"\n    key_file: "+s.server.KeyFile+
		"\n    client_ca_file: "+filepath.Join(dir, "ca.crt")+"\n  client_tokens_file: "+s.tokensFile+"\n"+tlsPolicy))
	s.p = startAdmit(t, "--config", config, "--envoy-config", envoy, "--grpc-listen", "127.0.0.1:0")
	s.https = "https://" + strings.TrimPrefix(s.p.base, "http://")
	s.p.logs.waitLine(t, "listening for gRPC")
	m := grpcListeningRE.FindStringSubmatch(s.p.logs.String())
	if m == nil {
		t.Fatalf("no gRPC address in the log:\n%s", s.p.logs)
	}
	s.grpcAddr = m[1]
	return s
}

// tlsClient returns the client TLS configuration that trusts roots and sends cert (nil for none)
// whatever CAs the server names.
func tlsClient(roots *x509.CertPool, cert *certtest.Pair) *tls.Config {
	cfg := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
	if cert != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert.TLS, nil }
	}
	return cfg
}

// get sends method path with the token (none for "") over a new HTTPS connection presenting cert,
// and returns the status, the body and the protocol, or the error.
func (s *secured) get(t *testing.T, method, path string, cert *certtest.Pair, token string) (int, string, string, error) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: tlsClient(s.ca.Pool(), cert), ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader(`{"policy":"per-day","key":"alice"}`)
	}
	req, err := http.NewRequest(method, s.https+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Proto, nil
}

// TestE2ESecuredHTTP runs real TLS clients against admit serve's HTTP listener: without a
// certificate, with one of another CA and an expired one the handshake fails; with a good one,
// /v1/check and /demo want the token, and /healthz, /readyz and /metrics do not.
func TestE2ESecuredHTTP(t *testing.T) {
	s := startSecured(t)
	for _, c := range []struct {
		name string
		cert *certtest.Pair
	}{{"no certificate", nil}, {"another CA", s.alien}, {"expired", s.expired}} {
		if code, _, _, err := s.get(t, "POST", "/v1/check", c.cert, e2eToken); err == nil {
			t.Errorf("%s: answered %d; want the handshake refused", c.name, code)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
	resp, err := http.Post(s.p.base+"/v1/check", "application/json", strings.NewReader(`{"policy":"per-day","key":"alice"}`))
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP: %d; want 400 from the TLS listener", resp.StatusCode)
		}
	}

	for _, tok := range []string{"", "x", "e2e-client-token", e2eToken[:len(e2eToken)-1], e2eToken + "9", strings.Repeat("t", 200)} {
		for _, r := range [][2]string{{"POST", "/v1/check"}, {"GET", "/v1/check/auth?policy=per-day&key=alice"}, {"GET", "/demo"}, {"GET", "/v1/policies"}} {
			code, body, _, err := s.get(t, r[0], r[1], s.good, tok)
			if err != nil || code != http.StatusUnauthorized || body != `{"error":"unauthorized"}`+"\n" {
				t.Errorf("%s %s with token %q: %d %q, %v; want 401 unauthorized", r[0], r[1], tok, code, body, err)
			}
		}
	}
	code, body, proto, err := s.get(t, "POST", "/v1/check", s.good, e2eToken)
	if err != nil || code != http.StatusOK || !strings.Contains(body, `"allowed":true`) {
		t.Errorf("POST /v1/check with a good certificate and the token: %d %q, %v; want allowed", code, body, err)
	}
	if proto != "HTTP/2.0" {
		t.Errorf("protocol %q; want HTTP/2.0 over TLS", proto)
	}
	for _, path := range []string{"/v1/check/auth?policy=per-day&key=alice", "/demo", "/v1/policies"} {
		if code, body, _, err := s.get(t, "GET", path, s.good, e2eToken); err != nil || code != http.StatusOK {
			t.Errorf("GET %s with the token: %d %q, %v; want 200", path, code, body, err)
		}
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, body, _, err := s.get(t, "GET", path, s.good, ""); err != nil || code != http.StatusOK {
			t.Errorf("GET %s without a token: %d %q, %v; want 200", path, code, body, err)
		}
	}
	if strings.Contains(s.p.logs.String(), "asks its clients for no credential") {
		t.Error("the warning of an open data plane was logged with client certificates and tokens, on loopback")
	}
	s.p.cmd.Process.Signal(syscall.SIGTERM)
	if code := s.p.wait(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
}

// TestE2ESecuredGRPC runs real gRPC clients over TLS against admit serve's rate limit service:
// without a client certificate no call gets through; with one, health answers without a token
// and ShouldRateLimit wants the token.
func TestE2ESecuredGRPC(t *testing.T) {
	s := startSecured(t)
	dial := func(cert *certtest.Pair) *grpc.ClientConn {
		t.Helper()
		conn, err := grpc.NewClient(s.grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(tlsClient(s.ca.Pool(), cert))))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	ask := func(conn *grpc.ClientConn, token string) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "database", Value: "users"}},
		}}})
		if err == nil && resp.OverallCode != rlsv3.RateLimitResponse_OK {
			t.Errorf("ShouldRateLimit: %v; want OK", resp.OverallCode)
		}
		return err
	}
	for _, c := range []struct {
		name string
		cert *certtest.Pair
	}{{"no certificate", nil}, {"another CA", s.alien}, {"expired", s.expired}} {
		if err := ask(dial(c.cert), e2eToken); status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v; want Unavailable, the handshake refused", c.name, err)
		}
	}
	conn := dial(s.good)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health without a token: %v; want SERVING", err)
	}
	for _, tok := range []string{"", "x", "e2e-client-token", e2eToken[:len(e2eToken)-1], e2eToken + "9", strings.Repeat("t", 200)} {
		err := ask(conn, tok)
		if st := status.Convert(err); st.Code() != codes.Unauthenticated || st.Message() != "unauthenticated" {
			t.Errorf("ShouldRateLimit with token %q: %v; want Unauthenticated", tok, err)
		}
	}
	if err := ask(conn, e2eToken); err != nil {
		t.Errorf("ShouldRateLimit with the token: %v", err)
	}
}

// TestE2ESecuredReload changes the files under a running admit serve: a new token is taken, a
// certificate without its key is logged and the old one keeps serving, and a new pair is served.
func TestE2ESecuredReload(t *testing.T) {
	s := startSecured(t)
	serial := func() string {
		t.Helper()
		c, err := tls.Dial("tcp", strings.TrimPrefix(s.https, "https://"), tlsClient(s.ca.Pool(), s.good))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	first := serial()

	writeConfig(t, s.tokensFile, e2eToken2+"\n") // a rename: the reader never sees half a file
	s.p.logs.waitLine(t, `msg="client tokens reloaded" tokens=1`)
	if code, _, _, err := s.get(t, "POST", "/v1/check", s.good, e2eToken2); err != nil || code != http.StatusOK {
		t.Errorf("the new token: %d, %v; want 200", code, err)
	}
	if code, _, _, err := s.get(t, "POST", "/v1/check", s.good, e2eToken); err != nil || code != http.StatusUnauthorized {
		t.Errorf("the removed token: %d, %v; want 401", code, err)
	}
	writeConfig(t, s.tokensFile, "short\n")
	s.p.logs.waitLine(t, "client tokens not reloaded; the loaded ones keep serving")
	if code, _, _, err := s.get(t, "POST", "/v1/check", s.good, e2eToken2); err != nil || code != http.StatusOK {
		t.Errorf("the loaded token after a bad file: %d, %v; want 200", code, err)
	}

	next := s.ca.Server(t)
	writeConfig(t, s.server.CertFile, string(next.CertPEM)) // its key not yet
	s.p.logs.waitLine(t, "TLS files not reloaded; the loaded certificate keeps serving")
	if got := serial(); got != first {
		t.Errorf("serial %s after a certificate without its key; want the loaded %s", got, first)
	}
	writeConfig(t, s.server.KeyFile, string(next.KeyPEM))
	s.p.logs.waitLine(t, `msg="TLS files reloaded"`)
	leaf, err := x509.ParseCertificate(next.TLS.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := serial(); got != leaf.SerialNumber.String() {
		t.Errorf("serial %s after the new pair; want %s", got, leaf.SerialNumber)
	}
}

// TestE2ESecuredBadFiles checks that admit serve refuses to start, exit 2, on TLS files it cannot
// use, naming the field.
func TestE2ESecuredBadFiles(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "admit CA")
	a, b := ca.Server(t).Write(t, dir, "a"), ca.Server(t).Write(t, dir, "b")
	config := filepath.Join(dir, "admit.yaml")
	certtest.WriteFile(t, config, []byte("server:\n  tls:\n    cert_file: "+a.CertFile+"\n    key_file: "+b.KeyFile+"\n"+tlsPolicy))
	useSecret(t)
	p := &proc{logs: &logWatch{}}
	code := serve(context.Background(), []string{"--config", config, "--listen", "127.0.0.1:0"}, io.Discard, p.logs)
	if code != exitUsage || !strings.Contains(p.logs.String(), "server.tls.key_file: "+b.KeyFile+" is not the key of the certificate in server.tls.cert_file "+a.CertFile) {
		t.Errorf("serve with a key of another certificate: exit %d, log:\n%s\nwant exit %d naming server.tls.key_file", code, p.logs, exitUsage)
	}
}

// TestE2ESecuredBench runs admit bench against a secured admit serve, over HTTPS and gRPC over TLS,
// with a client certificate and the token: every request is decided; without the token, the HTTP
// target is refused at its probe (exit 2) and every gRPC request fails.
func TestE2ESecuredBench(t *testing.T) {
	s := startSecured(t)
	dir := t.TempDir()
	client := s.good.Write(t, dir, "client")
	caFile, tokenFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token")
	certtest.WriteFile(t, caFile, s.ca.PEM)
	certtest.WriteFile(t, tokenFile, []byte(e2eToken+"\n"))
	tlsArgs := []string{"--ca-file", caFile, "--cert-file", client.CertFile, "--key-file", client.KeyFile}
	grpcArgs := []string{"--target", "grpcs://" + s.grpcAddr, "--domain", "edge", "--descriptor", "database=users"}
	load := []string{"--concurrency", "2", "--duration", "300ms", "--hot-key"}

	code, r, stderr := runBenchBinary(t, slices.Concat([]string{"--target", s.https, "--policy", "per-day", "--client-token-file", tokenFile}, tlsArgs, load)...)
	if code != 0 || r == nil || r.Allowed == 0 || r.Errors != 0 {
		t.Errorf("https with the token: exit %d, report %+v, stderr %q; want every request allowed", code, r, stderr)
	}
	code, r, stderr = runBenchBinary(t, slices.Concat(grpcArgs, []string{"--client-token-file", tokenFile}, tlsArgs, load)...)
	if code != 0 || r == nil || r.Allowed == 0 || r.Errors != 0 {
		t.Errorf("grpcs with the token: exit %d, report %+v, stderr %q; want every request allowed", code, r, stderr)
	}
	code, r, stderr = runBenchBinary(t, slices.Concat([]string{"--target", s.https, "--policy", "per-day"}, tlsArgs, load)...)
	if code != exitUsage || r != nil || !strings.Contains(stderr, "answers 401") {
		t.Errorf("https without the token: exit %d, stderr %q; want 2, answers 401", code, stderr)
	}
	code, r, stderr = runBenchBinary(t, slices.Concat(grpcArgs, tlsArgs, load)...)
	if code != 0 || r == nil || r.Allowed != 0 || r.ErrorKinds["error: Unauthenticated"] == 0 {
		t.Errorf("grpcs without the token: exit %d, report %+v, stderr %q; want every request Unauthenticated", code, r, stderr)
	}
}
