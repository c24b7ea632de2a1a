package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TLSFiles names the PEM files [GenerateTLS] writes: a certificate authority, a server certificate it
// signed for 127.0.0.1 (an IP SAN) and "localhost", and a client certificate it signed.
type TLSFiles struct {
	CAFile         string // the CA's certificate
	ServerCertFile string // the server's certificate
	ServerKeyFile  string // the server's private key
	CertFile       string // the client's certificate
	KeyFile        string // the client's private key
}

// TLSOptions configures [StartTLS].
type TLSOptions struct {
	// AuthClients makes the server demand a client certificate signed by the CA
	// (--tls-auth-clients yes); otherwise it asks for none (no).
	AuthClients bool
}

// GenerateTLS makes, with crypto/x509 and ECDSA P-256 keys, a fresh CA, a server certificate and a
// client certificate, valid for a day, and writes them to dir. It fails t on any error.
func GenerateTLS(t testing.TB, dir string) TLSFiles {
	t.Helper()
	f, err := generateTLS(dir)
	if err != nil {
		t.Fatalf("redistest: certificates: %v", err)
	}
	return f
}

func generateTLS(dir string) (TLSFiles, error) {
	f := TLSFiles{
		CAFile:         filepath.Join(dir, "ca.pem"),
		ServerCertFile: filepath.Join(dir, "server.pem"),
		ServerKeyFile:  filepath.Join(dir, "server-key.pem"),
		CertFile:       filepath.Join(dir, "client.pem"),
		KeyFile:        filepath.Join(dir, "client-key.pem"),
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return f, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return f, err
	}
	if err := writePEM(f.CAFile, "CERTIFICATE", caDER); err != nil {
		return f, err
	}
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage, certFile, keyFile string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: name},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
			tmpl.DNSNames = []string{"localhost"}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
			return err
		}
		return writePEM(keyFile, "EC PRIVATE KEY", keyDER)
	}
	if err := leaf(2, "redistest server", x509.ExtKeyUsageServerAuth, f.ServerCertFile, f.ServerKeyFile); err != nil {
		return f, err
	}
	if err := leaf(3, "redistest client", x509.ExtKeyUsageClientAuth, f.CertFile, f.KeyFile); err != nil {
		return f, err
	}
	return f, nil
}

// writePEM writes one PEM block to name, readable only by its owner.
func writePEM(name, kind string, der []byte) error {
	return os.WriteFile(name, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}

// clientTLS returns the configuration the harness's own clients use: the CA, and the client
// certificate, which a server with --tls-auth-clients yes demands.
func (f TLSFiles) clientTLS() (*tls.Config, error) {
	pemCA, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemCA) {
		return nil, fmt.Errorf("no certificate in %s", f.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}, nil
}

// StartTLS starts, as [Start] does, a TLS-only redis-server (--port 0 --tls-port PORT) with
// certificates that [GenerateTLS] made in its directory, and returns it with their paths. Its
// [Server.URL] is rediss://admit:s3cret@127.0.0.1:PORT, and its own Do and Client speak TLS.
//
// If redis-server was built without TLS, StartTLS skips t, saying so, even when ADMIT_REQUIRE_REDIS
// is 1: that variable demands a redis-server, not one with TLS.
func StartTLS(t testing.TB, opts TLSOptions, args ...string) (*Server, TLSFiles) {
	t.Helper()
	requireRedis(t)
	dir := t.TempDir()
	files := GenerateTLS(t, dir)
	conf, err := files.clientTLS()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	auth := "no"
	if opts.AuthClients {
		auth = "yes"
	}
	pre := []string{
		"--tls-cert-file", files.ServerCertFile,
		"--tls-key-file", files.ServerKeyFile,
		"--tls-ca-cert-file", files.CAFile,
		"--tls-auth-clients", auth,
	}
	s, err := startWith(t, pre, args, ACLRules+" "+ResetACLRules, conf)
	if err != nil {
		if noTLSBuild(err.Error()) {
			t.Skipf("redistest: TLS tests SKIPPED: this redis-server was built without TLS support (BUILD_TLS=yes), so it cannot serve --tls-port: %v", err)
		}
		t.Fatalf("redistest: %v", err)
	}
	return s, files
}

// noTLSBuild reports whether a failed start's message says redis-server lacks TLS support.
func noTLSBuild(msg string) bool {
	for _, sign := range []string{"TLS not supported", "not built with TLS", "BUILD_TLS", "Bad directive or wrong number of arguments"} {
		if strings.Contains(msg, sign) {
			return strings.Contains(msg, "tls")
		}
	}
	return false
}
