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
	if _, err := a.ReportDemand(ctx, bucket, "x", 70, now, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReportDemand(ctx, bucket, "y", 20, now, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	got, err := a.ReportDemand(ctx, bucket, "z", 10, now.Add(time.Second), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got["x"] != 70 || got["y"] != 20 || got["z"] != 10 {
		t.Errorf("demands = %v, want x 70, y 20, z 10", got)
	}
	got, err = b.ReportDemand(ctx, bucket, "x", 60, now.Add(3*time.Second), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["x"] != 60 || got["z"] != 10 {
		t.Errorf("demands after y expired = %v, want x 60, z 10", got)
	}
	if err := a.LeaveDemand(ctx, bucket, "x"); err != nil {
		t.Fatal(err)
	}
	got, err = b.ReportDemand(ctx, bucket, "z", 1, now.Add(3*time.Second), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["z"] != 1 {
		t.Errorf("demands after x left = %v, want z 1", got)
	}
	if _, err := a.ReportDemand(ctx, "", "x", 1, now, time.Second); err == nil {
		t.Error("an empty bucket: no error")
	}
}
