package redistest

import "testing"

// A server's port comes from outside the kernel's ephemeral range, so that no outgoing connection can
// take it while the server is killed and Restart finds it free.
func TestPickPortAvoidsEphemeralPorts(t *testing.T) {
	lo, hi := ephemeralPorts()
	if lo <= 1024 && hi >= 65535 {
		t.Skip("the ephemeral range covers every port")
	}
	for range 200 {
		port, err := pickPort()
		if err != nil {
			t.Fatal(err)
		}
		if port >= lo && port <= hi || port > 55535 {
			t.Fatalf("pickPort() = %d: inside the ephemeral range %d–%d, or above 55535 (a cluster bus port would be beyond 65535)", port, lo, hi)
		}
	}
}
