package redistest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sysProcAttr makes redis-server die with SIGKILL when the test binary does. (Strictly, when the OS
// thread that started it exits; the Go runtime ends threads only under runtime.LockOSThread.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// waitStopped waits until process pid is in the stopped state, as /proc reports it.
func waitStopped(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	name := "/proc/" + strconv.Itoa(pid) + "/stat"
	for {
		b, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		// The state follows the command name, which is in parentheses and may contain anything.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) {
			return fmt.Errorf("cannot parse %s: %q", name, b)
		}
		switch b[i+2] {
		case 'T', 't':
			return nil
		case 'Z', 'X':
			return fmt.Errorf("process %d exited", pid)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d not stopped within %v (state %c)", pid, timeout, b[i+2])
		}
		time.Sleep(time.Millisecond)
	}
}

// reserveClosedPort binds a loopback TCP socket to a free port without listening on it, so a dial there
// is refused and, as the socket lacks SO_REUSEADDR, no one else can bind the port until release.
func reserveClosedPort() (port int, release func(), err error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, nil, err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		return 0, nil, err
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return 0, nil, err
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		syscall.Close(fd)
		return 0, nil, fmt.Errorf("unexpected socket address %T", sa)
	}
	return in4.Port, func() { syscall.Close(fd) }, nil
}
