package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/guard"
	"github.com/admit-dev/admit/internal/redistest"
)

var roomy = admit.Limit{Name: "roomy", Algorithm: admit.FixedWindow, Rate: 1_000_000, Period: time.Hour}

type lateKey struct{}

// stallLate makes every command of a call whose context carries lateKey wait, before it reaches the
// client, until its context is done and then until the test says go: a caller descheduled past its
// command timeout. stalled is told of each stalled call.
func stallLate(s *Store) (stalled <-chan struct{}, resume chan<- struct{}) {
	st, go_ := make(chan struct{}), make(chan struct{})
	s.inflight.stall = func(ctx context.Context) {
		if ctx.Value(lateKey{}) == nil {
			return
		}
		<-ctx.Done()
		st <- struct{}{}
		<-go_
	}
	return st, go_
}

// healthyTake makes one Take on s that Redis answers in time, trying again (a few times) when a busy
// machine made it miss its own timeout.
func healthyTake(t *testing.T, s *Store, key string) {
	t.Helper()
	for try := 1; ; try++ {
		d, err := s.Take(t.Context(), admit.Request{Key: key, Limit: roomy, Cost: 1})
		if err == nil && d.Allowed {
			return
		}
		if try == 20 {
			t.Fatalf("Take on a healthy Redis = %+v, %v", d, err)
		}
		t.Logf("healthy Take, try %d: %v", try, err)
	}
}

// graces holds the verdicts' graces a Store started (inflight.grace), for a test to end.
type graces struct {
	mu  sync.Mutex
	fns []func()
}

func (g *graces) start(_ time.Duration, f func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.fns = append(g.fns, f)
}

// take returns the graces started since the last take.
func (g *graces) take() []func() {
	g.mu.Lock()
	defer g.mu.Unlock()
	fns := g.fns
	g.fns = nil
	return fns
}

// A call of a starved client, which outlives its command timeout while other calls of the Store get
// their replies, fails closed (unavailable, a timeout) but does not count toward the Breaker; nor
// does it when the reply of another call comes only after it returned, within the grace of its
// verdict; the same call when nothing else was answered, or with CountLate, does. The caller has
// its error before the grace ends.
func TestStarvedClientDoesNotTripBreaker(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name      string
		others    bool // another call is answered while the late one is stalled
		inGrace   bool // another call is answered after the late one returned, before its grace ends
		countLate bool
		wantOpen  bool
	}{
		{"others answered", true, false, false, false},
		{"answered in the grace", false, true, false, false},
		{"nothing answered", false, false, false, true},
		{"others answered, CountLate", true, false, true, true},
		{"answered in the grace, CountLate", false, true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Config{URL: srv.URL(), CommandTimeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// Only the replies are evidence here: a timer late on a busy machine is not taken for it.
			s.calls.New = func() any { return newCallCtx(&s.calls, s.epoch, s.inflight, time.Hour, time.Hour) }
			stalled, resume := stallLate(s)
			var g graces
			s.inflight.grace = g.start
			const failures = 3
			b := guard.NewBreaker(s, guard.BreakerOptions{Failures: failures, CountLate: tc.countLate})
			healthyTake(t, s, "rl:starved:warm") // connected, the script loaded
			late := context.WithValue(t.Context(), lateKey{}, true)
			calls := 2 * failures
			if tc.wantOpen {
				calls = failures
			}
			for i := range calls {
				errc := make(chan error, 1)
				go func() {
					_, err := b.Take(late, admit.Request{Key: fmt.Sprintf("rl:starved:late%d", i), Limit: roomy, Cost: 1})
					errc <- err
				}()
				<-stalled
				if tc.others {
					healthyTake(t, s, "rl:starved:other")
				}
				resume <- struct{}{}
				err := <-errc
				if !errors.Is(err, admit.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, guard.ErrOpen) {
					t.Fatalf("late call %d: %v, want the store's timeout, unavailable", i, err)
				}
				fns := g.take()
				if want := !tc.others && !tc.countLate; (len(fns) == 1) != want || len(fns) > 1 {
					t.Fatalf("late call %d: %d graces started, want one = %v", i, len(fns), want)
				}
				if tc.inGrace {
					healthyTake(t, s, "rl:starved:other")
				}
				for _, f := range fns {
					f()
				}
				if want := tc.others || tc.inGrace; errors.Is(err, guard.ErrClientLate) != want {
					t.Fatalf("late call %d: %v matches ErrClientLate = %v, want %v", i, err, !want, want)
				}
			}
			if got := b.State() == guard.BreakerOpen; got != tc.wantOpen {
				t.Fatalf("after %d late calls the Breaker is %v (opened %d times), want open = %v", calls, b.State(), b.Opened(), tc.wantOpen)
			}
		})
	}
}

// Frozen Redis (SIGSTOP) under load: once the calls begun before the freeze have returned, nothing
// is answered, so every timeout counts once its verdict's grace has passed (unless a timer ran
// late) and the Breaker opens at the Failures-th; a killed Redis fails fast (no timeout) and opens
// it after Failures calls.
func TestFrozenOrKilledRedisStillTripsBreaker(t *testing.T) {
	for _, fault := range []string{"frozen", "killed"} {
		t.Run(fault, func(t *testing.T) {
			srv := redistest.Start(t)
			s, err := New(Config{URL: srv.URL(), CommandTimeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			const failures = 4
			b := guard.NewBreaker(s, guard.BreakerOptions{Failures: failures, CoolOff: time.Hour})
			healthyTake(t, s, "rl:starved:warm")
			// The graces of verdicts run on real timers; the test waits for each to end.
			var started, ended atomic.Int64
			s.inflight.grace = func(d time.Duration, f func()) {
				started.Add(1)
				time.AfterFunc(d, func() { f(); ended.Add(1) })
			}
			judged := func() {
				for deadline := time.Now().Add(time.Minute); ended.Load() != started.Load(); time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("%d of %d verdicts' graces still running after a minute", started.Load()-ended.Load(), started.Load())
					}
				}
			}

			// Load: workers deciding in a loop, each until its first failure.
			var answered atomic.Int64
			var wg sync.WaitGroup
			for w := range 16 {
				wg.Go(func() {
					for i := 0; ; i++ {
						_, err := s.Take(context.Background(), admit.Request{Key: fmt.Sprintf("rl:starved:load%d:%d", w, i%50), Limit: roomy, Cost: 1})
						if err != nil {
							return
						}
						answered.Add(1)
					}
				})
			}
			for answered.Load() < 200 {
				time.Sleep(time.Millisecond) // until the load runs
			}
			if fault == "frozen" {
				srv.Freeze(t)
				defer srv.Thaw(t)
			} else {
				srv.Kill(t)
			}
			wg.Wait() // every call begun before the fault has returned

			// Each timeout counts unless its timer ran late (a busy machine): the Breaker opens
			// exactly at the failures-th that counts.
			counted, late := 0, 0
			for call := 1; counted < failures; call++ {
				if call > 50 {
					t.Fatalf("%d calls after Redis was %s: %d counted, %d late; the Breaker is %v", call-1, fault, counted, late, b.State())
				}
				_, err := b.Take(context.Background(), admit.Request{Key: "rl:starved:k", Limit: roomy, Cost: 1})
				if !errors.Is(err, admit.ErrUnavailable) || errors.Is(err, guard.ErrOpen) {
					t.Fatalf("call %d after Redis was %s: %v, want unavailable, not refused", call, fault, err)
				}
				judged() // the Breaker has counted it
				if errors.Is(err, guard.ErrClientLate) {
					late++
					t.Logf("call %d: %v", call, err)
				} else {
					counted++
				}
				if want := counted == failures; (b.State() == guard.BreakerOpen) != want {
					t.Fatalf("after %d counted failures: Breaker %v, want open = %v", counted, b.State(), want)
				}
			}
			t.Logf("after Redis was %s: %d counted, %d late, %d verdicts after a grace", fault, counted, late, started.Load())
			if fault == "frozen" && started.Load() < failures {
				t.Fatalf("%d verdicts after a grace, want one for each of the %d timeouts counted", started.Load(), failures)
			}
			if fault == "killed" && late > 0 {
				t.Fatalf("%d calls to a killed Redis were taken for the client's lateness", late)
			}
			if _, err := b.Take(context.Background(), admit.Request{Key: "rl:starved:k", Limit: roomy, Cost: 1}); !errors.Is(err, guard.ErrOpen) {
				t.Fatalf("after the Breaker opened: %v, want ErrOpen", err)
			}
		})
	}
}

type holdKey struct{}

// A take queued for a batch that times out in the queue, with nothing answered meanwhile, is judged
// after its grace; the batch sent once the call in flight ends is answered within that grace, and
// its reply proves Redis alive: the timeout is the client's lateness, not counted by the Breaker.
func TestQueuedTakeBatchReplyIsEvidence(t *testing.T) {
	srv := redistest.Start(t)
	s, err := New(Config{URL: srv.URL(), CommandTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.calls.New = func() any { return newCallCtx(&s.calls, s.epoch, s.inflight, time.Hour, time.Hour) }
	var g graces
	s.inflight.grace = g.start
	healthyTake(t, s, "rl:starved:warm")
	s.co.laneCalls = 1 // one call in flight: the next takes queue
	release := make(chan struct{})
	s.inflight.stall = func(ctx context.Context) {
		if ctx.Value(holdKey{}) != nil {
			<-release // the call in flight, held until its deadline has passed
		}
	}
	queued := func(n int) {
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
			s.co.mu.Lock()
			got := len(s.co.one.queue)
			s.co.mu.Unlock()
			if got == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d takes queued, want %d", got, n)
			}
		}
	}
	b := guard.NewBreaker(s, guard.BreakerOptions{Failures: 1})
	held := make(chan error, 1)
	go func() {
		_, err := s.Take(context.WithValue(t.Context(), holdKey{}, true), admit.Request{Key: "rl:starved:held", Limit: roomy, Cost: 1})
		held <- err
	}()
	for {
		s.co.mu.Lock()
		busy := s.co.one.calls == 1
		s.co.mu.Unlock()
		if busy {
			break
		}
		time.Sleep(time.Millisecond)
	}
	_, err = b.Take(t.Context(), admit.Request{Key: "rl:starved:queued", Limit: roomy, Cost: 1})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, admit.ErrUnavailable) {
		t.Fatalf("queued take: %v, want its own timeout", err)
	}
	fns := g.take()
	if len(fns) != 1 {
		t.Fatalf("%d graces started for the queued take, want 1", len(fns))
	}
	// Two more takes queue behind the held call; released, it fails by its deadline, and the
	// queue goes as one batch (the timed-out take dropped from it).
	batch := make(chan error, 2)
	for i := range 2 {
		go func() {
			_, err := s.Take(t.Context(), admit.Request{Key: fmt.Sprintf("rl:starved:batch%d", i), Limit: roomy, Cost: 1})
			batch <- err
		}()
	}
	queued(3)
	close(release)
	if err := <-held; err == nil {
		t.Fatal("the held call succeeded past its deadline")
	}
	for range 2 {
		if err := <-batch; err != nil {
			t.Fatalf("batched take: %v", err)
		}
	}
	fns[0]()
	if !errors.Is(err, guard.ErrClientLate) {
		t.Fatalf("queued take after a batch was answered in its grace: %v, want ErrClientLate", err)
	}
	if b.State() != guard.BreakerClosed || b.Late() != 1 {
		t.Fatalf("Breaker %v, Late() = %d; want closed, 1", b.State(), b.Late())
	}
}
