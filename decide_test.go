package admit_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
)

// TestRequests checks the one place where Requests are made: each key in its own version (or the
// one version of all), the cost and ID of all, and a stop at the first Request that fails its
// check, with that error unchanged and its Key set; a key that cannot be made leaves it empty.
func TestRequests(t *testing.T) {
	keys, err := admit.NewKeyBuilder([]byte("a secret of at least 16 bytes"))
	if err != nil {
		t.Fatal(err)
	}
	a := admit.Limit{Name: "a", Algorithm: admit.FixedWindow, Rate: 5, Period: time.Second}
	b := admit.Limit{Name: "b", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Second}
	s := admit.Subject{ID: "alice"}
	rs := []admit.Request{{Limit: a}, {Limit: b}}
	if err := admit.Requests(rs, keys, []string{"1", "2"}, s, 2, "req-1"); err != nil {
		t.Fatal(err)
	}
	for i, v := range []string{"1", "2"} {
		want, err := keys.Key(rs[i].Limit, v, s)
		if err != nil {
			t.Fatal(err)
		}
		if r := rs[i]; r.Key != want || r.Cost != 2 || r.ID != "req-1" {
			t.Errorf("request %d: %+v; want key %s (version %s), cost 2, ID req-1", i, r, want, v)
		}
		wantOverride, err := keys.OverrideKey(rs[i].Limit.Name, s)
		if err != nil {
			t.Fatal(err)
		}
		if r := rs[i]; r.OverrideKey != wantOverride {
			t.Errorf("request %d: override key %q; want KeyBuilder.OverrideKey's %q", i, r.OverrideKey, wantOverride)
		}
	}
	// A subject with a slot subject of its own: both digests in both keys.
	tenant := admit.Subject{ID: "alice", Slot: "acme"}
	rs = []admit.Request{{Limit: a}}
	if err := admit.Requests(rs, keys, []string{"1"}, tenant, 1, ""); err != nil {
		t.Fatal(err)
	}
	wantKey, _ := keys.Key(a, "1", tenant)
	wantOverride, _ := keys.OverrideKey(a.Name, tenant)
	if rs[0].Key != wantKey || rs[0].OverrideKey != wantOverride {
		t.Errorf("with a slot subject: keys %q, %q; want %q, %q", rs[0].Key, rs[0].OverrideKey, wantKey, wantOverride)
	}
	if n := testing.AllocsPerRun(100, func() { admit.Requests(rs, keys, []string{"1"}, tenant, 1, "") }); n != 1 {
		t.Errorf("Requests of one policy: %v allocations; want 1, both keys in one string", n)
	}
	rs = []admit.Request{{Limit: a}, {Limit: b}}
	err = admit.Requests(rs, keys, []string{"1"}, s, 3, "")
	want := admit.Request{Key: rs[1].Key, Limit: b, Cost: 3}
	if verr := want.Validate(); !errors.Is(err, admit.ErrInvalidRequest) || err.Error() != verr.Error() || rs[1].Key == "" {
		t.Errorf("cost 3 under a limit of 2: %v, key %q; want Validate's error %v and the key set", err, rs[1].Key, verr)
	}
	rs = []admit.Request{{Limit: a}}
	if err := admit.Requests(rs, keys, []string{"1"}, admit.Subject{}, 1, ""); !errors.Is(err, admit.ErrInvalidRequest) || rs[0].Key != "" {
		t.Errorf("empty subject: %v, key %q; want an invalid request and no key", err, rs[0].Key)
	}
	if err := admit.Requests(make([]admit.Request, 3), keys, []string{"1", "2"}, s, 1, ""); !errors.Is(err, admit.ErrInvalidRequest) || !strings.Contains(err.Error(), "2 key versions for 3 requests") {
		t.Errorf("2 versions for 3 requests: %v; want an invalid request saying so", err)
	}
}
