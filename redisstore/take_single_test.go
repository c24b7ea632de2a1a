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
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/redistest"
)

// testSingleScript is the take script's single-policy path alone (take_single.lua, as a test
// assembly reads the time from its last argument), with an error reply where the take script goes
// on to the general path: a call it answers was decided by that path, and one it falls through
// from is refused with fellThrough.
var testSingleScript = newScript("take-single-test",
	constants()+gcraConstants()+"local CLOCK_FROM_ARGV = true\n"+takeSingleSrc+"return redis.error_reply('"+fellThrough+"')\n")

const fellThrough = "ADMIT_TEST fell through to the general path"

// testGeneralTakeScript is the take script without its straight paths: the general path alone.
var testGeneralTakeScript = newScript("take-general-test", strings.Replace(assemble(takeSrc, true), takeSingleSrc, "", 1))

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
// peeks and rejections, across window ends and a bucket's refill, in shadow mode and not, on one key
// through the path alone and on another through the general path alone, at the same fixed times,
// gets the same replies. A fixed window that starts at its
// first admission takes its time from the key's expiry, Redis's clock: its retry and reset may differ
// by the milliseconds between the two calls, and its token is the key's own PEXPIRETIME. (A bucket's
// key expires in Redis's own time, PX, whatever the fixed clock: the buckets are slow enough for their
// keys to outlast the test.)
func TestSinglePolicyPathAgreesWithGeneralPath(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	start := time.UnixMilli(1_800_000_000_000 + 59_000) // one second before an aligned minute ends
	for _, lim := range []admit.Limit{
		{Algorithm: admit.FixedWindow, Rate: 5, Period: time.Minute},
		{Algorithm: admit.FixedWindow, Rate: 5, Period: time.Minute, Aligned: true},
		{Algorithm: admit.FixedWindow, Rate: bound.MaxRate, Period: bound.MaxPeriod},
		{Algorithm: admit.GCRA, Rate: 5, Period: time.Minute, Burst: 4},
		{Algorithm: admit.GCRA, Rate: 2, Period: time.Second, Burst: 1},
		{Algorithm: admit.SlidingWindow, Rate: 5, Period: time.Minute},
		{Algorithm: admit.SlidingWindow, Rate: 7, Period: 1500 * time.Millisecond},
		{Algorithm: admit.SlidingWindow, Rate: 1_000_000, Period: time.Hour}, // prev × (w − e) up to 2^52
		{Algorithm: admit.SlidingLog, Rate: 5, Period: time.Second},
		{Algorithm: admit.SlidingLog, Rate: 2500, Period: time.Minute}, // costs of more than one ZADD batch
		{Algorithm: admit.Concurrency, Rate: 3, Period: time.Second},
		{Algorithm: admit.Concurrency, Rate: 1, Period: time.Minute},
	} {
		for _, shadow := range []bool{false, true} {
			lim.Shadow = shadow
			for _, ov := range []string{"", "missing", "set"} {
				testSinglePolicyPath(t, srv, s, start, lim, ov)
			}
		}
	}
}

// pathOverride gives r an override key in its slot when ov is not "", and stores an Override there
// when ov is "set": a larger rate (and for gcra a burst of its own), which r's costs fit.
func pathOverride(t *testing.T, srv *redistest.Server, r *admit.Request, ov string) {
	t.Helper()
	if ov == "" {
		return
	}
	r.OverrideKey = overrideKeyOf("path", r.Key)
	if ov != "set" {
		return
	}
	o := admit.Override{Key: r.OverrideKey, Rate: min(2*r.Limit.Rate, bound.MaxRate)}
	if r.Limit.Algorithm == admit.GCRA {
		o.Rate, o.Burst = r.Limit.Rate+1, r.Limit.Capacity()+3
	}
	if err := srv.Do(t, "SET", o.Key, encodeOverride(o)).Error(); err != nil {
		t.Fatal(err)
	}
}

// testSinglePolicyPath runs TestSinglePolicyPathAgreesWithGeneralPath's sequence under lim.
func testSinglePolicyPath(t *testing.T, srv *redistest.Server, s *Store, start time.Time, lim admit.Limit, ov string) {
	t.Run(fmt.Sprintf("%v_%d_per_%v_aligned_%v_shadow_%v_override_%q", lim.Algorithm, lim.Rate, lim.Period, lim.Aligned, lim.Shadow, ov), func(t *testing.T) {
		single, general := admit.Request{Key: newKey(t), Limit: lim}, admit.Request{Key: newKey(t), Limit: lim}
		pathOverride(t, srv, &single, ov)
		pathOverride(t, srv, &general, ov)
		at := start
		for step, cost := range []int64{1, 0, 3, 2, 1, 0, 5, 1, 4, 0, 3, 2, 0} {
			cost = min(cost, lim.Capacity()) // a larger cost is refused
			if lim.Algorithm == admit.Concurrency {
				cost = min(cost, 1)
			}
			if lim.Rate == 2500 {
				cost *= 500
			}
			if lim.Rate == 1_000_000 {
				cost *= 100_000
			}
			switch step {
			case 5:
				at = at.Add(2 * time.Second) // past the aligned window's end, and a bucket's partial refill
			case 10:
				at = at.Add(lim.Period + lim.Period/3) // a sliding window's count becomes the previous one
			}
			at = at.Add(time.Millisecond)
			clock := strconv.FormatInt(at.UnixMicro(), 10)
			single.Cost, general.Cost = cost, cost
			keys, args := testArgs([]admit.Request{single})
			got, err := runInts(t, s, testSingleScript, keys, append(args, clock))
			if err != nil {
				t.Fatalf("step %d (cost %d): the single-policy path: %v", step, cost, err)
			}
			if n := len(got); ov == "set" && (n != 10 || got[7] != 1) || ov != "set" && n != 7 {
				t.Fatalf("step %d (cost %d): reply %v: an override reported %v", step, cost, got, n == 10)
			}
			keys, args = testArgs([]admit.Request{general})
			want, err := runInts(t, s, testGeneralTakeScript, keys, append(args, clock))
			if err != nil {
				t.Fatalf("step %d (cost %d): the general path: %v", step, cost, err)
			}
			if lim.Algorithm == admit.FixedWindow && !lim.Aligned {
				checkExpiryToken(t, srv, single.Key, got)
				checkExpiryToken(t, srv, general.Key, want)
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

// The path of several policies decides as the general path does, all-or-nothing: the same sequence
// on keys of its own through each (the general path alone), at the same fixed times, gets the same
// replies — admissions, rejections by one policy that the others report as peeks, windows ending,
// buckets refilling, and with the first or the last policy in shadow mode, its rejections that reject
// nothing — and leaves the keys alike.
func TestSeveralPoliciesPathAgreesWithGeneralPath(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	start := time.UnixMilli(1_800_000_000_000 + 59_000)
	for _, lims := range [][]admit.Limit{
		{{Algorithm: admit.FixedWindow, Rate: 4, Period: time.Second, Aligned: true}, {Algorithm: admit.FixedWindow, Rate: 7, Period: time.Minute, Aligned: true}},
		{{Algorithm: admit.FixedWindow, Rate: 7, Period: time.Minute}, {Algorithm: admit.FixedWindow, Rate: 4, Period: time.Second, Aligned: true}, {Algorithm: admit.FixedWindow, Rate: 9, Period: time.Hour}},
		{{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Minute}, {Algorithm: admit.FixedWindow, Rate: 5, Period: time.Minute}, {Algorithm: admit.FixedWindow, Rate: 8, Period: time.Minute}, {Algorithm: admit.FixedWindow, Rate: 2, Period: time.Minute, Aligned: true}},
		{{Algorithm: admit.FixedWindow, Rate: 7, Period: time.Minute}, {Algorithm: admit.SlidingWindow, Rate: 5, Period: time.Minute}, {Algorithm: admit.GCRA, Rate: 5, Period: time.Minute, Burst: 4}},
		{{Algorithm: admit.SlidingWindow, Rate: 4, Period: 1500 * time.Millisecond}, {Algorithm: admit.SlidingWindow, Rate: 6, Period: time.Minute}, {Algorithm: admit.FixedWindow, Rate: 4, Period: time.Second, Aligned: true}},
		{{Algorithm: admit.GCRA, Rate: 2, Period: time.Second, Burst: 2}, {Algorithm: admit.GCRA, Rate: 30, Period: time.Minute, Burst: 5}},
		{{Algorithm: admit.SlidingWindow, Rate: 3, Period: time.Second}, {Algorithm: admit.GCRA, Rate: 4, Period: time.Second, Burst: 4}, {Algorithm: admit.FixedWindow, Rate: 5, Period: time.Minute}, {Algorithm: admit.SlidingWindow, Rate: 9, Period: time.Hour}, {Algorithm: admit.FixedWindow, Rate: 6, Period: time.Minute, Aligned: true}},
	} {
		var name []string
		for _, lim := range lims {
			name = append(name, lim.Algorithm.String())
		}
		for _, shadow := range []int{-1, 0, len(lims) - 1} { // the policy in shadow mode, if any
			lims := slices.Clone(lims)
			if shadow >= 0 {
				lims[shadow].Shadow = true
			}
			for _, ov := range []string{"", "missing", "set"} {
				testSeveralPoliciesPath(t, srv, s, start, strings.Join(name, "+")+"/shadow_"+strconv.Itoa(shadow)+"/override_"+strconv.Quote(ov), lims, ov)
			}
		}
	}
}

// testSeveralPoliciesPath runs TestSeveralPoliciesPathAgreesWithGeneralPath's sequence under lims.
// With ov "missing" every policy has an override key and none an Override; with "set", the even
// policies have an Override (pathOverride's), the odd ones an override key only.
func testSeveralPoliciesPath(t *testing.T, srv *redistest.Server, s *Store, start time.Time, name string, lims []admit.Limit, ov string) {
	t.Run(name, func(t *testing.T) {
		var sets [2][]string
		for i := range sets {
			slot := newKey(t)
			for p := range lims {
				sets[i] = append(sets[i], slot+":p"+strconv.Itoa(p))
			}
		}
		at := start
		for step, cost := range []int64{1, 0, 2, 1, 3, 0, 1, 2, 1, 1, 0} {
			for _, lim := range lims {
				cost = min(cost, lim.Rate) // a larger cost is refused
			}
			if step == 5 {
				at = at.Add(1500 * time.Millisecond) // past the aligned second's and minute's ends
			}
			at = at.Add(time.Millisecond)
			clock := strconv.FormatInt(at.UnixMicro(), 10)
			var replies [2][]int64
			for i, sc := range []*script{testSingleScript, testGeneralTakeScript} {
				rs := make([]admit.Request, len(lims))
				for p := range lims {
					rs[p] = admit.Request{Key: sets[i][p], Limit: lims[p], Cost: cost}
					if ov != "" {
						rs[p].OverrideKey = overrideKeyOf("path"+strconv.Itoa(p), rs[p].Key)
					}
					if ov == "set" && p%2 == 0 && step == 0 {
						o := admit.Override{Key: rs[p].OverrideKey, Rate: lims[p].Rate + 2, Burst: lims[p].Capacity() + 1}
						if err := srv.Do(t, "SET", o.Key, encodeOverride(o)).Error(); err != nil {
							t.Fatal(err)
						}
					}
				}
				keys, args := testArgs(rs)
				var err error
				if replies[i], err = runInts(t, s, sc, keys, append(args, clock)); err != nil {
					t.Fatalf("step %d (cost %d) through %s: %v", step, cost, sc.name, err)
				}
			}
			got, want := replies[0], replies[1]
			if n := 2 + 5*len(lims) + 3*((len(lims)+1)/2); ov == "set" && len(got) != n {
				t.Fatalf("step %d: reply %v; want %d elements, the even policies overridden", step, got, n)
			}
			for p, lim := range lims {
				at := 2 + 5*p
				if lim.Algorithm != admit.FixedWindow || lim.Aligned {
					continue
				}
				checkExpiryToken(t, srv, sets[0][p], got[at-2:])
				checkExpiryToken(t, srv, sets[1][p], want[at-2:])
				for _, i := range []int{at + 2, at + 3} { // retry_after, reset_after
					if d := got[i] - want[i]; d < -1000 || d > 1000 {
						t.Fatalf("step %d (cost %d): element %d: the path of several %v, the general path %v", step, cost, i, got, want)
					}
					got[i] = want[i]
				}
				got[at+4], want[at+4] = 0, 0
			}
			if !slices.Equal(got, want) {
				t.Fatalf("step %d (cost %d): the path of several %v; the general path %v", step, cost, got, want)
			}
			for p := range lims {
				a, _ := srv.Do(t, "DUMP", sets[0][p]).ToString()
				b, _ := srv.Do(t, "DUMP", sets[1][p]).ToString()
				if a != b {
					t.Fatalf("step %d: policy %d: the path of several left %q, the general path %q", step, p, a, b)
				}
			}
		}
	})
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
	s := openPatient(t, srv.URL())
	now := time.Now()
	clock := strconv.FormatInt(now.UnixMicro(), 10)
	hourStart := strconv.FormatInt(now.Truncate(time.Hour).UnixMilli(), 10) // the sliding window's, at clock
	fixed := func(args ...string) []string { return append([]string{"1", "", "", "fixed_window"}, args...) }
	gcra := func(args ...string) []string { return append([]string{"1", "", "", "gcra"}, args...) }
	conc := func(args ...string) []string { return append([]string{"1", "", "", "concurrency"}, args...) }
	slog := func(args ...string) []string { return append([]string{"1", "", "", "sliding_log"}, args...) }
	maxRate := strconv.FormatInt(bound.MaxRate, 10)
	for _, tc := range []struct {
		name  string
		state []string // a command that builds the key's state, KEY for the key
		args  []string
	}{
		{"limit 0", nil, fixed("0", "60000", "1", "0")},
		{"limit 01", nil, fixed("01", "60000", "1", "0")},
		{"limit 1e2", nil, fixed("1e2", "60000", "1", "0")},
		{"limit above MaxRate", nil, fixed(strconv.FormatInt(bound.MaxRate+1, 10), "60000", "1", "0")},
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
		{"counter beyond its window", []string{"SET", "KEY", "1", "PX", "120000"}, fixed("3", "60000", "1", "0")},
		{"aligned counter beyond its window", []string{"SET", "KEY", "1", "PX", "3600000"}, fixed("3", "60000", "1", "1")},
		{"counter in a list", []string{"RPUSH", "KEY", "1"}, fixed("3", "60000", "1", "0")},
		{"gcra interval below 1 us", nil, gcra("1000001", "1000", "1", "1")},
		{"gcra interval rounded", nil, gcra("400", "1", "1", "1")},
		{"gcra cost above the burst", nil, gcra("5", "60000", "2", "1")},
		{"gcra burst 0", nil, gcra("5", "60000", "0", "0")},
		{"gcra tolerance too long", nil, gcra("1", strconv.FormatInt(bound.MaxPeriod.Milliseconds(), 10), "1", maxRate)},
		{"tat 1.5", []string{"SET", "KEY", "1.5", "PX", "60000"}, gcra("5", "60000", "1", "4")},
		{"tat without expiry", []string{"SET", "KEY", clock}, gcra("5", "60000", "1", "4")},
		{"tat expiring too late", []string{"SET", "KEY", clock, "PX", "600000"}, gcra("5", "60000", "1", "4")},
		{"tat too far ahead", []string{"SET", "KEY", strconv.FormatInt(time.Now().Add(time.Hour).UnixMicro(), 10), "PX", "40000"}, gcra("5", "60000", "1", "4")},
		{"tat in a hash", []string{"HSET", "KEY", "tat", "1"}, gcra("5", "60000", "1", "4")},
		{"a request ID", nil, []string{"1", "ab", "", "fixed_window", "3", "60000", "1", "0"}},
		{"shadow mask 2", nil, []string{"1", "", "2", "fixed_window", "3", "60000", "1", "0"}},
		{"shadow mask of two for one policy", nil, []string{"1", "", "11", "fixed_window", "3", "60000", "1", "0"}},
		{"two policies, a mask of one 4", []string{"SET", "KEY:2", "1", "PX", "60000"}, []string{"2", "", "4", "fixed_window", "3", "60000", "1", "0", "fixed_window", "3", "60000", "1", "0"}},
		{"two policies, a mask of one 2 without their override keys", nil, []string{"2", "", "2", "fixed_window", "3", "60000", "1", "0", "fixed_window", "3", "60000", "1", "0"}},
		{"two policies, a mask 22 and one override key", nil, []string{"2", "", "22", "fixed_window", "3", "60000", "1", "0", "fixed_window", "3", "60000", "1", "0"}},
		{"override corrupt", []string{"SET", "KEY:o", "05 0 0 r"}, []string{"1", "", "2", "fixed_window", "3", "60000", "1", "0"}},
		{"override in a hash", []string{"HSET", "KEY:o", "a", "1"}, []string{"1", "", "2", "gcra", "5", "60000", "1", "4"}},
		{"override rate above the sliding log's", []string{"SET", "KEY:o", "20000 0 0 r"}, []string{"1", "", "2", "sliding_log", "3", "60000", "1"}},
		{"override burst below the cost", []string{"SET", "KEY:o", "5 1 0 r"}, []string{"1", "", "2", "gcra", "5", "60000", "2", "4"}},
		{"override key with a mask 0", []string{"SET", "KEY:o", "5 0 0 r"}, []string{"1", "", "0", "fixed_window", "3", "60000", "1", "0"}},
		{"two policies, an override corrupt", []string{"SET", "KEY:o", "5 0 0"}, []string{"2", "", "02", "fixed_window", "3", "60000", "1", "0", "sliding_window", "3", "60000", "1"}},
		{"two policies, a shadow mask 1x", nil, []string{"2", "", "1x", "fixed_window", "3", "60000", "1", "0", "fixed_window", "3", "60000", "1", "0"}},
		{"two policies, one a sliding log", nil, []string{"2", "", "", "fixed_window", "3", "60000", "1", "0", "sliding_log", "3", "60000", "1"}},
		{"two policies, the second corrupt", []string{"HSET", "KEY:2", "start", "0"}, []string{"2", "", "", "gcra", "5", "60000", "1", "4", "sliding_window", "3", "60000", "1"}},
		{"two policies, an argument short", nil, []string{"2", "", "", "gcra", "5", "60000", "1", "4", "sliding_window", "3", "60000"}},
		{"two fixed windows, one invalid", nil, []string{"2", "", "", "fixed_window", "3", "60000", "1", "0", "fixed_window", "3", "60000", "4", "0"}},
		{"two fixed windows, a key short", nil, []string{"2", "", "", "fixed_window", "3", "60000", "1", "0", "fixed_window", "3", "60000", "1", "0"}},
		{"two fixed windows, 02", nil, []string{"02", "", "", "fixed_window", "3", "60000", "1", "0", "fixed_window", "3", "60000", "1", "0"}},
		{"sliding window limit 1.5", nil, []string{"1", "", "", "sliding_window", "1.5", "60000", "1"}},
		{"sliding window cost above the limit", nil, []string{"1", "", "", "sliding_window", "3", "60000", "4"}},
		{"sliding window in a string", []string{"SET", "KEY", "1", "PX", "60000"}, []string{"1", "", "", "sliding_window", "3", "60000", "1"}},
		{"sliding window of two fields", []string{"HSET", "KEY", "start", "0", "curr", "1"}, []string{"1", "", "", "sliding_window", "3", "60000", "1"}},
		{"sliding window of another field", []string{"HSET", "KEY", "start", "0", "curr", "1", "next", "0"}, []string{"1", "", "", "sliding_window", "3", "60000", "1"}},
		{"sliding window curr 0", []string{"HSET", "KEY", "start", "0", "curr", "0", "prev", "0"}, []string{"1", "", "", "sliding_window", "3", "60000", "1"}},
		{"sliding window prev 01", []string{"HSET", "KEY", "start", "0", "curr", "1", "prev", "01"}, []string{"1", "", "", "sliding_window", "3", "60000", "1"}},
		{"sliding window start off the grid", []string{"HSET", "KEY", "start", "1000", "curr", "1", "prev", "0"}, []string{"1", "", "", "sliding_window", "3", "60000", "1"}},
		{"sliding window start ahead", []string{"HSET", "KEY", "start", strconv.FormatInt(aheadStart(time.Minute)/1000+120_000, 10), "curr", "1", "prev", "0"}, []string{"1", "", "", "sliding_window", "3", "60000", "1"}},
		{"sliding window without expiry", []string{"HSET", "KEY", "start", "0", "curr", "1", "prev", "0"}, []string{"1", "", "", "sliding_window", "3", "60000", "1"}},
		{"sliding window prev x (w - e) above 2^52", []string{"HSET", "KEY", "start", hourStart, "curr", "1", "prev", "1000000000000"},
			[]string{"1", "", "", "sliding_window", "1000000000000000", "3600000", "1"}},
		{"sliding log limit above MaxSlidingLogRate", nil, slog(strconv.FormatInt(bound.MaxSlidingLogRate+1, 10), "60000", "1")},
		{"sliding log cost 1e0", nil, slog("3", "60000", "1e0")},
		{"log in a hash", []string{"HSET", "KEY", "a", "1"}, slog("3", "60000", "1")},
		{"log entry not <t>:<seq>", []string{"ZADD", "KEY", "1000", "1000"}, slog("3", "60000", "1")},
		{"log entry of another time", []string{"ZADD", "KEY", "1000", "1001:1"}, slog("3", "60000", "1")},
		{"log entry :0", []string{"ZADD", "KEY", "1000", "1000:0"}, slog("3", "60000", "1")},
		{"log entry ahead", []string{"ZADD", "KEY", "9000000000000000", "9000000000000000:1"}, slog("3", "60000", "1")},
		{"log without expiry", []string{"ZADD", "KEY", "1000", "1000:1"}, slog("3", "60000", "1")},
		{"concurrency cost 2", nil, conc("3", "60000", "2", "12345")},
		{"concurrency token 0 for cost 1", nil, conc("3", "60000", "1", "0")},
		{"concurrency token for cost 0", nil, conc("3", "60000", "0", "12345")},
		{"concurrency token above 2^64", nil, conc("3", "60000", "1", "18446744073709551616")},
		{"concurrency limit above MaxConcurrency", nil, conc(strconv.FormatInt(bound.MaxConcurrency+1, 10), "60000", "1", "12345")},
		{"leases in a string", []string{"SET", "KEY", "1", "PX", "60000"}, conc("3", "60000", "1", "12345")},
		{"lease not a token", []string{"ZADD", "KEY", clock, "abc"}, conc("3", "60000", "1", "12345")},
		{"lease scored 1.5", []string{"ZADD", "KEY", "1.5", "123"}, conc("3", "60000", "1", "12345")},
		{"lease scored too far ahead", []string{"ZADD", "KEY", "9000000000000000", "123"}, conc("3", "60000", "1", "12345")},
		{"leases without expiry", []string{"ZADD", "KEY", clock, "123"}, conc("3", "60000", "1", "12345")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := newKey(t)
			if tc.state != nil {
				cmd := slices.Clone(tc.state)
				for i := range cmd {
					if strings.HasPrefix(cmd[i], "KEY") { // KEY is the key, KEY:2 the second policy's
						cmd[i] = key + cmd[i][3:]
					}
				}
				if err := srv.Do(t, cmd...).Error(); err != nil {
					t.Fatalf("%v: %v", cmd, err)
				}
				if (cmd[0] == "HSET" || cmd[0] == "ZADD") && !strings.HasSuffix(tc.name, "without expiry") { // written with an expiry
					srv.Do(t, "PEXPIRE", key, "3600000")
				}
			}
			before, _ := srv.Do(t, "DUMP", key).ToString()
			keys := []string{key}
			if tc.args[0] == "2" && !strings.HasSuffix(tc.name, "a key short") || tc.args[0] == "02" {
				keys = append(keys, key+":2")
			}
			if strings.Contains(tc.name, "override") {
				keys = append(keys, key+":o")
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

// testSettleStraightScript is the settle script's straight path alone (settle_single.lua), as
// testSingleScript is the take script's; testSettleGeneralScript is the settle script without it.
var (
	testSettleStraightScript = newScript("settle-straight-test",
		constants()+gcraConstants()+"local CLOCK_FROM_ARGV = true\n"+settleSingleSrc+"return redis.error_reply('"+fellThrough+"')\n")
	testSettleGeneralScript = newScript("settle-general-test", strings.Replace(assemble(settleSrc, true), settleSingleSrc, "", 1))
)

// The settle script's straight path settles as the general path does: on two keys taken alike, a
// sequence of refunds (partial, whole, of a window or bucket since past, with token 0), overruns that
// fit and overruns that do not, each key settling its own reservations, gets the same replies, and
// leaves the keys alike. A fixed window from the first admission reads Redis's clock through its
// TTL: its retry and reset may differ by the milliseconds between the two calls.
func TestSettleStraightPathAgreesWithGeneralPath(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	start := time.UnixMilli(1_800_000_000_000 + 59_000)
	for _, lim := range []admit.Limit{
		{Algorithm: admit.FixedWindow, Rate: 6, Period: time.Minute},
		{Algorithm: admit.FixedWindow, Rate: 6, Period: time.Minute, Aligned: true},
		{Algorithm: admit.GCRA, Rate: 6, Period: time.Minute, Burst: 6},
		{Algorithm: admit.GCRA, Rate: 100, Period: time.Minute, Burst: 3},
		{Algorithm: admit.SlidingWindow, Rate: 6, Period: time.Minute},
		{Algorithm: admit.SlidingWindow, Rate: 5, Period: 1500 * time.Millisecond},
		{Algorithm: admit.SlidingWindow, Rate: 4, Period: time.Second},
		{Algorithm: admit.SlidingLog, Rate: 6, Period: time.Minute},
		{Algorithm: admit.SlidingLog, Rate: 5, Period: 1500 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("%v_%d_per_%v_aligned_%v", lim.Algorithm, lim.Rate, lim.Period, lim.Aligned), func(t *testing.T) {
			keys := [2]string{newKey(t), newKey(t)}
			scripts := [2]*script{testSettleStraightScript, testSettleGeneralScript}
			var old [2]uint64 // a token of the first reservation, settled again later
			var last [2]admit.Reservation
			at := start
			for step, tc := range []struct {
				reserved, actual int64
				token            int     // 0: the reservation's own, 1: token 0, 2: the first reservation's
				later            float64 // periods of the limit to wait first
				again            bool    // settle the last reservation again, without a take
			}{
				{2, 1, 0, 0, false}, {2, 3, 0, 0, false}, {1, 9, 0, 0, false}, {1, 0, 0, 0, false}, {2, 0, 1, 0, false},
				{1, 0, 0, 1, false}, // a reservation refunded whole in the next window
				{2, 1, 2, 0, false}, {1, 5, 0, 0, false}, {1, 1, 0, 0, false},
				{1, 0, 0, 1, true}, // refunded a window later
				{1, 3, 0, 1, true}, // an overrun in a window since started
				{2, 1, 0, 0.5, false}, {1, 0, 0, 2.5, true}, {1, 4, 0, 0, true},
			} {
				at = at.Add(time.Duration(tc.later*float64(lim.Period)) + time.Millisecond)
				clock := strconv.FormatInt(at.UnixMicro(), 10)
				reserved := min(tc.reserved, lim.Capacity())
				var replies [2][]int64
				for i, key := range keys {
					if !tc.again {
						r := admit.Request{Key: key, Limit: lim, Cost: reserved}
						ks, args := testArgs([]admit.Request{r})
						took, err := runInts(t, s, testTakeScript, ks, append(args, clock))
						if err != nil {
							t.Fatalf("step %d: take: %v", step, err)
						}
						token := uint64(took[6])
						if step == 0 {
							old[i] = token
						}
						switch {
						case tc.token == 1:
							token = 0
						case tc.token == 2 || took[0] == 0:
							token = old[i] // a reservation of a window or bucket since past (or rejected: nothing to settle)
						}
						last[i] = admit.Reservation{Request: r, Token: token}
					}
					ks, args := settleArgs(&last[i], tc.actual)
					var err error
					replies[i], err = runInts(t, s, scripts[i], ks, append(args, clock))
					if err != nil {
						t.Fatalf("step %d: settle through %s: %v", step, scripts[i].name, err)
					}
				}
				got, want := replies[0], replies[1]
				if lim.Algorithm == admit.FixedWindow && !lim.Aligned {
					for _, i := range []int{2, 3} { // retry_after, reset_after
						if d := got[i] - want[i]; d < -1000 || d > 1000 {
							t.Fatalf("step %d: element %d: straight path %v, general path %v", step, i, got, want)
						}
						got[i] = want[i]
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("step %d (reserved %d, actual %d): straight path %v; general path %v", step, reserved, tc.actual, got, want)
				}
				a, _ := srv.Do(t, "DUMP", keys[0]).ToString()
				b, _ := srv.Do(t, "DUMP", keys[1]).ToString()
				if a != b {
					t.Fatalf("step %d: the straight path left %q, the general path %q", step, a, b)
				}
			}
		})
	}
}

// The settle script's straight path falls through, having written nothing, on every argument and
// stored state it would refuse, and on the algorithms it leaves to the general path.
func TestSettleStraightPathFallsThrough(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	now := time.Now()
	clock := strconv.FormatInt(now.UnixMicro(), 10)
	hourStart := strconv.FormatInt(now.Truncate(time.Hour).UnixMilli(), 10) // the sliding window's, at clock
	fixed := func(args ...string) []string { return append([]string{"fixed_window"}, args...) }
	gcra := func(args ...string) []string { return append([]string{"gcra"}, args...) }
	for _, tc := range []struct {
		name  string
		state []string
		args  []string
	}{
		{"reserved 0", nil, fixed("3", "60000", "0", "0", "0", "1")},
		{"reserved above the limit", nil, fixed("3", "60000", "4", "0", "0", "1")},
		{"limit 03", nil, fixed("03", "60000", "1", "0", "0", "1")},
		{"window 6e4", nil, fixed("3", "6e4", "1", "0", "0", "1")},
		{"token 01", nil, fixed("3", "60000", "1", "0", "01", "1")},
		{"token above MaxTAT", nil, fixed("3", "60000", "1", "0", "9007199254740992", "1")},
		{"actual -1", nil, fixed("3", "60000", "1", "0", "0", "-1")},
		{"actual above MaxRate", nil, fixed("3", "60000", "1", "0", "0", "1000000000000001")},
		{"aligned 2", nil, fixed("3", "60000", "1", "2", "0", "1")},
		{"an argument less", nil, fixed("3", "60000", "1", "0", "0")},
		{"counter 1.5", []string{"SET", "KEY", "1.5", "PX", "60000"}, fixed("3", "60000", "1", "0", "0", "1")},
		{"counter without expiry", []string{"SET", "KEY", "1"}, fixed("3", "60000", "1", "0", "0", "1")},
		{"aligned counter beyond its window", []string{"SET", "KEY", "1", "PX", "3600000"}, fixed("3", "60000", "1", "1", "0", "1")},
		{"counter in a set", []string{"SADD", "KEY", "1"}, fixed("3", "60000", "1", "0", "0", "1")},
		{"gcra reserved above the burst", nil, gcra("5", "60000", "5", "4", "0", "1")},
		{"gcra interval rounded", nil, gcra("400", "1", "1", "1", "0", "1")},
		{"tat 00", []string{"SET", "KEY", "00", "PX", "60000"}, gcra("5", "60000", "1", "4", "0", "1")},
		{"tat expiring too late", []string{"SET", "KEY", clock, "PX", "600000"}, gcra("5", "60000", "1", "4", "0", "1")},
		{"sliding log limit above MaxSlidingLogRate", nil, []string{"sliding_log", "10001", "60000", "1", "0", "1"}},
		{"log entry of another time", []string{"ZADD", "KEY", "1000", "1001:1"}, []string{"sliding_log", "3", "60000", "1", "0", "1"}},
		{"log without expiry", []string{"ZADD", "KEY", "1000", "1000:1"}, []string{"sliding_log", "3", "60000", "1", "0", "1"}},
		{"concurrency", nil, []string{"concurrency", "3", "60000", "1", "0", "1"}},
		{"sliding window an argument more", nil, []string{"sliding_window", "3", "60000", "1", "0", "0", "1"}},
		{"sliding window reserved 0", nil, []string{"sliding_window", "3", "60000", "0", "0", "1"}},
		{"sliding window curr 0", []string{"HSET", "KEY", "start", "0", "curr", "0", "prev", "0"}, []string{"sliding_window", "3", "60000", "1", "0", "1"}},
		{"sliding window without expiry", []string{"HSET", "KEY", "start", "0", "curr", "1", "prev", "0"}, []string{"sliding_window", "3", "60000", "1", "0", "1"}},
		{"sliding window prev x w above 2^52", []string{"HSET", "KEY", "start", hourStart, "curr", "1", "prev", "1000000000000"},
			[]string{"sliding_window", "1000000000000000", "3600000", "1", "0", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := newKey(t)
			if tc.state != nil {
				cmd := slices.Clone(tc.state)
				cmd[slices.Index(cmd, "KEY")] = key
				if err := srv.Do(t, cmd...).Error(); err != nil {
					t.Fatalf("%v: %v", cmd, err)
				}
				if (cmd[0] == "HSET" || cmd[0] == "ZADD") && !strings.HasSuffix(tc.name, "without expiry") { // written with an expiry
					srv.Do(t, "PEXPIRE", key, "3600000")
				}
			}
			before, _ := srv.Do(t, "DUMP", key).ToString()
			reply, err := runInts(t, s, testSettleStraightScript, []string{key}, append(slices.Clone(tc.args), clock))
			if err == nil || !strings.Contains(err.Error(), fellThrough) {
				t.Fatalf("the straight path answered %v, %v; want it to fall through", reply, err)
			}
			if after, _ := srv.Do(t, "DUMP", key).ToString(); after != before {
				t.Fatal("the straight path wrote before falling through")
			}
		})
	}
}
