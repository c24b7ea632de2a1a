//go:build !linux

package redistest

import (
	"net"
	"syscall"
	"time"
)

// sysProcAttr returns nil: only Linux can kill redis-server when the test binary dies, so elsewhere a
// crashed test binary may leave one running.
func sysProcAttr() *syscall.SysProcAttr {
	return nil
}

// waitStopped gives the signal a moment to land: only Linux lets us look.
func waitStopped(pid int, timeout time.Duration) error {
	time.Sleep(50 * time.Millisecond)
	return nil
}

// reserveClosedPort returns a port that was free a moment ago; it cannot hold it.
func reserveClosedPort() (port int, release func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, nil, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, func() {}, nil
}
