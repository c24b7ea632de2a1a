package redisstore

import (
	"bufio"
	"context"
	"errors"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/redistest"
)

// Fan-in: many goroutines of one process deciding on one Store while Redis answers nothing. Each
// decision must end by its own deadline however many callers share the Store's connections, and the
// Store must decide again by itself once Redis answers.

const (
	// fanInCallers is how many goroutines decide at once on the one Store.
	fanInCallers = 1000
	// fanInHold is how long each freeze lasts: longer than the client takes to give a silent
	// connection up (about two connIdleTimeouts of the default command timeout), so that a call held until then shows.
	fanInHold = 2500 * time.Millisecond
	// fanInSlack is how far past the command timeout a call may end. The guarantee is 50ms; this
	// allows for 1,000 goroutines under -race on a loaded 2-core machine, and is still well below
	// the 1.8–2.4s that a call held until its connection is given up took.
	fanInSlack = time.Second
	// fanInPace is how often each caller starts a call at most: a call that ends sooner is followed
	// by a pause. While Redis is silent every call waits out the command timeout anyway; when it
	// answers at once (healthy, or BUSY) the pace keeps 1,000 callers from spinning on the test
	// machine's CPU, which under -race would delay calls for want of CPU, not of the Store.
	fanInPace = DefaultCommandTimeout
)

// A fanInFreeze makes a server stop answering, and answer again.
type fanInFreeze struct {
	name string
	args []string // the server's extra arguments
	// freeze makes srv stop answering, and returns once it does; thaw makes it answer again (or
	// waits until it does by itself).
	freeze func(t *testing.T, srv *redistest.Server) (thaw func())
}

var fanInFreezes = []fanInFreeze{
	{
		name: "SIGSTOP",
		freeze: func(t *testing.T, srv *redistest.Server) func() {
			srv.Freeze(t)
			return func() { srv.Thaw(t) }
		},
	},
	{
		name: "CLIENT PAUSE",
		freeze: func(t *testing.T, srv *redistest.Server) func() {
			// ALL pauses every client, CLIENT UNPAUSE included: the pause ends by its timeout.
			until := time.Now().Add(fanInHold)
			if err := srv.Do(t, "CLIENT", "PAUSE", formatInt(fanInHold.Milliseconds()), "ALL").Error(); err != nil {
				t.Fatalf("CLIENT PAUSE: %v", err)
			}
			waitSilent(t, srv)
			return func() { time.Sleep(time.Until(until)) }
		},
	},
	{
		name: "DEBUG SLEEP",
		args: []string{"--enable-debug-command", "yes"},
		freeze: func(t *testing.T, srv *redistest.Server) func() {
			c := srv.Client(t)
			done := make(chan error, 1)
			go func() {
				secs := strconv.FormatFloat(fanInHold.Seconds(), 'f', -1, 64)
				done <- c.Do(context.Background(), c.B().Arbitrary("DEBUG", "SLEEP", secs).Build()).Error()
			}()
			waitSilent(t, srv)
			return func() {
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("DEBUG SLEEP: %v", err)
					}
				case <-time.After(fanInHold + 10*time.Second):
					t.Error("DEBUG SLEEP did not end 10s after its time")
				}
			}
		},
	},
	{
		name: "BUSY",
		args: []string{"--busy-reply-threshold", "50"},
		freeze: func(t *testing.T, srv *redistest.Server) func() {
			c := srv.Client(t)
			done := make(chan error, 1)
			go func() {
				// A read-only endless loop, which SCRIPT KILL may stop.
				done <- c.Do(context.Background(), c.B().Eval().Script("while true do end").Numkeys(0).Build()).Error()
			}()
			deadline := time.Now().Add(10 * time.Second)
			for {
				err := srv.Do(t, "PING").Error()
				if err != nil && strings.HasPrefix(err.Error(), "BUSY") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the server never became busy: %v", err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			return func() {
				if err := srv.Do(t, "SCRIPT", "KILL").Error(); err != nil {
					t.Errorf("SCRIPT KILL: %v", err)
				}
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Error("the busy script did not end 10s after SCRIPT KILL")
				}
			}
		},
	},
}

// waitSilent waits until srv no longer answers PING within 100ms on a new connection.
func waitSilent(t *testing.T, srv *redistest.Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for answers(srv.Addr(), 100*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server still answers PING 10s after it was told to stop")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// answers reports whether the server at addr answers PING within timeout.
func answers(addr string, timeout time.Duration) bool {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return false
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && line != ""
}

// startLagProbe starts a goroutine that sleeps 10ms over and over until t ends, and returns a
// function reporting the most any sleep overslept: how long the machine kept a ready goroutine
// waiting, which the test logs beside its figures.
func startLagProbe(t *testing.T) func() time.Duration {
	var worst atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			start := time.Now()
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if over := time.Since(start) - 10*time.Millisecond; over > time.Duration(worst.Load()) {
				worst.Store(int64(over))
			}
		}
	})
	t.Cleanup(func() { close(done); wg.Wait() })
	return func() time.Duration { return time.Duration(worst.Load()) }
}

// A fanInCall is what one call of the fan-in test did.
type fanInCall struct {
	start, end time.Time
	err        error
}

// TestFanInFreeze has 1,000 goroutines decide in a loop (at most once per fanInPace each) on one Store with the default command
// timeout while Redis stops answering (SIGSTOP, CLIENT PAUSE, DEBUG SLEEP) or answers BUSY: no call
// outlives the command timeout by more than fanInSlack; every call made while Redis is silent fails
// with ErrUnavailable; once Redis answers again the Store decides by itself; and once the Store is
// closed no goroutine is left.
func TestFanInFreeze(t *testing.T) {
	for _, f := range fanInFreezes {
		baseline := runtime.NumGoroutine()
		t.Run(f.name, func(t *testing.T) { runFanIn(t, f) })
		requireGoroutinesBack(t, f.name, baseline)
	}
}

func runFanIn(t *testing.T, f fanInFreeze) {
	srv := redistest.Start(t, f.args...)
	s, err := New(Config{URL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	timeout := DefaultCommandTimeout
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: bound.MaxRate, Period: time.Hour}
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = newKey(t)
	}
	take(t, s, keys[0], lim, 1) // connected

	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		mu      sync.Mutex
		calls   []fanInCall
		decided atomic.Int64
		started = make(chan struct{}, fanInCallers)
	)
	for g := range fanInCallers {
		wg.Go(func() {
			var mine []fanInCall
			first := true
			for !stop.Load() {
				start := time.Now()
				_, err := s.Take(context.Background(), admit.Request{Key: keys[g%len(keys)], Limit: lim, Cost: 1})
				end := time.Now()
				mine = append(mine, fanInCall{start: start, end: end, err: err})
				if err == nil {
					decided.Add(1)
				}
				if first {
					first = false
					started <- struct{}{}
				}
				time.Sleep(fanInPace - end.Sub(start))
			}
			mu.Lock()
			calls = append(calls, mine...)
			mu.Unlock()
		})
	}
	for range fanInCallers {
		<-started
	}
	// From here on every caller is running: the calls checked are those made from now on, not the
	// first ones, which wait for 1,000 goroutines to be started on two cores.
	warm := time.Now()
	lag := startLagProbe(t)
	before := decided.Load()
	time.Sleep(200 * time.Millisecond)
	for patience := time.Now().Add(10 * time.Second); decided.Load() == before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(patience) {
			stop.Store(true)
			wg.Wait()
			t.Fatal("no decision in 10s with Redis healthy")
		}
	}

	thaw := f.freeze(t, srv)
	silent := time.Now()
	time.Sleep(fanInHold - 200*time.Millisecond)
	thawing := time.Now()
	thaw()

	// Recovery by itself: the callers go on; some decision ends well after the thaw.
	recovered := time.Time{}
	deadline := time.Now().Add(10 * time.Second)
	for recovered.IsZero() && time.Now().Before(deadline) {
		start := time.Now()
		if _, err := s.Take(context.Background(), admit.Request{Key: keys[0], Limit: lim, Cost: 1}); err == nil {
			recovered = start
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the callers decide again too
	stop.Store(true)
	wg.Wait()
	if recovered.IsZero() {
		t.Fatalf("no decision 10s after Redis answered again (%s)", f.name)
	}

	var (
		slowest             time.Duration
		slowestAt           time.Time
		during, failedAfter int
		decidedAfter        int
		latencies           []time.Duration
	)
	for _, c := range calls {
		elapsed := c.end.Sub(c.start)
		if c.start.Before(warm) {
			continue
		}
		if elapsed > slowest {
			slowest, slowestAt = elapsed, c.start
		}
		if c.err != nil && (!errors.Is(c.err, admit.ErrUnavailable) || errors.Is(c.err, admit.ErrCorruptState)) {
			t.Fatalf("a call failed with %v; want ErrUnavailable", c.err)
		}
		if !c.start.Before(silent) && c.end.Before(thawing) {
			during++
			latencies = append(latencies, elapsed)
			if c.err == nil {
				t.Errorf("a call made %v into the freeze was decided", c.start.Sub(silent))
			}
		}
		if c.start.After(recovered) {
			if c.err == nil {
				decidedAfter++
			} else {
				failedAfter++
			}
		}
	}
	slices.Sort(latencies)
	p := func(q float64) time.Duration {
		if len(latencies) == 0 {
			return 0
		}
		return latencies[int(q*float64(len(latencies)-1))]
	}
	t.Logf("%s: %d callers, %d calls in all, %d made and ended while Redis was silent (p50 %v, p99 %v); slowest call %v, made %v after Redis went silent (command timeout %v); after recovery %d decided, %d failed; the worst oversleep of a 10ms sleep meanwhile %v",
		f.name, fanInCallers, len(calls), during, p(0.5), p(0.99), slowest, slowestAt.Sub(silent), timeout, decidedAfter, failedAfter, lag())
	if during == 0 {
		t.Fatal("no call was made and ended while Redis was silent")
	}
	// A machine that kept the probe waiting kept the callers waiting too: the bound widens by three
	// times the probe's worst oversleep (a call waits to run at its start, when its deadline fires,
	// and at its end).
	if bound := timeout + fanInSlack + 3*lag(); slowest > bound {
		t.Fatalf("the slowest call took %v, more than the command timeout %v + %v + three times the probe's worst oversleep %v", slowest, timeout, fanInSlack, lag())
	}
	if decidedAfter == 0 {
		t.Fatal("no caller decided after recovery")
	}
}
