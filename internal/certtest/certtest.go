// Package certtest makes the certificates of TLS tests with crypto/x509: a CA, a server
// certificate for 127.0.0.1 and localhost, and client certificates, good, expired or signed by
// another CA, each with its key, in memory and as PEM files. It is for tests only.
package certtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TB is what the package needs of a test: a *testing.T, *testing.B or testing.TB.
type TB interface {
	Helper()
	Fatal(args ...any)
}

// A CA signs certificates.
type CA struct {
	Cert *x509.Certificate
	PEM  []byte // the CA's certificate
	key  *ecdsa.PrivateKey
}

// A Pair is a certificate and its key, and the PEM files of both once written.
type Pair struct {
	TLS               tls.Certificate
	CertPEM, KeyPEM   []byte
	CertFile, KeyFile string // set by Write
}

// NewCA returns a new CA named name, valid from an hour ago for a day.
func NewCA(t TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

// Pool returns a pool of the CA's certificate alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Server returns a server certificate for 127.0.0.1, ::1 and localhost, valid for a day.
func (ca *CA) Server(t TB) *Pair {
	t.Helper()
	return ca.sign(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "admit test server"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:   time.Now().Add(-time.Hour),
		NotAfter:    time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// Client returns a client certificate named name, valid for a day.
func (ca *CA) Client(t TB, name string) *Pair {
	t.Helper()
	return ca.client(t, name, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
}

// ExpiredClient returns a client certificate named name that expired an hour ago.
func (ca *CA) ExpiredClient(t TB, name string) *Pair {
	t.Helper()
	return ca.client(t, name, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour))
}

func (ca *CA) client(t TB, name string, from, until time.Time) *Pair {
	t.Helper()
	return ca.sign(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		NotBefore:   from,
		NotAfter:    until,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// sign completes tmpl with a serial number and a new key, and signs it.
func (ca *CA) sign(t TB, tmpl *x509.Certificate) *Pair {
	t.Helper()
	key := newKey(t)
	tmpl.SerialNumber = serial(t)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := &Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
	if p.TLS, err = tls.X509KeyPair(p.CertPEM, p.KeyPEM); err != nil {
		t.Fatal(err)
	}
	return p
}

// Write writes the pair's PEM files into dir as NAME.crt and NAME.key, and records their names.
func (p *Pair) Write(t TB, dir, name string) *Pair {
	t.Helper()
	p.CertFile, p.KeyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	WriteFile(t, p.CertFile, p.CertPEM)
	WriteFile(t, p.KeyFile, p.KeyPEM)
	return p
}

// WriteFile writes data to the file name, readable by its owner only, or fails t.
func WriteFile(t TB, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func newKey(t TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
