package clienttoken_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/admit-dev/admit/internal/clienttoken"
)

const (
	alice = "alice-0123456789abcdef"
	bob   = "bob-fedcba9876543210-and-more"
)

// writeTokens writes text to a tokens file in a new directory and returns its name.
func writeTokens(t *testing.T, text string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// wrongTokens are tokens of the Set's but for a byte, a prefix, a longer one, and tokens of other
// lengths: none is valid.
var wrongTokens = []string{
	"", "a", "alice", alice[:len(alice)-1], alice + "x", "Alice-0123456789abcdef", "alice-0123456789abcdeF",
	strings.Repeat("x", 16), strings.Repeat("y", 64), strings.Repeat("z", 4096), bob + "!", "x" + bob,
}

// TestParse reads tokens around blank lines, comments, spaces and CRLF line ends, and refuses
// short tokens, spaces within one, bytes beyond printable ASCII and a file of no token, naming
// the line and never the token.
func TestParse(t *testing.T) {
	d, err := clienttoken.Parse([]byte("# the ops team's tokens\n\n  " + alice + "  \r\n\t# bob\n" + bob + "\n"))
	if err != nil || len(d) != 2 {
		t.Fatalf("Parse = %d digests, %v; want 2", len(d), err)
	}
	for _, c := range []struct{ text, want string }{
		{alice + "\nshort\n", "line 2: the token is 5 bytes; want at least 16"},
		{"x\n", "line 1: the token is 1 bytes; want at least 16"},
		{strings.Repeat("s", 15), "line 1: the token is 15 bytes; want at least 16"},
		{"two words-0123456789", "line 1: the token holds a space or a byte that is not printable ASCII"},
		{"caf\u00e9-0123456789abcdef", "line 1: the token holds a space or a byte that is not printable ASCII"},
		{"", "holds no token"},
		{"# only a comment\n\n", "holds no token"},
	} {
		_, err := clienttoken.Parse([]byte(c.text))
		if err == nil || err.Error() != c.want {
			t.Errorf("Parse(%q) = %v; want %s", c.text, err, c.want)
		}
	}
}

// TestLoad checks Load's and Check's errors: each names the field and the file.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	short := writeTokens(t, alice+"\n0123456789\n")
	for _, c := range []struct{ path, want string }{
		{missing, "server.client_tokens_file: open " + missing + ": no such file or directory"},
		{dir, "server.client_tokens_file: read " + dir + ": is a directory"},
		{short, "server.client_tokens_file: " + short + ": line 2: the token is 10 bytes; want at least 16"},
		{"", "server.client_tokens_file: want a file name"},
	} {
		_, err := clienttoken.Load(c.path)
		if err == nil || err.Error() != c.want {
			t.Errorf("Load(%q) = %v; want %s", c.path, err, c.want)
		}
		if cerr := clienttoken.Check(c.path); cerr == nil || cerr.Error() != c.want {
			t.Errorf("Check(%q) = %v; want %s", c.path, cerr, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), alice) || strings.Contains(err.Error(), "0123456789\n")) {
			t.Errorf("the error of %q shows a token: %v", c.path, err)
		}
	}
	if _, err := clienttoken.Load(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file = %v; want it to wrap os.ErrNotExist", err)
	}
	big := writeTokens(t, alice+"\n"+strings.Repeat("#", clienttoken.MaxFileSize))
	if _, err := clienttoken.Load(big); err == nil || !strings.Contains(err.Error(), "larger than 1048576 bytes") {
		t.Errorf("Load of a file too large = %v", err)
	}
}

// TestValid accepts each token of the file and nothing else.
func TestValid(t *testing.T) {
	s, err := clienttoken.Load(writeTokens(t, alice+"\n"+bob+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 2 {
		t.Errorf("Len() = %d; want 2", s.Len())
	}
	for _, tok := range []string{alice, bob} {
		if !s.Valid(tok) {
			t.Errorf("Valid(%q) = false", tok)
		}
	}
	for _, tok := range wrongTokens {
		if s.Valid(tok) {
			t.Errorf("Valid(%q) = true", tok)
		}
	}
}

// TestReload takes a changed file's tokens, keeps the loaded ones when the new file is bad
// (reporting it once), and reads the file again when forced.
func TestReload(t *testing.T) {
	file := writeTokens(t, alice+"\n")
	s, err := clienttoken.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := s.Reload(false); changed || err != nil {
		t.Errorf("Reload of an unchanged file = %v, %v", changed, err)
	}
	if err := os.WriteFile(file, []byte(alice+"\nshort\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := s.Reload(false); changed || err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("Reload of a bad file = %v, %v; want its error", changed, err)
	}
	if changed, err := s.Reload(false); changed || err != nil {
		t.Errorf("Reload of the same bad file = %v, %v; want it reported once", changed, err)
	}
	if !s.Valid(alice) {
		t.Error("the loaded token was dropped by a bad reload")
	}
	if err := os.WriteFile(file, []byte(bob+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := s.Reload(false); !changed || err != nil {
		t.Fatalf("Reload of a good file = %v, %v", changed, err)
	}
	if s.Valid(alice) || !s.Valid(bob) {
		t.Errorf("after the reload: alice %v, bob %v; want bob's token only", s.Valid(alice), s.Valid(bob))
	}
	if changed, err := s.Reload(true); !changed || err != nil {
		t.Errorf("a forced Reload = %v, %v", changed, err)
	}
}

// TestHTTP sends real HTTP requests through the guard: the open paths answer without a token; the
// others want one right token, and answer 401 with no detail otherwise.
func TestHTTP(t *testing.T) {
	s, err := clienttoken.Load(writeTokens(t, alice+"\n"+bob+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	var refusals atomic.Int64
	s.OnRefused(func(_ context.Context, via, client string) {
		if via != "http" || !strings.HasPrefix(client, "127.0.0.1:") {
			t.Errorf("OnRefused(%q, %q); want http and the client's address", via, client)
		}
		refusals.Add(1)
	})
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "app "+r.URL.Path) })
	srv := httptest.NewServer(s.HTTP(app, "/healthz", "/readyz", "/metrics"))
	defer srv.Close()
	do := func(path string, auth ...string) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequest("POST", srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range auth {
			req.Header.Add("Authorization", a)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), resp.Header
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, body, _ := do(path); code != 200 || body != "app "+path {
			t.Errorf("%s without a token: %d %q; want it open", path, code, body)
		}
	}
	refused := func(what, path string, auth ...string) {
		t.Helper()
		before := refusals.Load()
		code, body, hdr := do(path, auth...)
		if refusals.Load() != before+1 {
			t.Errorf("%s %s: OnRefused called %d times; want once", path, what, refusals.Load()-before)
		}
		if code != 401 || body != `{"error":"unauthorized"}`+"\n" || hdr.Get("WWW-Authenticate") != "Bearer" {
			t.Errorf("%s %s: %d %q, WWW-Authenticate %q; want 401 unauthorized, Bearer", path, what, code, body, hdr.Get("WWW-Authenticate"))
		}
	}
	for _, path := range []string{"/v1/check", "/v1/check/auth/x", "/demo", "/v1/policies", "/healthz/", "/nothing"} {
		refused("without a token", path)
		for _, tok := range wrongTokens {
			refused("with the wrong token "+tok, path, "Bearer "+tok)
		}
		refused("with a token in another scheme", path, "Basic "+alice)
		refused("with the bare token", path, alice)
		refused("with two Authorization fields", path, "Bearer "+alice, "Bearer "+bob)
		for _, auth := range []string{"Bearer " + alice, "bearer " + bob, "BEARER  " + alice} {
			if code, body, _ := do(path, auth); code != 200 || body != "app "+path {
				t.Errorf("%s with %q: %d %q; want served", path, auth, code, body)
			}
		}
	}
}

// limiter is a rate limit service that says OK to everything.
type limiter struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

func (limiter) ShouldRateLimit(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}, nil
}

// TestGRPC calls a real gRPC server through the guard: health answers without a token;
// ShouldRateLimit wants one right token in the authorization metadata, and fails Unauthenticated
// with no detail otherwise.
func TestGRPC(t *testing.T) {
	s, err := clienttoken.Load(writeTokens(t, alice+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	var refusals atomic.Int64
	s.OnRefused(func(_ context.Context, via, client string) {
		if via != "grpc" || !strings.HasPrefix(client, "127.0.0.1:") {
			t.Errorf("OnRefused(%q, %q); want grpc and the client's address", via, client)
		}
		refusals.Add(1)
	})
	g := grpc.NewServer(s.GRPC()...)
	rlsv3.RegisterRateLimitServiceServer(g, limiter{})
	healthpb.RegisterHealthServer(g, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(ln)
	defer g.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health without a token: %v; want it open", err)
	}
	call := func(auth ...string) error {
		t.Helper()
		ctx := ctx
		for _, a := range auth {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", a)
		}
		_, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "d"})
		return err
	}
	refused := func(what string, auth ...string) {
		t.Helper()
		err := call(auth...)
		if st := status.Convert(err); st.Code() != codes.Unauthenticated || st.Message() != "unauthenticated" || len(st.Details()) > 0 {
			t.Errorf("ShouldRateLimit %s: %v; want Unauthenticated, no detail", what, err)
		}
	}
	refused("without a token")
	for _, tok := range wrongTokens {
		refused("with the wrong token "+tok, "Bearer "+tok)
	}
	refused("with the bare token", alice)
	refused("with two tokens", "Bearer "+alice, "Bearer "+alice)
	if err := call("Bearer " + alice); err != nil {
		t.Errorf("ShouldRateLimit with the token: %v; want served", err)
	}
	if want := int64(len(wrongTokens) + 3); refusals.Load() != want {
		t.Errorf("OnRefused called %d times; want %d, once a refused call", refusals.Load(), want)
	}
}
