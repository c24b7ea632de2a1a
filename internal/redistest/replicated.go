package redistest

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartReplicated starts a primary and n replicas of it (Start, each with args), and returns once
// the primary lists them all online, waiting up to a minute.
func StartReplicated(t testing.TB, n int, args ...string) (*Server, []*Server) {
	t.Helper()
	args = append([]string{"--repl-diskless-sync-delay", "0"}, args...)
	primary := Start(t, args...)
	replicas := make([]*Server, n)
	for i := range replicas {
		replicas[i] = Start(t, append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(primary.Port())}, args...)...)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		info, _ := primary.Do(t, "INFO", "replication").ToString()
		if strings.Contains(info, "connected_slaves:"+strconv.Itoa(n)+"\r\n") && strings.Count(info, "state=online") == n {
			return primary, replicas
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: the primary does not list %d online replicas within a minute:\n%s", n, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// CommandCalls returns how many times s ran cmd (lower case, "wait"), from INFO commandstats: 0
// when it never did.
func (s *Server) CommandCalls(t testing.TB, cmd string) int64 {
	t.Helper()
	info, err := s.Do(t, "INFO", "commandstats").ToString()
	if err != nil {
		t.Fatalf("redistest: INFO commandstats on %s: %v", s.Addr(), err)
	}
	for line := range strings.Lines(info) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls=")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("redistest: cmdstat_%s on %s: %q", cmd, s.Addr(), line)
		}
		return n
	}
	return 0
}
