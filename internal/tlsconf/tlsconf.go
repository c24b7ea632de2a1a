// Package tlsconf serves TLS from files that may change: a server certificate and its key and,
// optionally, a bundle of client CAs (mutual TLS), as admit serve's server.tls names them. A
// [Holder] hands out one tls.Config for every listener, whose GetConfigForClient reads the files'
// last good load, and [Holder.Reload] loads them again when their modification time or size
// changed: a new load that fails keeps the last good one serving. Errors name the fields as the
// configuration file does (server.tls.cert_file, ...). How it is used: docs/security.md#tls.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/admit-dev/admit/internal/boundedread"

	"github.com/admit-dev/admit/internal/filestamp"
)

// Files names the files of a TLS server: CertFile and KeyFile are required; ClientCAFile, if not
// empty, makes every client present a certificate that one of its CAs signed.
type Files struct {
	CertFile, KeyFile, ClientCAFile string
}

// MaxFileSize is the largest file Load reads.
const MaxFileSize = 1 << 20

// A Holder holds the last good load of its Files. It is safe for concurrent use; make one with [New].
type Holder struct {
	files Files
	cur   atomic.Pointer[loaded]
	mu    sync.Mutex // serialises Reload
	stamp filestamp.Stamp
}

// loaded is one good load of the files.
type loaded struct {
	cfg      *tls.Config
	notAfter time.Time // the leaf certificate's
}

// New loads files and returns their Holder, or the first error found in them.
func New(files Files) (*Holder, error) {
	stamp := filestamp.Of(files.CertFile, files.KeyFile, files.ClientCAFile)
	l, err := load(files)
	if err != nil {
		return nil, err
	}
	h := &Holder{files: files, stamp: stamp}
	h.cur.Store(l)
	return h, nil
}

// Check reports the first error in files, as New would, without keeping anything.
func Check(files Files) error {
	_, err := load(files)
	return err
}

// Config returns the tls.Config of every listener: TLS 1.2 at least, HTTP/2 and HTTP/1.1 offered,
// and, for each handshake, the certificate and client CAs of the Holder's last good load.
func (h *Holder) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return h.cur.Load().cfg, nil
		},
	}
}

// NotAfter returns when the certificate served expires.
func (h *Holder) NotAfter() time.Time { return h.cur.Load().notAfter }

// MutualTLS reports whether clients must present a certificate.
func (h *Holder) MutualTLS() bool { return h.files.ClientCAFile != "" }

// Reload loads the files again when their modification time or size changed since the last
// look, or always when force is set. It reports whether it replaced the load served; on an error
// the last good load keeps serving, and the same error of files that do not change again is
// reported once.
func (h *Holder) Reload(force bool) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	stamp := filestamp.Of(h.files.CertFile, h.files.KeyFile, h.files.ClientCAFile)
	if stamp == h.stamp && !force {
		return false, nil
	}
	h.stamp = stamp
	l, err := load(h.files)
	if err != nil {
		return false, err
	}
	h.cur.Store(l)
	return true, nil
}

// load reads files into the tls.Config of a handshake.
func load(files Files) (*loaded, error) {
	if files.CertFile == "" || files.KeyFile == "" {
		return nil, errors.New("server.tls: want cert_file and key_file")
	}
	certPEM, err := readFile("server.tls.cert_file", files.CertFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readFile("server.tls.key_file", files.KeyFile)
	if err != nil {
		return nil, err
	}
	leaf, err := firstCertificate(certPEM)
	if err != nil {
		return nil, fmt.Errorf("server.tls.cert_file: %s: %v", files.CertFile, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	switch {
	case err != nil && strings.Contains(err.Error(), "does not match"):
		return nil, fmt.Errorf("server.tls.key_file: %s is not the key of the certificate in server.tls.cert_file %s", files.KeyFile, files.CertFile)
	case err != nil:
		return nil, fmt.Errorf("server.tls.key_file: %s: %v", files.KeyFile, strings.TrimPrefix(err.Error(), "tls: "))
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
		Certificates: []tls.Certificate{pair},
	}
	if files.ClientCAFile != "" {
		caPEM, err := readFile("server.tls.client_ca_file", files.ClientCAFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("server.tls.client_ca_file: %s holds no PEM certificate", files.ClientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return &loaded{cfg: cfg, notAfter: leaf.NotAfter}, nil
}

// readFile reads the file at path, which field names, at most MaxFileSize bytes.
func readFile(field, path string) ([]byte, error) {
	return boundedread.File(field, path, MaxFileSize)
}

// firstCertificate parses the first CERTIFICATE block of data: the leaf of a chain.
func firstCertificate(data []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("holds no PEM certificate")
		}
		if block.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("the certificate does not parse: %v", err)
			}
			return c, nil
		}
	}
}
