package redisstore

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/callers"
	"github.com/admit-dev/admit/internal/redistest"
)

// BenchmarkDurability measures Store.Take of an async and of a replicated policy (WAIT for 1 of 1
// replicas) at 1, 16 and 256 callers, on a primary with one replica, both harness-started on this
// machine; then async Takes beside 16 goroutines taking in a loop: an async policy (the control:
// the same load), a replicated one with the replica running, and one with it stopped (SIGSTOP: each
// of them blocked in WAIT up to its 1s timeout). Each runs on a Store with coalescing on (the
// default) and off (Config.Coalescing): a replicated decision never coalesces (its script and WAIT
// run on a dedicated connection), async ones do, so the cost of replicated is against both.
// BENCHMARKS.md ("Durability: the cost of replicated") quotes it:
//
//	ADMIT_REQUIRE_REDIS=1 go test -run '^$' -bench Durability -benchtime 2s ./redisstore
//
// and one coalescing mode alone with -bench 'Durability/coalesce=off' (or on).
func BenchmarkDurability(b *testing.B) {
	primary, replicas := redistest.StartReplicated(b, 1)
	for _, co := range []struct {
		name string
		mode Coalescing
	}{{"coalesce=on", CoalescingOn}, {"coalesce=off", CoalescingOff}} {
		b.Run(co.name, func(b *testing.B) {
			s, err := New(Config{URL: primary.URL(), CommandTimeout: patientCommandTimeout, DialTimeout: patientCommandTimeout, Coalescing: co.mode})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			benchDurability(b, s, replicas[0])
		})
	}
}

// benchDurability is BenchmarkDurability on s, whose primary's one replica is replica.
func benchDurability(b *testing.B, s *Store, replica *redistest.Server) {
	keys := benchKeys(1024)
	async := benchLimit
	repl := benchLimit
	repl.Replicas, repl.ReplicaTimeout = 1, time.Second
	take := func(lim admit.Limit) func(i int) error {
		return func(i int) error {
			_, err := s.Take(context.Background(), admit.Request{Key: keys[i%len(keys)], Limit: lim, Cost: 1})
			return err
		}
	}
	b.Run("mode=async", func(b *testing.B) { callers.Bench(b, take(async)) })
	b.Run("mode=replicated", func(b *testing.B) { callers.Bench(b, take(repl)) })
	for _, bc := range []struct {
		name    string
		lim     admit.Limit
		stalled bool
	}{
		{"mode=async-beside-16-async", async, false},
		{"mode=async-beside-16-replicated", repl, false},
		{"mode=async-beside-16-replicated-replica-stopped", repl, true},
	} {
		stalled := bc.stalled
		b.Run(bc.name, func(b *testing.B) {
			if stalled {
				replica.Freeze(b)
				defer replica.Thaw(b)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for w := range 16 {
				wg.Go(func() {
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						s.Take(context.Background(), admit.Request{Key: "rl:bench:v1:{r" + strconv.Itoa(w) + "}", Limit: bc.lim, Cost: 1})
					}
				})
			}
			callers.Bench(b, take(async))
			close(stop)
			wg.Wait()
		})
	}
}
