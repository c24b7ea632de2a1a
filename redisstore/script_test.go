package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/luasource"
	"github.com/admit-dev/admit/internal/redistest"
)

// A key in its expiry millisecond — GET still returns it while PTTL answers 0 — is a window that
// ends now: the decision starts a new window, as memstore decides the same instant (docs/fixed-window.md). It is
// never corrupt state. Each probe pipelines PTTL and the script, so that the script runs in the
// millisecond the PTTL saw; the test goes on until it has seen that millisecond many times.
func TestExpiryMillisecondStartsANewWindow(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv.URL())
	c := srv.Client(t)
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: 2 * time.Millisecond}
	_, args := testArgs([]admit.Request{{Key: "k", Limit: lim, Cost: 1}})
	ctx := context.Background()

	const want = 20
	seen := 0
	deadline := time.Now().Add(10 * time.Second)
	for seen < want {
		if time.Now().After(deadline) {
			t.Fatalf("saw a key in its expiry millisecond only %d times in 10s; want %d", seen, want)
		}
		key := newKey(t)
		take(t, s, key, lim, 1) // starts a 2 ms window and loads the script
		for {
			res := c.DoMulti(ctx,
				c.B().Pttl().Key(key).Build(),
				c.B().Evalsha().Sha1(takeScript.sha).Numkeys(1).Key(key).Arg(args...).Build())
			ttl, err := res[0].AsInt64()
			if err != nil {
				t.Fatalf("PTTL: %v", err)
			}
			msg, err := res[1].ToMessage()
			if err != nil {
				t.Fatalf("the script right after PTTL %d: %v", ttl, scriptError(err))
			}
			var ds [1]admit.Decision
			_, err = parseTake(msg, []admit.Request{{Key: key, Limit: lim, Cost: 1}}, ds[:], make([]uint64, bound.MaxRequests))
			d := ds[0]
			if err != nil {
				t.Fatalf("the script right after PTTL %d: %v", ttl, err)
			}
			if ttl > 0 {
				continue // the first window is still running
			}
			if ttl == 0 {
				seen++
			}
			// The window ended at or before the script: it started a new one.
			if !d.Allowed || d.Remaining != 2 || d.ResetAfter != lim.Period {
				t.Fatalf("decision right after PTTL %d = %+v; want a new window: allowed, remaining 2, ResetAfter %v", ttl, d, lim.Period)
			}
			break
		}
	}
}

// The script's bounds are rendered from the Go constants: it accepts exactly what Go accepts.
func TestScriptBoundsAreGos(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	maxRate := strconv.FormatInt(bound.MaxRate, 10)
	maxWindow := strconv.FormatInt(bound.MaxPeriod.Milliseconds(), 10)
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{maxRate, "60000", "1", "0"}, true},
		{[]string{strconv.FormatInt(bound.MaxRate+1, 10), "60000", "1", "0"}, false},
		{[]string{"3", maxWindow, "0", "0"}, true},
		{[]string{"3", strconv.FormatInt(bound.MaxPeriod.Milliseconds()+1, 10), "0", "0"}, false},
		{[]string{"3", strconv.FormatInt(bound.MinPeriod.Milliseconds(), 10), "0", "0"}, true},
		{[]string{"3", strconv.FormatInt(bound.MinPeriod.Milliseconds()-1, 10), "0", "0"}, false},
		{[]string{maxRate, maxWindow, "1", "1"}, true}, // aligned at both bounds
		{[]string{"3", strconv.FormatInt(bound.MinPeriod.Milliseconds(), 10), "1", "1"}, true},
	} {
		_, err := s.run(context.Background(), takeScript, []string{newKey(t)}, fixedWindowArgv(tc.args...))
		switch {
		case tc.ok && err != nil:
			t.Errorf("script with ARGV %q: %v; Go accepts it", tc.args, err)
		case !tc.ok && !errors.Is(err, admit.ErrInvalidRequest):
			t.Errorf("script with ARGV %q: %v; want ErrInvalidRequest, as Go refuses it", tc.args, err)
		}
	}
}

func TestScriptSource(t *testing.T) {
	src, ok := luasource.Lookup("take")
	if !ok || src != takeScript.src || !strings.Contains(src, "local MAX = ") || !strings.Contains(src, "function fixed_window.decide") {
		t.Fatalf("luasource.Lookup(take) = %.60q, %v; want the assembled take script", src, ok)
	}
	if _, ok := luasource.Lookup("fixed_window"); ok {
		t.Fatal("luasource.Lookup(fixed_window): a module is not an entry point")
	}
}
