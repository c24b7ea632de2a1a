package certtest_test

import (
	"crypto/x509"
	"fmt"
	"testing"

	"github.com/admit-dev/admit/internal/certtest"
)

func Example() {
	t := &testing.T{} // in a test, its own t
	ca := certtest.NewCA(t, "test CA")
	server := ca.Server(t)
	leaf, _ := x509.ParseCertificate(server.TLS.Certificate[0])
	_, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "127.0.0.1"})
	fmt.Println(err)
	// Output: <nil>
}
