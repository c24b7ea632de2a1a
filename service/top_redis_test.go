package service_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/service"
)

// topOnRedis has a policy of each algorithm that keeps state, one unit per subject an hour, and a
// sketch of 4 entries that reveals subjects.
const topOnRedis = `
server:
  top: {size: 4, reveal_subjects: true}
policies:
  - {name: fixed, algorithm: fixed_window, limit: 1, window: 1h}
  - {name: aligned, algorithm: fixed_window, aligned: true, limit: 1, window: 1h}
  - {name: sliding, algorithm: sliding_window, limit: 1, window: 1h}
  - {name: log, algorithm: sliding_log, limit: 1, window: 1h}
  - {name: bucket, algorithm: gcra, limit: 1, window: 1h}
`

// TestTopCountingWritesNothingToRedis checks G2 with the top-subjects sketch counting: six subjects
// spend their one unit under every policy, then each is rejected three times under each, and the
// sketches (4 entries: full, replacing entries) count every rejection, while Redis sees no
// keyspace event and every key's DUMP and expiry stay as they were.
func TestTopCountingWritesNothingToRedis(t *testing.T) {
	srv := redistest.Start(t, "--notify-keyspace-events", "KEA")
	store, err := redisstore.New(redisstore.Config{URL: srv.URL(), CommandTimeout: 2 * time.Second, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	s := newService(t, store, topOnRedis)
	names := []string{"fixed", "aligned", "sliding", "log", "bucket"}
	subjects := make([]admit.Subject, 6)
	for i := range subjects {
		subjects[i] = admit.Subject{ID: fmt.Sprintf("subject-%d@example.com", i)}
		for _, name := range names {
			if !check(t, s, service.Check{Policies: []string{name}, Subject: subjects[i], Cost: 1}) {
				t.Fatalf("%s's first check under %s was refused", subjects[i].ID, name)
			}
		}
	}
	keys, err := srv.Do(t, "KEYS", "rl:*").AsStrSlice()
	if err != nil || len(keys) != len(subjects)*len(names) {
		t.Fatalf("KEYS rl:* = %d keys, %v; want %d", len(keys), err, len(subjects)*len(names))
	}
	before := snapshot(t, srv, keys)
	events := watchEvents(t, srv)
	for range 3 {
		for _, sub := range subjects {
			for _, name := range names {
				if check(t, s, service.Check{Policies: []string{name}, Subject: sub, Cost: 1}) {
					t.Fatalf("%s admitted again under %s", sub.ID, name)
				}
			}
		}
	}
	if got := events.until(t); len(got) != 0 {
		t.Errorf("counting rejections caused keyspace events %q; want none", got)
	}
	after := snapshot(t, srv, keys)
	for i, k := range keys {
		if after[i].dump != before[i].dump || after[i].pexpiretime != before[i].pexpiretime {
			t.Errorf("%s changed: DUMP equal %v, PEXPIRETIME %d then %d", k, after[i].dump == before[i].dump, before[i].pexpiretime, after[i].pexpiretime)
		}
	}
	if n, err := srv.Do(t, "DBSIZE").AsInt64(); err != nil || n != int64(len(keys))+2 { // and the markers
		t.Errorf("DBSIZE = %d, %v; want %d", n, err, len(keys)+2)
	}
	for _, name := range names {
		r, err := s.Top(name, 4)
		if err != nil {
			t.Fatal(err)
		}
		var sum uint64
		for _, e := range r.Entries {
			sum += e.Rejected
		}
		// Space-saving while no slice has left (the test takes far less than the period): the 4
		// entries' counts add up to the 18 rejections counted.
		if len(r.Entries) != 4 || sum != 18 || r.Bound == 0 || r.Entries[0].Key == "" {
			t.Errorf("top of %s: %+v; want 4 revealed entries summing to 18, a bound above 0", name, r)
		}
	}
}
