package policy_test

import (
	"testing"

	"github.com/admit-dev/admit/policy"
)

// TestServerExposure parses server.tls, server.client_tokens_file and server.trust_network into
// the Server, and their absence into plain listeners without tokens.
func TestServerExposure(t *testing.T) {
	const policies = "policies:\n  - name: p\n    algorithm: fixed_window\n    limit: 1\n    window: 1s\n"
	cfg, err := policy.Parse("exposure.yaml", []byte(`server:
  tls:
    cert_file: /etc/admit/tls/tls.crt
    key_file: /etc/admit/tls/tls.key
    client_ca_file: /etc/admit/tls/ca.crt
  client_tokens_file: /etc/admit/tokens
  trust_network: true
`+policies))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Server
	want := policy.ServerTLS{CertFile: "/etc/admit/tls/tls.crt", KeyFile: "/etc/admit/tls/tls.key", ClientCAFile: "/etc/admit/tls/ca.crt"}
	if s.TLS != want || !s.TLS.Enabled() || s.ClientTokensFile != "/etc/admit/tokens" || !s.TrustNetwork {
		t.Errorf("Server = TLS %+v (enabled %v), tokens %q, trust %v; want %+v, /etc/admit/tokens, true", s.TLS, s.TLS.Enabled(), s.ClientTokensFile, s.TrustNetwork, want)
	}
	cfg, err = policy.Parse("plain.yaml", []byte(policies))
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Server; s.TLS.Enabled() || s.TLS != (policy.ServerTLS{}) || s.ClientTokensFile != "" || s.TrustNetwork {
		t.Errorf("Server of a file without them = TLS %+v, tokens %q, trust %v; want none", s.TLS, s.ClientTokensFile, s.TrustNetwork)
	}
}
