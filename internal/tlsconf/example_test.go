package tlsconf_test

import (
	"fmt"
	"net/http"
	"os"

	"github.com/admit-dev/admit/internal/certtest"
	"github.com/admit-dev/admit/internal/tlsconf"
)

func Example() {
	dir, _ := os.MkdirTemp("", "tlsconf")
	defer os.RemoveAll(dir)
	pair := certtest.NewCA(exampleT{}, "CA").Server(exampleT{}).Write(exampleT{}, dir, "server")

	h, err := tlsconf.New(tlsconf.Files{CertFile: pair.CertFile, KeyFile: pair.KeyFile})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := &http.Server{TLSConfig: h.Config()} // srv.ServeTLS(ln, "", ""), and the gRPC server's credentials too
	_ = srv
	changed, err := h.Reload(false) // at every look, and on SIGHUP with force
	fmt.Println(changed, err)
	// Output: false <nil>
}

// exampleT fails an example by panicking, as a test's t.Fatal would fail the test.
type exampleT struct{}

func (exampleT) Helper()           {}
func (exampleT) Fatal(args ...any) { panic(fmt.Sprint(args...)) }
