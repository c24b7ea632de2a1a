package service_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/service"
)

// TestStateOfTiersAndOverridesWritesNothing checks that Service.State, after a mix of tiers and
// overrides, reports each policy's source — override (with its expiry and reason), tier or policy —
// with the numbers in force, and is still a read on Redis: no keyspace event, no key changed.
func TestStateOfTiersAndOverridesWritesNothing(t *testing.T) {
	srv := redistest.Start(t, "--notify-keyspace-events", "KEA")
	store, err := redisstore.New(redisstore.Config{URL: srv.URL(), CommandTimeout: 2 * time.Second, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	s := newService(t, store, everyAlgorithm)
	alice := admit.Subject{ID: "alice"}
	for _, spec := range []service.OverrideSpec{
		{Policy: "fixed", Subject: alice, Limit: 7, ExpiresIn: time.Hour, Reason: "pilot"},
		{Policy: "bucket", Subject: alice, Limit: 9, Burst: 12, Reason: "pro trial"},
		{Policy: "inflight", Subject: alice, Limit: 3},
	} {
		if _, err := s.SetOverride(t.Context(), spec); err != nil {
			t.Fatalf("SetOverride(%+v): %v", spec, err)
		}
	}
	if _, err := s.Check(t.Context(), service.Check{Policies: []string{"fixed", "sliding", "bucket"}, Subject: alice, Cost: 1}); err != nil {
		t.Fatal(err)
	}

	keys, err := srv.Do(t, "KEYS", "rl:*").AsStrSlice()
	if err != nil || len(keys) < 6 { // 3 states, 3 overrides, and the overrides' indexes
		t.Fatalf("KEYS rl:* = %q, %v; want the states, overrides and indexes", keys, err)
	}
	before := snapshotOf(t, srv, keys, false) // overrides without expiry, and their indexes, have none
	events := watchEvents(t, srv)

	type want struct {
		source string
		rate   int64
		reason string
		expiry bool
	}
	for _, tc := range []struct {
		q    service.StateQuery
		want map[string]want
	}{
		{service.StateQuery{Subject: alice}, map[string]want{
			"fixed":    {service.SourceOverride, 7, "pilot", true},
			"aligned":  {service.SourcePolicy, 5, "", false},
			"sliding":  {service.SourcePolicy, 5, "", false},
			"bucket":   {service.SourceOverride, 9, "pro trial", false},
			"inflight": {service.SourceOverride, 3, "", false},
		}},
		// The override replaces the tier's numbers too: override > tier > policy.
		{service.StateQuery{Subject: alice, Policy: "inflight", Tier: "short"}, map[string]want{"inflight": {service.SourceOverride, 3, "", false}}},
		{service.StateQuery{Subject: admit.Subject{ID: "bob"}, Policy: "inflight", Tier: "short"}, map[string]want{"inflight": {service.SourceTier, 5, "", false}}},
		{service.StateQuery{Subject: admit.Subject{ID: "bob"}, Policy: "fixed"}, map[string]want{"fixed": {service.SourcePolicy, 2, "", false}}},
	} {
		states, err := s.State(t.Context(), tc.q)
		if err != nil {
			t.Fatalf("State(%+v): %v", tc.q, err)
		}
		for _, st := range states {
			name := st.Decision.Limit.Name
			w, ok := tc.want[name]
			if !ok {
				continue
			}
			if st.Source != w.source || st.Decision.Limit.Rate != w.rate {
				t.Errorf("State(%+v) of %s: source %q, rate %d; want %q, %d", tc.q, name, st.Source, st.Decision.Limit.Rate, w.source, w.rate)
			}
			if (st.Source == service.SourceOverride) != (st.Override != nil) || (st.Source == service.SourceOverride) != st.Decision.Overridden {
				t.Errorf("State(%+v) of %s: source %q with override %+v, Overridden %v", tc.q, name, st.Source, st.Override, st.Decision.Overridden)
			}
			if st.Override != nil && (st.Override.Reason != w.reason || st.Override.Expires.IsZero() == w.expiry) {
				t.Errorf("State(%+v) of %s: override %+v; want reason %q, an expiry %v", tc.q, name, *st.Override, w.reason, w.expiry)
			}
		}
		if len(states) < len(tc.want) {
			t.Errorf("State(%+v) = %d states; want at least %d", tc.q, len(states), len(tc.want))
		}
	}
	if got := events.until(t); len(got) != 0 {
		t.Errorf("State caused keyspace events %q; want none", got)
	}
	after := snapshotOf(t, srv, keys, false)
	for i, k := range keys {
		if after[i].dump != before[i].dump || after[i].pexpiretime != before[i].pexpiretime {
			t.Errorf("%s changed: DUMP or PEXPIRETIME", k)
		}
	}
}

// TestStateOfACorruptOverride checks that bytes no SetOverride writes, at a subject's override key,
// make its decision answer corrupt state and its inspection mark that policy corrupt, while the
// other policies are read as ever; the bytes stay as they were. Corrupt state at a state key is
// marked alike.
func TestStateOfACorruptOverride(t *testing.T) {
	srv := redistest.Start(t)
	store, err := redisstore.New(redisstore.Config{URL: srv.URL(), CommandTimeout: 2 * time.Second, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	s := newService(t, store, everyAlgorithm)
	alice := admit.Subject{ID: "alice"}
	if _, err := s.SetOverride(t.Context(), service.OverrideSpec{Policy: "fixed", Subject: alice, Limit: 7}); err != nil {
		t.Fatal(err)
	}
	keys, err := srv.Do(t, "KEYS", "rl:fixed:o:{*").AsStrSlice()
	if err != nil || len(keys) != 1 {
		t.Fatalf("KEYS of alice's override = %q, %v; want one", keys, err)
	}
	srv.Do(t, "SET", keys[0], "not an override")

	_, err = s.Check(t.Context(), service.Check{Policies: []string{"fixed"}, Subject: alice, Cost: 1})
	if !errors.Is(err, admit.ErrCorruptState) {
		t.Errorf("Check under a corrupt override: %v; want corrupt state", err)
	}
	if _, err := s.Check(t.Context(), service.Check{Policies: []string{"sliding"}, Subject: alice, Cost: 1}); err != nil {
		t.Fatalf("Check of another policy: %v", err)
	}
	wantCorrupt := func(what string, states []service.State, err error, corrupt map[string]string) {
		t.Helper()
		if err != nil || len(states) == 0 {
			t.Fatalf("%s: State = %+v, %v; want states", what, states, err)
		}
		for _, st := range states {
			name := st.Decision.Limit.Name
			source, bad := corrupt[name]
			switch {
			case bad && (!errors.Is(st.Corrupt, admit.ErrCorruptState) || st.Source != source || st.Override != nil || st.Decision.Limit != limitOf(t, s, name)):
				t.Errorf("%s: %s %+v; want corrupt, source %s, no override, the policy's Limit", what, name, st, source)
			case !bad && (st.Corrupt != nil || st.Source != service.SourcePolicy || st.Decision.Limit.Rate != limitOf(t, s, name).Rate):
				t.Errorf("%s: %s %+v; want the policy's state", what, name, st)
			}
		}
	}
	states, err := s.State(t.Context(), service.StateQuery{Subject: alice})
	wantCorrupt("every policy", states, err, map[string]string{"fixed": service.SourceOverride})
	if len(states) != 6 || states[2].Decision.Remaining != 4 {
		t.Errorf("every policy: %d states, sliding %+v; want 6, sliding's 4 remaining", len(states), states[2].Decision)
	}
	if !strings.Contains(states[0].Corrupt.Error(), keys[0]) {
		t.Errorf("the corrupt override's error %q does not name its key %s", states[0].Corrupt, keys[0])
	}
	states, err = s.State(t.Context(), service.StateQuery{Subject: alice, Policy: "fixed"})
	wantCorrupt("fixed", states, err, map[string]string{"fixed": service.SourceOverride})
	if v, err := srv.Do(t, "GET", keys[0]).ToString(); err != nil || v != "not an override" {
		t.Errorf("the corrupt override now %q, %v; want it unchanged", v, err)
	}
	if n, err := srv.Do(t, "EXISTS", stateKey(t, limitOf(t, s, "fixed"), alice)).AsInt64(); err != nil || n != 0 {
		t.Errorf("alice's fixed-window state exists (%d, %v) after a decision on corrupt override; want nothing written", n, err)
	}

	// Corrupt state at a state key: its policy is marked, the others read (the peeks, together
	// by slot, meet it, and are read again one by one).
	sliding := stateKey(t, limitOf(t, s, "sliding"), alice)
	srv.Do(t, "SET", sliding, "not a window")
	states, err = s.State(t.Context(), service.StateQuery{Subject: alice})
	wantCorrupt("a corrupt state key", states, err, map[string]string{"fixed": service.SourceOverride, "sliding": service.SourcePolicy})
	if v, err := srv.Do(t, "GET", sliding).ToString(); err != nil || v != "not a window" {
		t.Errorf("the corrupt state now %q, %v; want it unchanged", v, err)
	}
}
