package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/envoyfleet"
	"github.com/admit-dev/admit/internal/redistest"
)

// rlqsListeningRE finds the address of the rate limit quota service in admit serve's log.
var rlqsListeningRE = regexp.MustCompile(`msg="Envoy rate limit quota service" listen=(\S+)`)

// TestE2ERLQSTwoInstances runs two real admit serve processes on one Redis with --rlqs-listen,
// and six simulated Envoys of skewed demand, three on each, in real time: every Envoy is assigned
// a token bucket, the assignments sum to at most the policy's rate, the hot Envoy holds the
// largest; then one process is killed, its Envoys open streams to the other on their next
// report, and the same holds. Real time is short (a few reports) and nothing depends on how long
// a sleep takes: the reports carry the time that passed, and the assertions only compare shares.
func TestE2ERLQSTwoInstances(t *testing.T) {
	srv := redistest.Start(t)
	cfg := filepath.Join(t.TempDir(), "admit.yaml")
	write := func(limit int) {
		t.Helper()
		if err := os.WriteFile(cfg, fmt.Appendf(nil, `policies:
  - {name: api-global, algorithm: token_bucket, limit: %d, window: 1m}
rlqs:
  - domain: mesh
    assignment_ttl: 30s
    buckets:
      - {match: {name: api}, policy: api-global}
`, limit), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(6000)
	var addrs []string
	var procs []*proc
	for range 2 {
		p := startAdmit(t, "--config", cfg, "--redis", srv.URL(), "--rlqs-listen", "127.0.0.1:0")
		p.logs.waitLine(t, "Envoy rate limit quota service")
		m := rlqsListeningRE.FindStringSubmatch(p.logs.String())
		if m == nil {
			t.Fatalf("no RLQS address in the log:\n%s", p.logs)
		}
		addrs, procs = append(addrs, m[1]), append(procs, p)
	}
	api := map[string]string{"name": "api"}
	var envoys []*envoyfleet.Envoy
	for i := range 6 {
		envoys = append(envoys, envoyfleet.New(envoyfleet.Options{Domain: "mesh", Addrs: []string{addrs[i%2], addrs[(i+1)%2]},
			Now: time.Now, NoAssignment: envoyfleet.AllowAll, Expired: envoyfleet.ReuseLast}))
	}
	round := func() {
		t.Helper()
		for i, e := range envoys {
			n := 5
			if i == 0 {
				n = 70
			}
			for range n {
				e.Request(api)
			}
		}
		time.Sleep(time.Second) // Envoy's reports carry whole seconds
		for _, e := range envoys {
			before := e.Received()
			if err := e.Report(); err != nil {
				continue // the stream failed: the next report opens another
			}
			e.WaitReceived(before+1, 30*time.Second)
		}
	}
	check := func(when string, limit float64) {
		t.Helper()
		total, hot := 0.0, 0.0
		for i, e := range envoys {
			_, rate, _ := e.Bucket(api)
			if k := e.Kind(api); k != "tokens" {
				t.Errorf("%s: envoy %d has %s, want a token bucket", when, i, k)
			}
			total += rate * 60
			if i == 0 {
				hot = rate * 60
			} else if rate*60 >= hot {
				t.Errorf("%s: envoy %d holds %v a minute, the hot one %v", when, i, rate*60, hot)
			}
		}
		t.Logf("%s: %v a minute assigned in all, %v to the hot Envoy", when, total, hot)
		if total > limit {
			t.Errorf("%s: %v a minute assigned in all, over the limit of %v", when, total, limit)
		}
	}
	for range 3 {
		round()
	}
	check("two instances", 6000)
	procs[0].cmd.Process.Kill()
	procs[0].wait(t)
	for range 3 {
		round()
	}
	check("after one was killed", 6000)
	for i, e := range envoys {
		if n, _ := e.Streams(); i%2 == 0 && n < 2 {
			t.Errorf("envoy %d of the killed instance opened %d streams, want a second one", i, n)
		}
	}

	// A reload pushes the assignments of the new limit to every Envoy, without a report.
	counts := make([]int, len(envoys))
	for i, e := range envoys {
		counts[i] = e.Received()
	}
	write(1200)
	procs[1].logs.waitLine(t, "configuration reloaded")
	for i, e := range envoys {
		if !e.WaitReceived(counts[i]+1, 30*time.Second) {
			t.Errorf("envoy %d: no assignment pushed after the reload", i)
		}
	}
	check("after a reload to 1200 a minute", 1200)
}
