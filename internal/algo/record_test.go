package algo

import (
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/slot"
)

func TestRecordKeyIsInTheKeysSlot(t *testing.T) {
	for _, key := range []string{"rl:demo:v1-fw10000:{0123abcd}", "rl:demo:v1-fw10000:{0123abcd}:ffee", "plain", "a{b"} {
		rk := RecordKey(key, "req-1")
		if slot.Of(rk) != slot.Of(key) {
			t.Errorf("RecordKey(%q) = %q in slot %d; the key is in slot %d", key, rk, slot.Of(rk), slot.Of(key))
		}
		if RecordKey(key, "req-2") == rk {
			t.Errorf("two IDs share the record %q", rk)
		}
	}
	// A key whose slot "{" + key + "}" would not keep has no record: the request is refused.
	r := admit.Request{Key: "{}x", Limit: admit.Limit{Algorithm: admit.FixedWindow, Rate: 1, Period: time.Second}, ID: "id"}
	if err := r.Validate(); err == nil {
		t.Error("a request with an ID and the key {}x, which no record key can share a slot with, is valid")
	}
	if a, b := RecordKey("{t}:user-a", "id"), RecordKey("{t}:user-b", "id"); a != b {
		t.Errorf("one ID in one slot has records %q and %q; want one (an ID is scoped to the slot)", a, b)
	}
}

func TestFingerprint(t *testing.T) {
	lim := admit.Limit{Name: "p", Algorithm: admit.FixedWindow, Rate: 3, Period: time.Minute}
	base := []admit.Request{{Key: "{t}a", Limit: lim, Cost: 1}, {Key: "{t}b", Limit: lim, Cost: 1}}
	fp := Fingerprint(base)
	if len(fp) != bound.DigestLen || Fingerprint(base) != fp {
		t.Fatalf("Fingerprint = %q; want %d stable hex characters", fp, bound.DigestLen)
	}
	change := map[string]func(rs []admit.Request){
		"key":       func(rs []admit.Request) { rs[1].Key = "{t}c" },
		"name":      func(rs []admit.Request) { rs[0].Limit.Name = "q" },
		"rate":      func(rs []admit.Request) { rs[0].Limit.Rate = 4 },
		"period":    func(rs []admit.Request) { rs[1].Limit.Period = time.Hour },
		"cost":      func(rs []admit.Request) { rs[1].Cost = 2 },
		"alignment": func(rs []admit.Request) { rs[1].Limit.Aligned = true },
		"order":     func(rs []admit.Request) { rs[0], rs[1] = rs[1], rs[0] },
		"split":     func(rs []admit.Request) { rs[0].Key, rs[1].Key = "{t}", "a{t}b" }, // length-prefixed fields
	}
	for name, f := range change {
		rs := append([]admit.Request(nil), base...)
		f(rs)
		if Fingerprint(rs) == fp {
			t.Errorf("a request with another %s has the same fingerprint", name)
		}
	}
	if Fingerprint(base[:1]) == fp {
		t.Error("a request of fewer policies has the same fingerprint")
	}
}

func TestRecorded(t *testing.T) {
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Second}
	long := lim
	long.Period = time.Hour
	peeks := []admit.Request{{Key: "a", Limit: lim}, {Key: "b", Limit: long}}
	if Recorded(peeks) {
		t.Error("a request of peeks only leaves a record")
	}
	if RecordTTL(peeks) != time.Hour {
		t.Errorf("RecordTTL = %v; want the longest Period, 1h", RecordTTL(peeks))
	}
	peeks[0].Cost = 1
	if !Recorded(peeks) {
		t.Error("a request that consumes leaves no record")
	}
}
