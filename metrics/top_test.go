package metrics_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/logrelay"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/metrics"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// topService returns a Service over memstore of the configuration src.
func topService(t *testing.T, src string) *service.Service {
	t.Helper()
	mem := memstore.New(memstore.Options{})
	t.Cleanup(func() { mem.Close() })
	keys, err := admit.NewKeyBuilder([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := policy.Parse("admit.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	s, err := service.New(mem, keys, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// topPolicies has two policies of one request an hour and a sketch of 3 entries.
const topPolicies = `
server:
  top: {size: 3}
policies:
  - {name: tight, algorithm: fixed_window, limit: 1, window: 1h}
  - {name: idle, algorithm: fixed_window, limit: 1, window: 1h}
`

// TestRegisterTopSubjects rejects 50 distinct subjects under one policy of a Service whose sketch
// holds 3 entries: admit_top_subjects_entries says 3 for it and 0 for the idle one,
// one series per policy, none naming a subject; after a reload to server.top.size 0 it has none.
func TestRegisterTopSubjects(t *testing.T) {
	s := topService(t, topPolicies)
	reg := prometheus.NewPedanticRegistry()
	if err := metrics.RegisterTopSubjects(reg, s); err != nil {
		t.Fatal(err)
	}
	if err := metrics.RegisterTopSubjects(reg, s); err == nil {
		t.Error("a second RegisterTopSubjects into one Registerer: no error")
	}
	const header = "# HELP admit_top_subjects_entries Entries the policy's top-subjects sketch holds now (at most server.top.size).\n# TYPE admit_top_subjects_entries gauge\n"
	gathered := func(want string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "admit_top_subjects_entries"); err != nil {
			t.Error(err)
		}
	}
	gathered(header + "admit_top_subjects_entries{policy=\"idle\"} 0\nadmit_top_subjects_entries{policy=\"tight\"} 0\n")
	ctx := context.Background()
	for i := range 50 {
		for range 2 { // the second is rejected
			if _, err := s.Check(ctx, service.Check{Policies: []string{"tight"}, Subject: admit.Subject{ID: fmt.Sprint("subject-", i)}, Cost: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	gathered(header + "admit_top_subjects_entries{policy=\"idle\"} 0\nadmit_top_subjects_entries{policy=\"tight\"} 3\n")
	if n := testutil.CollectAndCount(reg, "admit_top_subjects_entries"); n != 2 {
		t.Errorf("%d series after 50 subjects; want 2, one per policy", n)
	}

	off, err := policy.Parse("admit.yaml", []byte(strings.Replace(topPolicies, "size: 3", "size: 0", 1)))
	if err != nil {
		t.Fatal(err)
	}
	s.Swap(off)
	if n := testutil.CollectAndCount(reg, "admit_top_subjects_entries"); n != 0 {
		t.Errorf("%d series under server.top.size 0; want none", n)
	}
}

// TestRegisterLogDropped counts the lines a real log relay drops: 7 lines longer than its queue
// holds, each dropped, and one that fits, relayed.
func TestRegisterLogDropped(t *testing.T) {
	relay := logrelay.New(io.Discard, logrelay.Options{MaxBytes: 16})
	defer relay.Close(context.Background())
	reg := prometheus.NewPedanticRegistry()
	if err := metrics.RegisterLogDropped(reg, relay); err != nil {
		t.Fatal(err)
	}
	for range 7 {
		relay.Write([]byte("a line longer than sixteen bytes\n"))
	}
	relay.Write([]byte("short\n"))
	want := "# HELP admit_log_lines_dropped_total Log lines dropped because stderr did not keep up (their number is logged once it drains).\n# TYPE admit_log_lines_dropped_total counter\nadmit_log_lines_dropped_total 7\n"
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
