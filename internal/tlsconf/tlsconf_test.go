package tlsconf_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/certtest"
	"github.com/admit-dev/admit/internal/tlsconf"
)

// serve accepts TLS connections on a loopback listener with cfg, answers each with "ok" once its
// handshake is done, and returns the address.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				if c.(*tls.Conn).Handshake() == nil {
					io.WriteString(c, "ok")
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// dial connects to addr trusting roots, presenting cert if not nil, and returns what the server
// said, or the error of the handshake or of the read (where TLS 1.3 reports a refused client
// certificate), and the certificate the server presented.
func dial(t *testing.T, addr string, roots *x509.CertPool, cert *tls.Certificate) (string, *x509.Certificate, error) {
	t.Helper()
	cfg := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
	if cert != nil { // sent whatever CAs the server names, as a client that tries its luck
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 30 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return "", nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil {
		return "", nil, err
	}
	return string(got), c.ConnectionState().PeerCertificates[0], nil
}

// TestClientCertificates runs real TLS clients against a Holder with a client CA: no
// certificate, one of another CA and an expired one are refused; a good one is served.
func TestClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca, other := certtest.NewCA(t, "admit CA"), certtest.NewCA(t, "another CA")
	server := ca.Server(t).Write(t, dir, "server")
	caFile := filepath.Join(dir, "ca.crt")
	certtest.WriteFile(t, caFile, ca.PEM)
	h, err := tlsconf.New(tlsconf.Files{CertFile: server.CertFile, KeyFile: server.KeyFile, ClientCAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	if !h.MutualTLS() {
		t.Error("MutualTLS() = false with a client CA")
	}
	addr := serve(t, h.Config())
	for _, c := range []struct {
		name   string
		cert   *tls.Certificate
		refuse string // the alert of the refusal; "" for served
	}{
		{"no certificate", nil, "certificate required"},
		{"another CA", &other.Client(t, "mallory").TLS, "unknown certificate authority"},
		{"expired", &ca.ExpiredClient(t, "alice").TLS, "expired certificate"},
		{"good", &ca.Client(t, "alice").TLS, ""},
	} {
		got, _, err := dial(t, addr, ca.Pool(), c.cert)
		switch {
		case c.refuse == "" && (err != nil || got != "ok"):
			t.Errorf("%s: %q, %v; want served", c.name, got, err)
		case c.refuse != "" && (err == nil || !strings.Contains(err.Error(), c.refuse)):
			t.Errorf("%s: %q, %v; want the handshake refused: %s", c.name, got, err, c.refuse)
		default:
			t.Logf("%s: %q, %v", c.name, got, err)
		}
	}
	// A client that does not trust the server's CA refuses it.
	if _, _, err := dial(t, addr, other.Pool(), &ca.Client(t, "alice").TLS); err == nil {
		t.Error("a client trusting another CA accepted the server")
	}
}

// TestNoClientCA serves any client, with or without a certificate, when no client CA is set.
func TestNoClientCA(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "admit CA")
	server := ca.Server(t).Write(t, dir, "server")
	h, err := tlsconf.New(tlsconf.Files{CertFile: server.CertFile, KeyFile: server.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	if h.MutualTLS() {
		t.Error("MutualTLS() = true without a client CA")
	}
	addr := serve(t, h.Config())
	if got, _, err := dial(t, addr, ca.Pool(), nil); err != nil || got != "ok" {
		t.Errorf("a client without a certificate: %q, %v; want served", got, err)
	}
}

// TestReload replaces the certificate when its files change, keeps the loaded one when the new
// files are bad (reporting that once), and takes a new client CA.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "admit CA")
	first := ca.Server(t).Write(t, dir, "server")
	caFile := filepath.Join(dir, "ca.crt")
	certtest.WriteFile(t, caFile, ca.PEM)
	files := tlsconf.Files{CertFile: first.CertFile, KeyFile: first.KeyFile, ClientCAFile: caFile}
	h, err := tlsconf.New(files)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, h.Config())
	alice := ca.Client(t, "alice")
	serial := func() string {
		t.Helper()
		_, leaf, err := dial(t, addr, ca.Pool(), &alice.TLS)
		if err != nil {
			t.Fatal(err)
		}
		return leaf.SerialNumber.String()
	}
	if changed, err := h.Reload(false); changed || err != nil {
		t.Errorf("Reload of unchanged files = %v, %v; want false, nil", changed, err)
	}
	before := serial()

	second := ca.Server(t)
	rewrite(t, files.CertFile, second.CertPEM) // the key does not match yet
	changed, err := h.Reload(false)
	if changed || err == nil || !strings.Contains(err.Error(), "server.tls.key_file") {
		t.Errorf("Reload of a certificate without its key = %v, %v; want the key_file error", changed, err)
	}
	if changed, err := h.Reload(false); changed || err != nil {
		t.Errorf("a second Reload of the same bad files = %v, %v; want it reported once", changed, err)
	}
	if got := serial(); got != before {
		t.Errorf("serving serial %s after a bad reload; want the loaded %s", got, before)
	}
	rewrite(t, files.KeyFile, second.KeyPEM)
	if changed, err := h.Reload(false); !changed || err != nil {
		t.Fatalf("Reload of the new pair = %v, %v; want it loaded", changed, err)
	}
	leaf, _ := x509.ParseCertificate(second.TLS.Certificate[0])
	if got := serial(); got != leaf.SerialNumber.String() {
		t.Errorf("serving serial %s after the reload; want the new %s", got, leaf.SerialNumber)
	}
	if !h.NotAfter().Equal(leaf.NotAfter) {
		t.Errorf("NotAfter() = %v; want the new certificate's %v", h.NotAfter(), leaf.NotAfter)
	}

	// A new client CA: alice's certificate is refused, one of the new CA served.
	next := certtest.NewCA(t, "next CA")
	rewrite(t, caFile, next.PEM)
	if changed, err := h.Reload(false); !changed || err != nil {
		t.Fatalf("Reload of a new client CA = %v, %v", changed, err)
	}
	if _, _, err := dial(t, addr, ca.Pool(), &alice.TLS); err == nil {
		t.Error("a client of the old CA was served after the client CA changed")
	}
	if got, _, err := dial(t, addr, ca.Pool(), &next.Client(t, "bob").TLS); err != nil || got != "ok" {
		t.Errorf("a client of the new CA: %q, %v; want served", got, err)
	}
	if changed, err := h.Reload(true); !changed || err != nil {
		t.Errorf("a forced Reload = %v, %v; want the files loaded again", changed, err)
	}
}

// rewrites is the count of rewrite's calls, which sets each file's modification time apart.
var rewrites int

// rewrite writes data to the file name, and sets its modification time to one no other rewrite
// gave: a file rewritten with the same size within the file system's clock tick is seen to change.
func rewrite(t *testing.T, name string, data []byte) {
	t.Helper()
	certtest.WriteFile(t, name, data)
	rewrites++
	at := time.Now().Add(time.Duration(rewrites) * time.Hour)
	if err := os.Chtimes(name, at, at); err != nil {
		t.Fatal(err)
	}
}

// TestBadFiles checks the errors of New and Check: each names the field and the file.
func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "admit CA")
	good := ca.Server(t).Write(t, dir, "server")
	other := ca.Server(t).Write(t, dir, "other")
	caFile := filepath.Join(dir, "ca.crt")
	certtest.WriteFile(t, caFile, ca.PEM)
	empty := filepath.Join(dir, "empty.pem")
	certtest.WriteFile(t, empty, []byte("# no certificate here\n"))
	missing := filepath.Join(dir, "missing.pem")
	for _, c := range []struct {
		name  string
		files tlsconf.Files
		want  string
	}{
		{"missing certificate", tlsconf.Files{CertFile: missing, KeyFile: good.KeyFile}, "server.tls.cert_file: open " + missing + ": no such file or directory"},
		{"unreadable certificate", tlsconf.Files{CertFile: dir, KeyFile: good.KeyFile}, "server.tls.cert_file: read " + dir + ": is a directory"},
		{"missing key", tlsconf.Files{CertFile: good.CertFile, KeyFile: missing}, "server.tls.key_file: open " + missing + ": no such file or directory"},
		{"no certificate in cert_file", tlsconf.Files{CertFile: empty, KeyFile: good.KeyFile}, "server.tls.cert_file: " + empty + ": holds no PEM certificate"},
		{"key of another certificate", tlsconf.Files{CertFile: good.CertFile, KeyFile: other.KeyFile}, "server.tls.key_file: " + other.KeyFile + " is not the key of the certificate in server.tls.cert_file " + good.CertFile},
		{"a certificate for a key", tlsconf.Files{CertFile: good.CertFile, KeyFile: good.CertFile}, "server.tls.key_file: " + good.CertFile + ": found a certificate rather than a key in the PEM for the private key"},
		{"missing client CA", tlsconf.Files{CertFile: good.CertFile, KeyFile: good.KeyFile, ClientCAFile: missing}, "server.tls.client_ca_file: open " + missing + ": no such file or directory"},
		{"client CA without certificates", tlsconf.Files{CertFile: good.CertFile, KeyFile: good.KeyFile, ClientCAFile: empty}, "server.tls.client_ca_file: " + empty + " holds no PEM certificate"},
		{"no files", tlsconf.Files{}, "server.tls: want cert_file and key_file"},
	} {
		_, err := tlsconf.New(c.files)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: New = %v; want %s", c.name, err, c.want)
		}
		if cerr := tlsconf.Check(c.files); cerr == nil || err == nil || cerr.Error() != err.Error() {
			t.Errorf("%s: Check = %v; want New's error %v", c.name, cerr, err)
		}
	}
	if _, err := tlsconf.New(tlsconf.Files{CertFile: missing, KeyFile: good.KeyFile}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("New of a missing file = %v; want it to wrap os.ErrNotExist", err)
	}
	big := filepath.Join(dir, "big.pem")
	certtest.WriteFile(t, big, append(good.CertPEM, make([]byte, tlsconf.MaxFileSize)...))
	if err := tlsconf.Check(tlsconf.Files{CertFile: big, KeyFile: good.KeyFile}); err == nil || err.Error() != "server.tls.cert_file: "+big+" is larger than 1048576 bytes" {
		t.Errorf("Check of a certificate file too large = %v", err)
	}
	if err := tlsconf.Check(tlsconf.Files{CertFile: good.CertFile, KeyFile: good.KeyFile, ClientCAFile: caFile}); err != nil {
		t.Errorf("Check of good files = %v", err)
	}
}
