package freeport_test

import (
	"fmt"
	"net"
	"strconv"
	"testing"

	"github.com/admit-dev/admit/internal/freeport"
)

func TestPortsAreDistinctAndBindable(t *testing.T) {
	ports := freeport.Ports(t, 5)
	if len(ports) != 5 {
		t.Fatalf("got %d ports, want 5", len(ports))
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || p > 65535 || seen[p] {
			t.Fatalf("ports %v: want 5 distinct ports in 1..65535", ports)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Logf("port %d taken meanwhile by another process: %v", p, err) // possible, not an error of Ports
			continue
		}
		l.Close()
	}
}

func ExamplePort() {
	t := &testing.T{}
	p := freeport.Port(t)
	fmt.Println(p > 0)
	// Output: true
}
