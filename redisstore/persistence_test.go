package redisstore

import (
	"maps"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
)

// What a kill -9 and restart loses under load, by persistence setting, for docs/running-redis.md:
// without persistence every counter; with RDB snapshots every second, or AOF with appendfsync
// everysec, the writes of about the last second. Each run fails on behaviour only: a counter above
// the decisions that may have counted (a double count), decisions that do not come back by
// themselves, an error that is not admit.ErrUnavailable, or, with persistence, counts lost from more
// than lossBound before the kill; the counts lost are logged.
func TestRestartLosesByPersistence(t *testing.T) {
	// lossBound is how far back before a kill a persisted count may be lost: RDB's snapshot every
	// second, or AOF's fsync every second, plus a second of slack for a snapshot or an fsync that
	// a busy machine delays.
	const lossBound = 2 * time.Second
	for _, p := range []struct {
		name    string
		args    []string
		persist bool
	}{
		{"None", nil, false},
		{"RDBEverySecond", []string{"--save", "1 1"}, true},
		{"AOFEverySec", []string{"--appendonly", "yes", "--appendfsync", "everysec"}, true},
	} {
		t.Run(p.name, func(t *testing.T) {
			srv := redistest.Start(t, p.args...)
			s := open(t, srv.URL())
			keys := loadKeys(t, 3)
			big := admit.Limit{Algorithm: admit.FixedWindow, Rate: 1_000_000, Period: time.Hour}
			l := startLoad(t, s, keys, big, 3)

			time.Sleep(time.Second)
			l.mu.Lock()
			early := maps.Clone(l.admitted) // counted more than lossBound before the kill
			l.mu.Unlock()
			time.Sleep(lossBound)
			if n := l.failures(); n != 0 {
				t.Fatalf("%d decisions failed before the kill", n)
			}
			fault := time.Now()
			srv.Kill(t)
			srv.Restart(t)
			back := awaitRecovery(t, s, newKey(t), big, fault)
			l.halt()
			requireSteady(t, s, keys, big, 20)
			l.checkErrors(t, time.Time{})
			t.Logf("%s: decisions back %v after the kill; %s", p.name, back.Sub(fault).Round(time.Millisecond), l.window(fault))

			l.mu.Lock()
			defer l.mu.Unlock()
			lost, admitted := int64(0), 0
			for _, k := range keys {
				n := counter(t, srv, k)
				t.Logf("key %s: %d admitted, %d failed; counter after the restart %d: %d admitted decisions lost",
					k, l.admitted[k], l.failed[k], n, int64(l.admitted[k])-n)
				if n > int64(l.admitted[k]+l.failed[k]) {
					t.Errorf("key %s: counter %d above the %d admitted and %d failed decisions (a double count)",
						k, n, l.admitted[k], l.failed[k])
				}
				if p.persist && n < int64(early[k]) {
					t.Errorf("key %s: counter %d after the restart, below the %d decisions admitted more than %v before the kill",
						k, n, early[k], lossBound)
				}
				lost += max(0, int64(l.admitted[k])-n)
				admitted += l.admitted[k]
			}
			t.Logf("%s: %d of %d admitted decisions lost with the restart", p.name, lost, admitted)
		})
	}
}
