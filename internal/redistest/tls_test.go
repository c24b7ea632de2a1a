package redistest

import (
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"
)

// StartTLS's server answers over TLS with the generated CA, only over TLS, and demands a client
// certificate when told to.
func TestStartTLS(t *testing.T) {
	for _, auth := range []bool{false, true} {
		name := "NoClientAuth"
		if auth {
			name = "ClientAuth"
		}
		t.Run(name, func(t *testing.T) {
			s, files := StartTLS(t, TLSOptions{AuthClients: auth})
			if !strings.HasPrefix(s.URL(), "rediss://admit:s3cret@127.0.0.1:") {
				t.Fatalf("URL() = %q, want rediss://admit:s3cret@127.0.0.1:PORT", s.URL())
			}
			if err := s.Do(t, "SET", "k", "v").Error(); err != nil {
				t.Fatalf("SET over TLS: %v", err)
			}
			// Plaintext on the TLS port gets no PONG.
			if _, err := ping(s.Addr(), nil, time.Second); err == nil {
				t.Fatal("a plaintext PING on the TLS port was answered")
			}
			// Without a client certificate: refused exactly when AuthClients.
			conf, err := files.clientTLS()
			if err != nil {
				t.Fatal(err)
			}
			conf.Certificates = nil
			_, err = ping(s.Addr(), conf, 2*time.Second)
			if auth && err == nil {
				t.Fatal("with --tls-auth-clients yes, a client without a certificate was answered")
			}
			if !auth && err != nil {
				t.Fatalf("with --tls-auth-clients no, a client without a certificate: %v", err)
			}
			s.Restart(t)
			if err := s.Do(t, "PING").Error(); err != nil {
				t.Fatalf("PING over TLS after Restart: %v", err)
			}
		})
	}
}

// A second GenerateTLS makes a CA that does not vouch for the first server.
func TestGenerateTLSWrongCA(t *testing.T) {
	s, _ := StartTLS(t, TLSOptions{})
	other := GenerateTLS(t, t.TempDir())
	conf, err := other.clientTLS()
	if err != nil {
		t.Fatal(err)
	}
	_, err = ping(s.Addr(), conf, 2*time.Second)
	var unknown x509.UnknownAuthorityError
	if err == nil || !errors.As(err, &unknown) {
		t.Fatalf("PING with another CA: %v, want an unknown-authority error", err)
	}
}

// noTLSBuild tells a redis-server without TLS from other start failures.
func TestNoTLSBuildMessage(t *testing.T) {
	for msg, want := range map[string]bool{
		"*** FATAL CONFIG FILE ERROR ***\n>>> 'tls-port \"6380\"'\nBad directive or wrong number of arguments": true,
		"exited at startup: TLS not supported in this build: tls-port":                                         true,
		"Failed to configure TLS. Check logs for more info.":                                                   false,
		"Address already in use": false,
	} {
		if got := noTLSBuild(msg); got != want {
			t.Errorf("noTLSBuild(%q) = %v, want %v", msg, got, want)
		}
	}
}
