package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// secure reads the token and TLS files of cfg's flags into cfg.Token and cfg.TLS, for a target
// over TLS when overTLS. A token goes to the http and grpc targets only; the TLS files to an
// https:// or grpcs:// target only.
func (cfg *benchConfig) secure(overTLS bool) error {
	if cfg.tokenFile != "" {
		if cfg.Kind != "http" && cfg.Kind != "grpc" {
			return errors.New("--client-token-file is for an http or grpc target: a store target asks no token")
		}
		token, _, err := readSecret("--client-token-file", cfg.tokenFile)
		if err != nil {
			return err
		}
		if len(token) == 0 {
			return fmt.Errorf("--client-token-file %s: empty", cfg.tokenFile)
		}
		cfg.Token = string(token)
	}
	files := cfg.caFile != "" || cfg.certFile != "" || cfg.keyFile != ""
	switch {
	case !overTLS && files:
		return errors.New("--ca-file, --cert-file and --key-file are for an https:// or grpcs:// target")
	case !overTLS:
		return nil
	case (cfg.certFile == "") != (cfg.keyFile == ""):
		return errors.New("--cert-file and --key-file go together: the client certificate and its key")
	}
	cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.caFile != "" {
		pem, err := os.ReadFile(cfg.caFile)
		if err != nil {
			return fmt.Errorf("--ca-file: %w", err)
		}
		cfg.TLS.RootCAs = x509.NewCertPool()
		if !cfg.TLS.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--ca-file: %s holds no PEM certificate", cfg.caFile)
		}
	}
	if cfg.certFile != "" {
		pair, err := tls.LoadX509KeyPair(cfg.certFile, cfg.keyFile)
		if err != nil {
			return fmt.Errorf("--cert-file, --key-file: %w", err)
		}
		cfg.TLS.Certificates = []tls.Certificate{pair}
	}
	return nil
}
