package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/redistest"
)

// TestDemand records the demands of three clients of one bucket, as two Stores of one Redis see
// them: each call returns every live record, a record expires at its TTL, and a client that
// leaves is gone.
func TestDemand(t *testing.T) {
	srv := redistest.Start(t)
	a, b := openPatient(t, srv.URL()), openPatient(t, srv.URL())
	ctx := context.Background()
	now := time.UnixMilli(1_800_000_000_000)
	bucket := "demandtest" + t.Name()
	if _, _, err := a.ReportDemand(ctx, bucket, "x", 70, now, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.ReportDemand(ctx, bucket, "y", 20, now, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	got, _, err := a.ReportDemand(ctx, bucket, "z", 10, now.Add(time.Second), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got["x"] != 70 || got["y"] != 20 || got["z"] != 10 {
		t.Errorf("demands = %v, want x 70, y 20, z 10", got)
	}
	got, _, err = b.ReportDemand(ctx, bucket, "x", 60, now.Add(3*time.Second), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["x"] != 60 || got["z"] != 10 {
		t.Errorf("demands after y expired = %v, want x 60, z 10", got)
	}
	if err := a.LeaveDemand(ctx, bucket, "x"); err != nil {
		t.Fatal(err)
	}
	got, _, err = b.ReportDemand(ctx, bucket, "z", 1, now.Add(3*time.Second), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["z"] != 1 {
		t.Errorf("demands after x left = %v, want z 1", got)
	}
	for _, c := range []struct {
		bucket, client string
		demand         float64
		ttl            time.Duration
	}{{"", "x", 1, time.Second}, {bucket, "", 1, time.Second}, {bucket, demandBorn, 1, time.Second},
		{bucket, "x", -1, time.Second}, {bucket, "x", 1, -time.Second}} {
		if _, _, err := a.ReportDemand(ctx, c.bucket, c.client, c.demand, now, c.ttl); err == nil {
			t.Errorf("ReportDemand(%q, %q, %v, %v): no error", c.bucket, c.client, c.demand, c.ttl)
		}
	}
	got, _, err = b.ReportDemand(ctx, bucket, "z", 1, now.Add(3*time.Second), 5*time.Second)
	if err != nil || len(got) != 1 || got["z"] != 1 {
		t.Errorf("after the refused calls: %v, %v; want z 1 alone", got, err)
	}
}

// TestDemandBirth checks the birth mark of a bucket's records: the time of the first record
// written while none was live, kept by every later call of either Store while one lives, and
// reborn when the last expires, when the last leaves, and when Redis is emptied (FLUSHALL).
func TestDemandBirth(t *testing.T) {
	srv := redistest.Start(t)
	a, b := openPatient(t, srv.URL()), openPatient(t, srv.URL())
	ctx := context.Background()
	t0 := time.UnixMilli(1_800_000_000_000)
	bucket := "birthtest"
	report := func(s *Store, client string, at time.Time, ttl time.Duration) (map[string]float64, time.Time) {
		t.Helper()
		got, born, err := s.ReportDemand(ctx, bucket, client, 1, at, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return got, born
	}
	if _, born := report(a, "x", t0, 5*time.Second); !born.Equal(t0) {
		t.Errorf("the first record: born %v, want %v", born, t0)
	}
	if _, born := report(b, "y", t0.Add(time.Second), 5*time.Second); !born.Equal(t0) {
		t.Errorf("a second client a second later: born %v, want %v", born, t0)
	}
	// x alone renews past y's expiry and its own first one: the ledger lives on.
	if got, born := report(a, "x", t0.Add(4*time.Second), 5*time.Second); len(got) != 2 || !born.Equal(t0) {
		t.Errorf("x again at 4s: %v born %v, want x and y born %v", got, born, t0)
	}
	if got, born := report(a, "x", t0.Add(8*time.Second), 5*time.Second); len(got) != 1 || !born.Equal(t0) {
		t.Errorf("x again at 8s: %v born %v, want x alone born %v", got, born, t0)
	}
	// Every record expired: the next one is a new ledger.
	t1 := t0.Add(20 * time.Second)
	if _, born := report(b, "y", t1, 5*time.Second); !born.Equal(t1) {
		t.Errorf("after every record expired: born %v, want %v", born, t1)
	}
	// The last record leaves: the next one is a new ledger.
	if err := a.LeaveDemand(ctx, bucket, "y"); err != nil {
		t.Fatal(err)
	}
	t2 := t1.Add(time.Second)
	if _, born := report(a, "x", t2, 5*time.Second); !born.Equal(t2) {
		t.Errorf("after the last record left: born %v, want %v", born, t2)
	}
	// Redis emptied: a new ledger, whichever Store writes first.
	if err := srv.Do(t, "FLUSHALL").Error(); err != nil {
		t.Fatal(err)
	}
	t3 := t2.Add(time.Second)
	if got, born := report(b, "y", t3, 5*time.Second); len(got) != 1 || !born.Equal(t3) {
		t.Errorf("after FLUSHALL: %v born %v, want y alone born %v", got, born, t3)
	}
	if _, born := report(a, "x", t3.Add(time.Second), 5*time.Second); !born.Equal(t3) {
		t.Errorf("the second record after FLUSHALL: born %v, want %v", born, t3)
	}
	// A corrupt birth mark is replaced by now, the records kept.
	key := DemandPrefix + "{" + bucket + "}"
	if err := srv.Do(t, "HSET", key, demandBorn, "soon").Error(); err != nil {
		t.Fatal(err)
	}
	t4 := t3.Add(2 * time.Second)
	if got, born := report(a, "x", t4, 5*time.Second); len(got) != 2 || !born.Equal(t4) {
		t.Errorf("a corrupt birth mark: %v born %v, want x and y born %v", got, born, t4)
	}
}
