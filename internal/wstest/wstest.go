// Package wstest opens WebSocket connections through a server under test, at the level the tests of
// admit's proxy need: the HTTP/1.1 upgrade handshake on a raw TCP connection, then raw bytes both
// ways (no framing), so a test sees exactly what the proxy passes on.
package wstest

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// Dial connects to the host of base (an http:// URL), sends a WebSocket upgrade request for path,
// and returns the connection, a reader of what follows the handshake's response, and that response.
// The connection is closed at t's cleanup and given a 30 s deadline, so a test that hangs fails.
func Dial(t testing.TB, base, path string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(30 * time.Second)) // a hang guard
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", path, u.Host); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("WebSocket handshake for %s: %v", path, err)
	}
	return conn, br, resp
}
