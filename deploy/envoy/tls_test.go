package envoy_test

import (
	"slices"
	"strings"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// tlsExampleStart is the first line of envoy.yaml's commented transport_socket for TLS to admit.
const tlsExampleStart = "      # transport_socket:\n"

// uncommentTLS returns envoy.yaml with its commented transport_socket uncommented: the line
// tlsExampleStart and the deeper commented lines that follow it.
func uncommentTLS(t *testing.T, yaml string) string {
	t.Helper()
	if n := strings.Count(yaml, tlsExampleStart); n != 1 {
		t.Fatalf("envoy.yaml holds %q %d times, want once", tlsExampleStart, n)
	}
	var b strings.Builder
	in, lines := false, 0
	for line := range strings.Lines(yaml) {
		switch {
		case line == tlsExampleStart:
			in = true
		case in && !strings.HasPrefix(line, "      #   "):
			in = false
		}
		if in {
			line = "      " + strings.TrimPrefix(line, "      # ")
			lines++
		}
		b.WriteString(line)
	}
	if lines < 2 {
		t.Fatalf("the transport_socket example has %d lines", lines)
	}
	return b.String()
}

// TestBootstrapTLSExample uncomments envoy.yaml's transport_socket example and decodes the result
// as strictly as the file itself: admit's cluster then speaks TLS, offers h2 by ALPN (gRPC over
// TLS needs it), checks admit's certificate against a CA and its name, and has a client
// certificate for server.tls.client_ca_file.
func TestBootstrapTLSExample(t *testing.T) {
	b, err := decodeBootstrap([]byte(uncommentTLS(t, string(readFile(t, "envoy.yaml")))))
	if err != nil {
		t.Fatalf("envoy.yaml with its TLS example uncommented: %v", err)
	}
	e := bootstrapEdge(t, b)
	name := e.filter.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName()
	for _, c := range b.GetStaticResources().GetClusters() {
		ts := c.GetTransportSocket()
		if c.GetName() != name {
			if ts != nil {
				t.Errorf("cluster %s has a transport socket; the example is for admit's", c.GetName())
			}
			continue
		}
		if ts == nil {
			t.Fatalf("admit's cluster %s has no transport socket", name)
		}
		tc := unpack(t, ts.GetTypedConfig(), &tlsv3.UpstreamTlsContext{})
		ctx := tc.GetCommonTlsContext()
		if !slices.Equal(ctx.GetAlpnProtocols(), []string{"h2"}) {
			t.Errorf("alpn_protocols %q, want [h2]", ctx.GetAlpnProtocols())
		}
		vc := ctx.GetValidationContext()
		if vc.GetTrustedCa().GetFilename() == "" || len(vc.GetMatchTypedSubjectAltNames()) == 0 {
			t.Errorf("validation_context %v: want a trusted CA and the name admit's certificate must have", vc)
		}
		if tc.GetSni() == "" {
			t.Error("no sni")
		}
		if len(ctx.GetTlsCertificates()) != 1 || ctx.GetTlsCertificates()[0].GetPrivateKey().GetFilename() == "" {
			t.Errorf("tls_certificates %v: want one client certificate and key, for mTLS", ctx.GetTlsCertificates())
		}
		return
	}
	t.Fatalf("no cluster %s", name)
}

// TestBrokenTLSExampleFails shows the uncommented example is decoded strictly: a misspelled field
// of the TLS context fails.
func TestBrokenTLSExampleFails(t *testing.T) {
	good := uncommentTLS(t, string(readFile(t, "envoy.yaml")))
	for _, c := range []struct{ name, old, new string }{
		{"unknown field in the TLS context", "alpn_protocols:", "alpn_protocol:"},
		{"unregistered transport socket type", "tls.v3.UpstreamTlsContext", "tls.v3.UpstreamTLSContext"},
		{"invalid value (a bad SAN type)", "san_type: DNS", "san_type: NAME"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if strings.Count(good, c.old) != 1 {
				t.Fatalf("the example holds %q %d times, want once", c.old, strings.Count(good, c.old))
			}
			if _, err := decodeBootstrap([]byte(strings.Replace(good, c.old, c.new, 1))); err == nil {
				t.Fatal("the broken copy decoded")
			} else {
				t.Log(err)
			}
		})
	}
}
