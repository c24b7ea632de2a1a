package limittest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/admit-dev/admit"
)

// A SharedBackend is a Backend whose state other processes reach, such as a Redis server: the suite
// then also races several OS processes — the test binary run again as children — on the same keys,
// and requires exact totals.
type SharedBackend interface {
	Backend
	// Address returns what OpenAddress needs, in another process, to open Stores on this
	// Backend's state, such as the server's URL.
	Address() string
	// OpenAddress returns a Store on the state at address, which Address returned in another
	// process. It is called in a child process, on a Backend that newBackend made there.
	OpenAddress(t *testing.T, address string) admit.Store
}

// childEnv carries the work of a child process: the Backend's address, then the keys to race on.
const childEnv = "ADMIT_LIMITTEST_CHILD"

// Numbers of the race between processes.
const (
	childProcesses = 4
	childWorkers   = 8  // goroutines in each process
	childAttempts  = 10 // requests each goroutine makes on each key
	raceRate       = 7  // the limit of each single key
)

// raceLimits returns the Limits of the race's single keys: one of raceRate per minute for every
// algorithm, each of which admits exactly raceRate on a fresh key within a race that no minute
// boundary crosses.
func raceLimits() []admit.Limit {
	return []admit.Limit{
		{Name: "race", Algorithm: admit.FixedWindow, Rate: raceRate, Period: time.Minute},
		{Name: "race", Algorithm: admit.FixedWindow, Rate: raceRate, Period: time.Minute, Aligned: true},
		{Name: "race", Algorithm: admit.SlidingWindow, Rate: raceRate, Period: time.Minute},
		{Name: "race", Algorithm: admit.SlidingLog, Rate: raceRate, Period: time.Minute},
		{Name: "race", Algorithm: admit.GCRA, Rate: raceRate, Period: time.Minute},
		// Leases never released: exactly raceRate are acquired, and held for the minute.
		{Name: "race", Algorithm: admit.Concurrency, Rate: raceRate, Period: time.Minute},
	}
}

// racePair returns the Limits of the race's two keys decided together.
func racePair() [2]admit.Limit {
	return [2]admit.Limit{
		{Name: "pair-a", Algorithm: admit.FixedWindow, Rate: 3, Period: time.Minute},
		{Name: "pair-b", Algorithm: admit.GCRA, Rate: 5, Period: time.Minute},
	}
}

// runChild does a child process's part of testProcesses, if this process is such a child, and
// reports whether it was.
func runChild(t *testing.T, newBackend func(t *testing.T) Backend) bool {
	if hold := os.Getenv(holderEnv); hold != "" {
		runHolder(t, newBackend, hold)
		return true
	}
	work := os.Getenv(childEnv)
	if work == "" {
		return false
	}
	lims, pair := raceLimits(), racePair()
	fields := strings.Fields(work)
	if len(fields) != 2+len(lims) {
		t.Fatalf("limittest child: %s=%q; want an address, the pair's key and a key per race Limit", childEnv, work)
	}
	b, ok := newBackend(t).(SharedBackend)
	if !ok {
		t.Fatal("limittest child: the Backend is not a SharedBackend")
	}
	s := b.OpenAddress(t, fields[0])
	pairKey, keys := fields[1], fields[2:]
	var mu sync.Mutex
	admitted := make([]int, len(lims)+1) // the pair's, then each race Limit's
	var wg sync.WaitGroup
	for range childWorkers {
		wg.Go(func() {
			for range childAttempts {
				rs := []admit.Request{
					{Key: pairKey + ":a", Limit: pair[0], Cost: 1},
					{Key: pairKey + ":b", Limit: pair[1], Cost: 1},
				}
				both, err := s.TakeAll(context.Background(), rs, make([]admit.Decision, 2))
				if err != nil {
					t.Errorf("limittest child: TakeAll: %v", err)
					return
				}
				got := make([]bool, len(lims)+1)
				got[0] = both
				for i, lim := range lims {
					d, err := s.Take(context.Background(), admit.Request{Key: keys[i], Limit: lim, Cost: 1})
					if err != nil {
						t.Errorf("limittest child: Take under %v: %v", lim, err)
						return
					}
					got[i+1] = d.Allowed
				}
				mu.Lock()
				for i, ok := range got {
					if ok {
						admitted[i]++
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	fmt.Printf("limittest-child admitted %s\n", strings.Trim(fmt.Sprint(admitted), "[]"))
	return true
}

// childCommand skips t unless b is a SharedBackend, and returns its address and a function that
// makes the command of a child: this test binary, running t's top-level test again, with env
// (NAME=value) added to its environment.
func childCommand(t *testing.T, b Backend) (addr string, child func(env string) *exec.Cmd) {
	t.Helper()
	sb, ok := b.(SharedBackend)
	if !ok {
		t.Skip("the Backend is not a SharedBackend: its state is this process's own")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("cannot find the test binary: %v", err)
	}
	top, _, _ := strings.Cut(t.Name(), "/")
	return sb.Address(), func(env string) *exec.Cmd {
		cmd := exec.CommandContext(t.Context(), exe, "-test.run=^"+top+"$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), env)
		return cmd
	}
}

// testProcesses races childProcesses processes, each with childWorkers goroutines, on a key of every
// algorithm and on a pair of keys decided together, and requires that exactly the limits were
// admitted in all.
func testProcesses(t *testing.T, b Backend) {
	addr, child := childCommand(t, b)
	lims, pair := raceLimits(), racePair()
	pairKey := "rl:limittest:" + newSlot()
	work := []string{addr, pairKey}
	for range lims {
		work = append(work, newKey())
	}
	// Aligned and sliding windows end at every minute of the clock: race within one minute.
	settle(t, b, aw(1, time.Minute), minuteMargin)

	outs := make([][]byte, childProcesses)
	errs := make([]error, childProcesses)
	var wg sync.WaitGroup
	for i := range childProcesses {
		wg.Go(func() {
			outs[i], errs[i] = child(childEnv + "=" + strings.Join(work, " ")).CombinedOutput()
		})
	}
	wg.Wait()
	totals := make([]int, len(lims)+1)
	for i := range childProcesses {
		if errs[i] != nil {
			t.Fatalf("child %d: %v; output:\n%s", i, errs[i], outs[i])
		}
		counts, ok := childResult(outs[i], len(totals))
		if !ok {
			t.Fatalf("child %d printed no result; output:\n%s", i, outs[i])
		}
		for k, n := range counts {
			totals[k] += n
		}
	}
	attempts := childProcesses * childWorkers * childAttempts
	if totals[0] != int(pair[0].Rate) {
		t.Errorf("%d requests from %d processes on %v and %v together: %d admitted; want exactly %d", attempts, childProcesses, pair[0], pair[1], totals[0], pair[0].Rate)
	}
	for i, lim := range lims {
		if totals[i+1] != raceRate {
			t.Errorf("%d requests from %d processes on one key of %v: %d admitted; want exactly %d", attempts, childProcesses, lim, totals[i+1], raceRate)
		}
	}
	s := b.Open(t)
	if d := take(t, s, pairKey+":b", pair[1], 0); d.Remaining != pair[1].Rate-pair[0].Rate {
		t.Errorf("pair-b has %d left; want %d: only the admitted pairs consumed", d.Remaining, pair[1].Rate-pair[0].Rate)
	}
}

// childResult reads the n counts of the line a child prints.
func childResult(out []byte, n int) ([]int, bool) {
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		rest, found := strings.CutPrefix(sc.Text(), "limittest-child admitted ")
		if !found {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != n {
			return nil, false
		}
		counts := make([]int, n)
		for i, f := range fields {
			v, err := strconv.Atoi(f)
			if err != nil {
				return nil, false
			}
			counts[i] = v
		}
		return counts, true
	}
	return nil, false
}

// holderEnv carries the work of a child process of testKilledHolder: the Backend's address, then the
// key whose leases it holds.
const holderEnv = "ADMIT_LIMITTEST_HOLDER"

// holder is the Limit of testKilledHolder's key: its leases expire soon after the holder is killed.
var holder = cc(3, 800*time.Millisecond)

// runHolder acquires every lease of the key in hold, says so, and waits to be killed, releasing
// nothing.
func runHolder(t *testing.T, newBackend func(t *testing.T) Backend, hold string) {
	address, key, ok := strings.Cut(hold, " ")
	b, shared := newBackend(t).(SharedBackend)
	if !ok || !shared {
		t.Fatalf("limittest holder: %s=%q, or a Backend that is not a SharedBackend", holderEnv, hold)
	}
	s := b.OpenAddress(t, address)
	for range holder.Rate {
		if d, err := s.Take(context.Background(), admit.Request{Key: key, Limit: holder, Cost: 1}); err != nil || !d.Allowed {
			t.Fatalf("limittest holder: Take = %+v, %v; want a lease", d, err)
		}
	}
	fmt.Printf("limittest-holder held %d\n", holder.Rate)
	time.Sleep(time.Minute) // until killed
	t.Fatal("limittest holder: not killed")
}

// testKilledHolder checks that a holder that dies without releasing gives its capacity back within
// the lease TTL: a child process acquires every lease of a key and is killed; the
// key is full, and one TTL later free again.
func testKilledHolder(t *testing.T, b Backend) {
	addr, child := childCommand(t, b)
	key := newKey()
	cmd := child(holderEnv + "=" + addr + " " + key)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	held := false
	for sc := bufio.NewScanner(out); !held && sc.Scan(); {
		lines = append(lines, sc.Text())
		held = strings.HasPrefix(sc.Text(), "limittest-holder held ")
	}
	cmd.Process.Kill()
	go io.Copy(io.Discard, out)
	cmd.Wait()
	if !held {
		t.Fatalf("the holder did not hold its leases; output:\n%s", strings.Join(lines, "\n"))
	}
	s := b.Open(t)
	d := take(t, s, key, holder, 1)
	if d.Allowed || d.RetryAfter > holder.Period {
		t.Fatalf("a key whose holder was killed holding every lease: %+v; want rejected until the leases expire, within %v", d, holder.Period)
	}
	b.Sleep(t, d.ResetAfter)
	run(t, b, s, key, holder, []step{{n: 1, allowed: true, remaining: holder.Rate - 1, fresh: true}})
}
