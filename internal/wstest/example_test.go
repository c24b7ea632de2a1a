package wstest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/admit-dev/admit/internal/wstest"
)

func Example() {
	// An echo server that accepts any upgrade.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		io.Copy(conn, brw)
	}))
	defer srv.Close()

	t := &testing.T{} // in a test, its own t
	conn, br, resp := wstest.Dial(t, srv.URL, "/socket")
	io.WriteString(conn, "ping")
	buf := make([]byte, 4)
	io.ReadFull(br, buf)
	fmt.Println(resp.StatusCode, string(buf))
	conn.Close()
	// Output: 101 ping
}
