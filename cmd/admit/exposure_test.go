package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/admit-dev/admit/internal/certtest"
	"github.com/admit-dev/admit/internal/syncbuf"
	"github.com/admit-dev/admit/policy"
)

// TestBeyondLoopback tells the addresses that listen beyond loopback.
func TestBeyondLoopback(t *testing.T) {
	addrs := []string{"127.0.0.1:8080", "[::1]:8080", "localhost:8080", "127.0.0.2:0", ":8080", "0.0.0.0:8080", "[::]:8081", "10.0.0.1:8080", "admit.internal:8080", "no-port"}
	want := []string{":8080", "0.0.0.0:8080", "[::]:8081", "10.0.0.1:8080", "admit.internal:8080", "no-port"}
	if got := beyondLoopback(addrs); !slices.Equal(got, want) {
		t.Errorf("beyondLoopback = %q; want %q", got, want)
	}
}

// TestOpenNetworkWarning checks the one warning of a data plane beyond loopback that asks its
// clients for no credential: logged once for every listener, and not with client tokens, with
// client certificates, with server.trust_network, or on loopback.
func TestOpenNetworkWarning(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "admit CA")
	pair := ca.Server(t).Write(t, dir, "server")
	caFile, tokens := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tokens")
	certtest.WriteFile(t, caFile, ca.PEM)
	certtest.WriteFile(t, tokens, []byte("a-client-token-0123456789\n"))
	tlsOnly := policy.ServerTLS{CertFile: pair.CertFile, KeyFile: pair.KeyFile}
	mutual := policy.ServerTLS{CertFile: pair.CertFile, KeyFile: pair.KeyFile, ClientCAFile: caFile}
	open := []string{"0.0.0.0:8080", ":8081"}
	for _, c := range []struct {
		name    string
		srv     policy.Server
		listens []string
		warn    bool
	}{
		{"plain, beyond loopback", policy.Server{}, open, true},
		{"TLS without client certificates", policy.Server{TLS: tlsOnly}, open, true},
		{"client certificates", policy.Server{TLS: mutual}, open, false},
		{"client tokens", policy.Server{ClientTokensFile: tokens}, open, false},
		{"trust_network", policy.Server{TrustNetwork: true}, open, false},
		{"loopback", policy.Server{}, []string{"127.0.0.1:8080", "localhost:8081"}, false},
	} {
		var logs bytes.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		_, code := startExposure(ctx, c.srv, c.listens, slog.New(slog.NewTextHandler(&logs, nil)))
		cancel()
		if code != exitOK {
			t.Fatalf("%s: exit %d; log:\n%s", c.name, code, logs.String())
		}
		n := strings.Count(logs.String(), "level=WARN")
		switch {
		case c.warn && (n != 1 || !strings.Contains(logs.String(), `listen=0.0.0.0:8080,:8081`) || !strings.Contains(logs.String(), "server.trust_network")):
			t.Errorf("%s: want one warning naming both listeners and the fix; log:\n%s", c.name, logs.String())
		case !c.warn && n != 0:
			t.Errorf("%s: want no warning; log:\n%s", c.name, logs.String())
		}
	}
}

// TestConfigValidateFiles checks that admit config validate reads the files of server.tls and
// server.client_tokens_file, and names the field of each one it cannot use.
func TestConfigValidateFiles(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "admit CA")
	a, b := ca.Server(t).Write(t, dir, "a"), ca.Server(t).Write(t, dir, "b")
	caFile, noCA, tokens, short := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "no-ca.crt"), filepath.Join(dir, "tokens"), filepath.Join(dir, "short")
	certtest.WriteFile(t, caFile, ca.PEM)
	certtest.WriteFile(t, noCA, []byte("not a certificate\n"))
	certtest.WriteFile(t, tokens, []byte("a-client-token-0123456789\n"))
	certtest.WriteFile(t, short, []byte("a-client-token-0123456789\n\ntoo-short\n"))
	missing := filepath.Join(dir, "missing")
	file := func(cert, key, clientCA, tokensFile string) string {
		t.Helper()
		text := "server:\n  tls:\n    cert_file: " + cert + "\n    key_file: " + key + "\n"
		if clientCA != "" {
			text += "    client_ca_file: " + clientCA + "\n"
		}
		if tokensFile != "" {
			text += "  client_tokens_file: " + tokensFile + "\n"
		}
		f, err := os.CreateTemp(dir, "admit-*.yaml")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		f.WriteString(text + tlsPolicy)
		return f.Name()
	}
	for _, c := range []struct {
		name string
		file string
		want []string // the lines on stderr, after "FILE: "; none for valid
	}{
		{"valid", file(a.CertFile, a.KeyFile, caFile, tokens), nil},
		{"missing certificate", file(missing, a.KeyFile, "", ""), []string{"server.tls.cert_file: open " + missing + ": no such file or directory"}},
		{"key of another certificate", file(a.CertFile, b.KeyFile, "", ""), []string{"server.tls.key_file: " + b.KeyFile + " is not the key of the certificate in server.tls.cert_file " + a.CertFile}},
		{"client CA without certificates", file(a.CertFile, a.KeyFile, noCA, ""), []string{"server.tls.client_ca_file: " + noCA + " holds no PEM certificate"}},
		{"unreadable tokens", file(a.CertFile, a.KeyFile, "", dir), []string{"server.client_tokens_file: read " + dir + ": is a directory"}},
		{"token too short, and a missing key", file(a.CertFile, missing, "", short), []string{
			"server.tls.key_file: open " + missing + ": no such file or directory",
			"server.client_tokens_file: " + short + ": line 3: the token is 9 bytes; want at least 16",
		}},
	} {
		var stdout, stderr syncbuf.Buffer
		code := config([]string{"validate", c.file}, &stdout, &stderr)
		if c.want == nil {
			if code != exitOK || !strings.Contains(stdout.String(), ": valid: 1 policy") {
				t.Errorf("%s: exit %d, stdout %q, stderr %q; want valid", c.name, code, stdout.String(), stderr.String())
			}
			continue
		}
		var want []string
		for _, w := range c.want {
			want = append(want, c.file+": "+w)
		}
		want = append(want, fmt.Sprintf("admit config validate: %s: %d %s", c.file, len(c.want), plural(len(c.want), "error", "errors")))
		if got := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n"); code != exitError || !slices.Equal(got, want) {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant exit %d and:\n%s", c.name, code, stderr.String(), exitError, strings.Join(want, "\n"))
		}
	}
}

// TestHandshakeErrorLog: a TLS listener's handshake errors are logged once per interval, not once
// a connection (a TCP probe every few seconds would fill the log); its other lines are each logged.
func TestHandshakeErrorLog(t *testing.T) {
	var logs syncbuf.Buffer
	w := newErrorLog(slog.New(slog.NewTextHandler(&logs, nil)))
	for _, line := range []string{
		handshakePrefix + "10.0.0.1:5000: EOF\n",
		handshakePrefix + "10.0.0.2:5000: tls: client didn't provide a certificate\n",
		"http: superfluous response.WriteHeader call\n",
		handshakePrefix + "10.0.0.3:5000: EOF\n",
	} {
		if n, err := w.Write([]byte(line)); n != len(line) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	got := logs.String()
	if n := strings.Count(got, `msg="TLS handshake failed"`); n != 1 || !strings.Contains(got, `error="10.0.0.1:5000: EOF"`) {
		t.Errorf("%d records of handshake errors, want the first one only (the others counted for the summary):\n%s", n, got)
	}
	if !strings.Contains(got, `level=WARN msg="http: superfluous response.WriteHeader call"`) {
		t.Errorf("another line of net/http's was not logged:\n%s", got)
	}
}
