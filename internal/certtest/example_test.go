package certtest_test

import (
	"crypto/x509"
	"fmt"

	"github.com/admit-dev/admit/internal/certtest"
)

func Example() {
	t := exampleT{} // in a test, its *testing.T
	ca := certtest.NewCA(t, "test CA")
	server := ca.Server(t)
	leaf, _ := x509.ParseCertificate(server.TLS.Certificate[0])
	_, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "127.0.0.1"})
	fmt.Println(err)
	// Output: <nil>
}

// exampleT fails an example by panicking, as a test's t.Fatal would fail the test.
type exampleT struct{}

func (exampleT) Helper()           {}
func (exampleT) Fatal(args ...any) { panic(fmt.Sprint(args...)) }
