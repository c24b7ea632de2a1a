package limittest

import (
	"bufio"
	"context"
	"fmt"
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
	raceRate       = 7  // the limit of the single key
)

// The Limits of the race: one key alone, and two decided together.
var (
	raceLimit = admit.Limit{Name: "race", Algorithm: admit.FixedWindow, Rate: raceRate, Period: time.Minute}
	racePair  = [2]admit.Limit{
		{Name: "pair-a", Algorithm: admit.FixedWindow, Rate: 3, Period: time.Minute},
		{Name: "pair-b", Algorithm: admit.FixedWindow, Rate: 5, Period: time.Minute},
	}
)

// runChild does a child process's part of testProcesses, if this process is such a child, and
// reports whether it was.
func runChild(t *testing.T, newBackend func(t *testing.T) Backend) bool {
	work := os.Getenv(childEnv)
	if work == "" {
		return false
	}
	fields := strings.Fields(work)
	if len(fields) != 3 {
		t.Fatalf("limittest child: %s=%q; want an address and two keys", childEnv, work)
	}
	b, ok := newBackend(t).(SharedBackend)
	if !ok {
		t.Fatal("limittest child: the Backend is not a SharedBackend")
	}
	s := b.OpenAddress(t, fields[0])
	single, pair := fields[1], fields[2]
	var mu sync.Mutex
	var admitted [2]int
	var wg sync.WaitGroup
	for range childWorkers {
		wg.Go(func() {
			for range childAttempts {
				d, err := s.Take(context.Background(), admit.Request{Key: single, Limit: raceLimit, Cost: 1})
				if err != nil {
					t.Errorf("limittest child: Take: %v", err)
					return
				}
				rs := []admit.Request{
					{Key: pair + ":a", Limit: racePair[0], Cost: 1},
					{Key: pair + ":b", Limit: racePair[1], Cost: 1},
				}
				both, err := s.TakeAll(context.Background(), rs, make([]admit.Decision, 2))
				if err != nil {
					t.Errorf("limittest child: TakeAll: %v", err)
					return
				}
				mu.Lock()
				if d.Allowed {
					admitted[0]++
				}
				if both {
					admitted[1]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	fmt.Printf("limittest-child admitted %d %d\n", admitted[0], admitted[1])
	return true
}

// testProcesses races childProcesses processes, each with childWorkers goroutines, on one key and on
// a pair of keys decided together, and requires that exactly the limits were admitted in all.
func testProcesses(t *testing.T, b Backend) {
	sb, ok := b.(SharedBackend)
	if !ok {
		t.Skip("the Backend is not a SharedBackend: its state is this process's own")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("cannot find the test binary: %v", err)
	}
	top, _, _ := strings.Cut(t.Name(), "/")
	single, pair := newKey(), "rl:limittest:"+newSlot()
	work := strings.Join([]string{sb.Address(), single, pair}, " ")

	outs := make([][]byte, childProcesses)
	errs := make([]error, childProcesses)
	var wg sync.WaitGroup
	for i := range childProcesses {
		wg.Go(func() {
			cmd := exec.CommandContext(t.Context(), exe, "-test.run=^"+top+"$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), childEnv+"="+work)
			outs[i], errs[i] = cmd.CombinedOutput()
		})
	}
	wg.Wait()
	var single1, pair1 int
	for i := range childProcesses {
		if errs[i] != nil {
			t.Fatalf("child %d: %v; output:\n%s", i, errs[i], outs[i])
		}
		a, p, ok := childResult(outs[i])
		if !ok {
			t.Fatalf("child %d printed no result; output:\n%s", i, outs[i])
		}
		single1, pair1 = single1+a, pair1+p
	}
	attempts := childProcesses * childWorkers * childAttempts
	if single1 != raceRate {
		t.Errorf("%d requests from %d processes on one key of %v: %d admitted; want exactly %d", attempts, childProcesses, raceLimit, single1, raceRate)
	}
	if pair1 != int(racePair[0].Rate) {
		t.Errorf("%d requests from %d processes on %v and %v together: %d admitted; want exactly %d", attempts, childProcesses, racePair[0], racePair[1], pair1, racePair[0].Rate)
	}
	s := b.Open(t)
	if d := take(t, s, pair+":b", racePair[1], 0); d.Remaining != racePair[1].Rate-racePair[0].Rate {
		t.Errorf("pair-b has %d left; want %d: only the admitted pairs consumed", d.Remaining, racePair[1].Rate-racePair[0].Rate)
	}
}

// childResult reads the line a child prints.
func childResult(out []byte) (single, pair int, ok bool) {
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		rest, found := strings.CutPrefix(sc.Text(), "limittest-child admitted ")
		if !found {
			continue
		}
		a, b, _ := strings.Cut(rest, " ")
		x, err1 := strconv.Atoi(a)
		y, err2 := strconv.Atoi(b)
		return x, y, err1 == nil && err2 == nil
	}
	return 0, 0, false
}
