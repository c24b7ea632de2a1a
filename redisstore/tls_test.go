package redisstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
)

// openTLS returns a Store for cfg, closed at cleanup.
func openTLS(t *testing.T, cfg Config) *Store {
	t.Helper()
	// The handshake, and loading the system's roots when no CA file is given, can take longer than the
	// default 200 ms on a loaded machine (with -race): a timeout would hide the certificate error these
	// tests look for.
	if cfg.DialTimeout == 0 && !strings.Contains(cfg.URL, "dial_timeout=") {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.CommandTimeout == 0 {
		cfg.CommandTimeout = 10 * time.Second
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Decisions over TLS: the server verified against the CA file, with a client certificate when the
// server demands one; a limit counts across two Stores as over plaintext.
func TestTLSDecisions(t *testing.T) {
	for _, auth := range []bool{false, true} {
		name := "ServerAuthOnly"
		if auth {
			name = "ClientCertificate"
		}
		t.Run(name, func(t *testing.T) {
			srv, files := redistest.StartTLS(t, redistest.TLSOptions{AuthClients: auth})
			cfg := Config{URL: srv.URL(), CAFile: files.CAFile}
			if auth {
				cfg.CertFile, cfg.KeyFile = files.CertFile, files.KeyFile
			}
			a, b := openTLS(t, cfg), openTLS(t, cfg)
			key := newKey(t)
			for i, s := range []*Store{a, b, a} {
				if d := take(t, s, key, threePerMinute, 1); !d.Allowed || d.Remaining != int64(2-i) {
					t.Fatalf("take %d over TLS: %+v", i+1, d)
				}
			}
			if d := take(t, b, key, threePerMinute, 1); d.Allowed {
				t.Fatalf("take 4 over TLS allowed: %+v", d)
			}
			if n, err := srv.Do(t, "EXISTS", key).AsInt64(); err != nil || n != 1 {
				t.Fatalf("EXISTS %s = %d, %v; want the key in Redis", key, n, err)
			}
		})
	}
}

// With --tls-auth-clients yes, a Store without a client certificate decides nothing.
func TestTLSClientCertificateRequired(t *testing.T) {
	srv, files := redistest.StartTLS(t, redistest.TLSOptions{AuthClients: true})
	s := openTLS(t, Config{URL: srv.URL(), CAFile: files.CAFile})
	expectUnavailable(t, s, "")
}

// A CA that did not sign the server's certificate: every decision fails, unavailable, and the error
// names the certificate; nothing reaches Redis.
func TestTLSWrongCA(t *testing.T) {
	srv, _ := redistest.StartTLS(t, redistest.TLSOptions{})
	other := redistest.GenerateTLS(t, t.TempDir())
	s := openTLS(t, Config{URL: srv.URL(), CAFile: other.CAFile})
	expectUnavailable(t, s, "certificate")
	// Without a CA file the system roots apply, which do not know the test CA either.
	s = openTLS(t, Config{URL: srv.URL()})
	expectUnavailable(t, s, "certificate")
	if n, err := srv.Do(t, "DBSIZE").AsInt64(); err != nil || n != 0 {
		t.Fatalf("DBSIZE = %d, %v; want 0", n, err)
	}
}

// ServerName: the certificate names 127.0.0.1 and localhost; naming another host fails, naming
// localhost succeeds.
func TestTLSServerName(t *testing.T) {
	srv, files := redistest.StartTLS(t, redistest.TLSOptions{})
	s := openTLS(t, Config{URL: srv.URL(), CAFile: files.CAFile, ServerName: "redis.example"})
	expectUnavailable(t, s, "certificate")
	s = openTLS(t, Config{URL: srv.URL(), CAFile: files.CAFile, ServerName: "localhost"})
	take(t, s, newKey(t), threePerMinute, 1)
}

// redis:// against the TLS port: unavailable, never a fallback of any kind.
func TestTLSPlaintextRefused(t *testing.T) {
	srv, _ := redistest.StartTLS(t, redistest.TLSOptions{})
	s := open(t, "redis://"+srv.Addr())
	expectUnavailable(t, s, "")
}

// expectUnavailable checks that a few decisions on s all fail with admit.ErrUnavailable, their
// errors containing want.
func expectUnavailable(t *testing.T, s *Store, want string) {
	t.Helper()
	key := newKey(t)
	for i := range 3 {
		d, err := s.Take(context.Background(), admit.Request{Key: key, Limit: threePerMinute, Cost: 1})
		if !errors.Is(err, admit.ErrUnavailable) {
			t.Fatalf("decision %d: %+v, %v; want admit.ErrUnavailable", i+1, d, err)
		}
		if i == 0 {
			t.Logf("decision 1: %v", err)
		}
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("decision %d: error %q does not mention %q", i+1, err, want)
		}
	}
}

// New refuses TLS settings it cannot honour, before connecting: no silent plaintext, no silent TLS,
// no start on a certificate it cannot use.
func TestTLSConfigRefused(t *testing.T) {
	dir := t.TempDir()
	files := redistest.GenerateTLS(t, dir)
	garbled := filepath.Join(dir, "garbled.pem")
	if err := os.WriteFile(garbled, []byte("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	const url = "rediss://127.0.0.1:6380"
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"PlainURLWithCA", Config{URL: "redis://127.0.0.1:6379", CAFile: files.CAFile}, "not rediss://"},
		{"PlainURLWithServerName", Config{URL: "redis://127.0.0.1:6379", ServerName: "x"}, "not rediss://"},
		{"UnixWithCert", Config{URL: "unix:///tmp/redis.sock", CertFile: files.CertFile, KeyFile: files.KeyFile}, "not rediss://"},
		{"MissingCA", Config{URL: url, CAFile: missing}, "missing.pem"},
		{"GarbledCA", Config{URL: url, CAFile: garbled}, "no PEM certificate"},
		{"KeyAsCA", Config{URL: url, CAFile: files.KeyFile}, "no PEM certificate"},
		{"CertWithoutKey", Config{URL: url, CertFile: files.CertFile}, "without its key"},
		{"KeyWithoutCert", Config{URL: url, KeyFile: files.KeyFile}, "without its certificate"},
		{"MissingCert", Config{URL: url, CertFile: missing, KeyFile: files.KeyFile}, "missing.pem"},
		{"GarbledCert", Config{URL: url, CertFile: garbled, KeyFile: files.KeyFile}, "garbled.pem"},
		{"MismatchedKey", Config{URL: url, CertFile: files.CertFile, KeyFile: files.ServerKeyFile}, "does not match"},
		{"SkipVerify", Config{URL: url + "?skip_verify=true", CAFile: files.CAFile}, "skip_verify"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.cfg)
			if err == nil {
				s.Close()
				t.Fatalf("New(%+v) succeeded", tc.cfg)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New(%+v): %v; want an error mentioning %q", tc.cfg, err, tc.want)
			}
		})
	}
	// The settings given right: New succeeds without connecting, and never skips verification.
	opt, err := clientOption(Config{URL: url, CAFile: files.CAFile, CertFile: files.CertFile, KeyFile: files.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	if c := opt.TLSConfig; c == nil || c.InsecureSkipVerify || c.RootCAs == nil || len(c.Certificates) != 1 || c.ServerName != "127.0.0.1" {
		t.Fatalf("TLS config %+v", c)
	}
}
