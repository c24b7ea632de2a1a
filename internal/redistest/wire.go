package redistest

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// errPortTaken reports that a redis-server could not have its port because another socket holds it.
var errPortTaken = errors.New("port already in use")

// command dials addr, sends one command and returns the first line of its reply, without its CRLF.
func command(addr string, conf *tls.Config, timeout time.Duration, args ...string) (string, error) {
	conn, err := dial(addr, conf, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// dial connects to addr, over TLS when conf is set.
func dial(addr string, conf *tls.Config, timeout time.Duration) (net.Conn, error) {
	if conf != nil {
		return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", addr, conf)
	}
	return net.DialTimeout("tcp", addr, timeout)
}

// ping dials addr, sends PING and INFO server, and returns the process_id of the server that answered
// PONG.
func ping(addr string, conf *tls.Config, timeout time.Duration) (int, error) {
	conn, err := dial(addr, conf, timeout)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return 0, err
	}
	if _, err := io.WriteString(conn, "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n"); err != nil {
		return 0, err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if line != "+PONG\r\n" {
		return 0, fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	line, err = r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
	if !strings.HasPrefix(line, "$") || err != nil || n < 0 {
		return 0, fmt.Errorf("INFO answered %q", strings.TrimSpace(line))
	}
	info := make([]byte, n)
	if _, err := io.ReadFull(r, info); err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(info), "\r\n") {
		if v, ok := strings.CutPrefix(l, "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server has no process_id")
}

// pickPort returns a loopback TCP port that was free a moment ago, outside the kernel's range of
// ephemeral ports when it can: an outgoing connection (a client of another server, on any test) takes
// its local port from that range, so a port from it may be taken while its server is killed, and
// [Server.Restart] would fail. It falls back to a port the kernel picks.
func pickPort() (int, error) {
	const (
		minPort = 10000 // above the ports of common services (6379, 8080, …)
		maxPort = 55535 // a cluster node's bus port is its port + 10000 unless set
	)
	lo, hi := ephemeralPorts()
	for range 64 {
		port := minPort + rand.IntN(maxPort-minPort+1)
		if port >= lo && port <= hi {
			continue
		}
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			l.Close()
			return port, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralPorts returns the kernel's range of local ports for outgoing connections: Linux's
// ip_local_port_range, or IANA's 49152–65535 where it cannot be read.
func ephemeralPorts() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			l, err1 := strconv.Atoi(f[0])
			h, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && l <= h {
				return l, h
			}
		}
	}
	return 49152, 65535
}
