// Package freeport finds loopback TCP ports for tests that start programs which must be told
// their port (envoyproxy/ratelimit, nginx, a second admit).
package freeport

import (
	"net"
	"testing"
)

// Ports returns n distinct loopback ports that were free a moment ago. Another process may take
// one before the program it is meant for binds it: a caller that starts a program on them retries
// a start that finds its port taken.
func Ports(tb testing.TB, n int) []int {
	tb.Helper()
	ports := make([]int, 0, n)
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("freeport: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// Port returns one loopback port that was free a moment ago (Ports of 1).
func Port(tb testing.TB) int { return Ports(tb, 1)[0] }
