package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
)

// testSingleScript is the take script's single-policy path alone (take_single.lua, as a test
// assembly reads the time from its last argument), with an error reply where the take script goes
// on to the general path: a call it answers was decided by that path, and one it falls through
// from is refused with fellThrough.
var testSingleScript = newScript("take-single-test",
	constants()+gcraConstants()+"local CLOCK_FROM_ARGV = true\n"+takeSingleSrc+"return redis.error_reply('"+fellThrough+"')\n")

const fellThrough = "ADMIT_TEST fell through to the general path"

// runInts calls sc and returns its reply as integers, or the error.
func runInts(t *testing.T, s *Store, sc *script, keys, args []string) ([]int64, error) {
	t.Helper()
	msg, err := s.run(context.Background(), sc, keys, args)
	if err != nil {
		return nil, err
	}
	arr, err := msg.ToArray()
	if err != nil {
		t.Fatalf("%s: reply %v: %v", sc.name, msg, err)
	}
	out := make([]int64, len(arr))
	for i, m := range arr {
		if out[i], err = m.AsInt64(); err != nil {
			t.Fatalf("%s: element %d of %v: %v", sc.name, i, arr, err)
		}
	}
	return out, nil
}

// The single-policy path decides every call it takes as the general path does: a sequence of takes,
// peeks and rejections, across window ends and a bucket's refill, on one key through the path alone
// and on another through the general path (an explicit "0" shadow mask, which the path leaves to the
// general one), at the same fixed times, gets the same replies. A fixed window that starts at its
// first admission takes its time from the key's expiry, Redis's clock: its retry and reset may differ
// by the milliseconds between the two calls, and its token is the key's own PEXPIRETIME.
func TestSinglePolicyPathAgreesWithGeneralPath(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv.URL())
	start := time.UnixMilli(1_800_000_000_000 + 59_000) // one second before an aligned minute ends
	for _, lim := range []admit.Limit{
		{Algorithm: admit.FixedWindow, Rate: 5, Period: time.Minute},
		{Algorithm: admit.FixedWindow, Rate: 5, Period: time.Minute, Aligned: true},
		{Algorithm: admit.FixedWindow, Rate: admit.MaxRate, Period: admit.MaxPeriod},
		{Algorithm: admit.GCRA, Rate: 5, Period: time.Minute, Burst: 4},
		{Algorithm: admit.GCRA, Rate: 1000, Period: time.Second, Burst: 1},
	} {
		t.Run(fmt.Sprintf("%v_%d_per_%v_aligned_%v", lim.Algorithm, lim.Rate, lim.Period, lim.Aligned), func(t *testing.T) {
			single, general := newKey(t), newKey(t)
			at := start
			for step, cost := range []int64{1, 0, 3, 2, 1, 0, 5, 1, 4, 0} {
				cost = min(cost, lim.Capacity()) // a larger cost is refused
				if step == 5 {
					at = at.Add(2 * time.Second) // past the aligned window's end, and a bucket's partial refill
				}
				at = at.Add(time.Millisecond)
				clock := strconv.FormatInt(at.UnixMicro(), 10)
				keys, args := testArgs([]admit.Request{{Key: single, Limit: lim, Cost: cost}})
				got, err := runInts(t, s, testSingleScript, keys, append(args, clock))
				if err != nil {
					t.Fatalf("step %d (cost %d): the single-policy path: %v", step, cost, err)
				}
				keys, args = testArgs([]admit.Request{{Key: general, Limit: lim, Cost: cost}})
				args[2] = "0"
				want, err := runInts(t, s, testTakeScript, keys, append(args, clock))
				if err != nil {
					t.Fatalf("step %d (cost %d): the general path: %v", step, cost, err)
				}
				if lim.Algorithm == admit.FixedWindow && !lim.Aligned {
					checkExpiryToken(t, srv, single, got)
					checkExpiryToken(t, srv, general, want)
					for _, i := range []int{4, 5} { // retry_after, reset_after
						if d := got[i] - want[i]; d < -1000 || d > 1000 {
							t.Fatalf("step %d (cost %d): element %d: single-policy path %v, general path %v", step, cost, i, got, want)
						}
						got[i] = want[i]
					}
					got[6], want[6] = 0, 0
				}
				if !slices.Equal(got, want) {
					t.Fatalf("step %d (cost %d): single-policy path %v; general path %v", step, cost, got, want)
				}
			}
		})
	}
}

// checkExpiryToken fails t unless reply's token is 0 or the key's PEXPIRETIME.
func checkExpiryToken(t *testing.T, srv *redistest.Server, key string, reply []int64) {
	t.Helper()
	if reply[6] == 0 {
		return
	}
	at, err := srv.Do(t, "PEXPIRETIME", key).AsInt64()
	if err != nil || reply[6] != at {
		t.Fatalf("reply %v: token %d; want the key's PEXPIRETIME, %d (%v)", reply, reply[6], at, err)
	}
}

// The single-policy path takes no call it would refuse and no key it finds corrupt: it falls
// through, having written nothing, to the general path, whose module refuses the call (the
// refusals themselves are TestScriptRefusesInvalidArguments', TestCorruptStateIsAnErrorAndLeftAlone's
// and the conformance suite's, which all go through it). It leaves the calls it does not decide to
// the general path too.
func TestSinglePolicyPathFallsThrough(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv.URL())
	clock := strconv.FormatInt(time.Now().UnixMicro(), 10)
	fixed := func(args ...string) []string { return append([]string{"1", "", "", "fixed_window"}, args...) }
	gcra := func(args ...string) []string { return append([]string{"1", "", "", "gcra"}, args...) }
	maxRate := strconv.FormatInt(admit.MaxRate, 10)
	for _, tc := range []struct {
		name  string
		state []string // a command that builds the key's state, KEY for the key
		args  []string
	}{
		{"limit 0", nil, fixed("0", "60000", "1", "0")},
		{"limit 01", nil, fixed("01", "60000", "1", "0")},
		{"limit 1e2", nil, fixed("1e2", "60000", "1", "0")},
		{"limit above MaxRate", nil, fixed(strconv.FormatInt(admit.MaxRate+1, 10), "60000", "1", "0")},
		{"limit of 17 digits", nil, fixed("10000000000000000", "60000", "1", "0")},
		{"window 0x10", nil, fixed("3", "0x10", "1", "0")},
		{"window ' 1'", nil, fixed("3", " 1", "1", "0")},
		{"cost above the limit", nil, fixed("3", "60000", "4", "0")},
		{"cost 1.0", nil, fixed("3", "60000", "1.0", "0")},
		{"aligned 2", nil, fixed("3", "60000", "1", "2")},
		{"an argument more", nil, fixed("3", "60000", "1", "0", "0")},
		{"counter 01", []string{"SET", "KEY", "01", "PX", "60000"}, fixed("3", "60000", "1", "0")},
		{"counter 0", []string{"SET", "KEY", "0", "PX", "60000"}, fixed("3", "60000", "1", "0")},
		{"counter above MaxRate", []string{"SET", "KEY", "1000000000000001", "PX", "60000"}, fixed(maxRate, "60000", "1", "0")},
		{"counter without expiry", []string{"SET", "KEY", "1"}, fixed("3", "60000", "1", "0")},
		{"counter beyond its window", []string{"SET", "KEY", "1", "PX", "60001"}, fixed("3", "60000", "1", "0")},
		{"aligned counter beyond its window", []string{"SET", "KEY", "1", "PX", "3600000"}, fixed("3", "60000", "1", "1")},
		{"counter in a list", []string{"RPUSH", "KEY", "1"}, fixed("3", "60000", "1", "0")},
		{"gcra interval below 1 us", nil, gcra("1000001", "1000", "1", "1")},
		{"gcra interval rounded", nil, gcra("400", "1", "1", "1")},
		{"gcra cost above the burst", nil, gcra("5", "60000", "2", "1")},
		{"gcra burst 0", nil, gcra("5", "60000", "0", "0")},
		{"gcra tolerance too long", nil, gcra("1", strconv.FormatInt(admit.MaxPeriod.Milliseconds(), 10), "1", maxRate)},
		{"tat 1.5", []string{"SET", "KEY", "1.5", "PX", "60000"}, gcra("5", "60000", "1", "4")},
		{"tat without expiry", []string{"SET", "KEY", clock}, gcra("5", "60000", "1", "4")},
		{"tat expiring too late", []string{"SET", "KEY", clock, "PX", "600000"}, gcra("5", "60000", "1", "4")},
		{"tat too far ahead", []string{"SET", "KEY", strconv.FormatInt(time.Now().Add(time.Hour).UnixMicro(), 10), "PX", "40000"}, gcra("5", "60000", "1", "4")},
		{"tat in a hash", []string{"HSET", "KEY", "tat", "1"}, gcra("5", "60000", "1", "4")},
		{"a request ID", nil, []string{"1", "ab", "", "fixed_window", "3", "60000", "1", "0"}},
		{"shadow mode", nil, []string{"1", "", "1", "fixed_window", "3", "60000", "1", "0"}},
		{"two policies", nil, []string{"2", "", "", "fixed_window", "3", "60000", "1", "0", "fixed_window", "3", "60000", "1", "0"}},
		{"sliding window", nil, []string{"1", "", "", "sliding_window", "3", "60000", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := newKey(t)
			if tc.state != nil {
				cmd := slices.Clone(tc.state)
				cmd[slices.Index(cmd, "KEY")] = key
				if err := srv.Do(t, cmd...).Error(); err != nil {
					t.Fatalf("%v: %v", cmd, err)
				}
			}
			before, _ := srv.Do(t, "DUMP", key).ToString()
			keys := []string{key}
			if tc.args[0] == "2" {
				keys = append(keys, key+":2")
			}
			if tc.args[1] != "" {
				keys = append(keys, key+":record")
			}
			reply, err := runInts(t, s, testSingleScript, keys, append(slices.Clone(tc.args), clock))
			if err == nil || !strings.Contains(err.Error(), fellThrough) {
				t.Fatalf("the single-policy path answered %v, %v; want it to fall through", reply, err)
			}
			if after, _ := srv.Do(t, "DUMP", key).ToString(); after != before {
				t.Fatal("the single-policy path wrote before falling through")
			}
		})
	}
}
