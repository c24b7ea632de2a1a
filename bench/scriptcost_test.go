package bench

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"

	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/luasource"
	"github.com/admit-dev/admit/internal/redistest"
	_ "github.com/admit-dev/admit/redisstore" // registers the Lua sources
)

// The ScriptCost group measures the Redis server's CPU per decision of every script entry point
// (issue 13): each series calls its entry point by pipelined EVALSHA on many live keys, in chunks,
// and after every chunk of it calls the minimal fixed-window script (testdata/minimal_fixed_window.lua)
// as many times on keys of its own, so that each figure and its reference are measured in the same
// moments of one run, whatever else loads the machine. Reported per call:
//
//	redis-cpu-us/op        the µs EVALSHA spent in Redis (INFO commandstats, usec), this series
//	ref-redis-cpu-us/op    the same of the minimal script, interleaved with it
//	x-minimal              the ratio of the two: the figure issue 13 holds to 1.1 per policy
//	x-minimal/policy       that ratio over the number of policies the call decides
//	redis-proc-cpu-us/op   the Redis process's user+system CPU (INFO cpu), I/O included
//	x-minimal-proc-cpu     the ratio of those: CPU time, not wall time, so less noisy on a busy machine
//	                       (commandstats' usec is wall time inside the command: preemption counts)
//	B/key                  MEMORY USAGE … SAMPLES 0 of a key the series left, for a take
//
// Reproduce (BENCHMARKS.md, the script-cost section):
//
//	cd bench && ADMIT_REQUIRE_REDIS=1 go test -run '^$' -bench ScriptCost -benchtime 20000x -count 3 .

// scriptChunk is the number of calls pipelined between two reads of the statistics, in batches of
// scriptBatch (as redis-benchmark -P 16 pipelines).
const (
	scriptChunk = 512
	scriptBatch = 16
	scriptKeys  = 4096
)

// A scriptCase is one series: calls of an entry point on scriptKeys keys, call i on key i % scriptKeys.
type scriptCase struct {
	name     string
	entry    string // take, settle or release
	policies int
	// setup, if not nil, gives the take call that prepares call i (a reservation to settle, a
	// lease to release); its reply is passed to call. It is not measured.
	setup func(i int) (keys, args []string)
	// call gives the measured call i; prep is setup's reply, as integers, or nil.
	call func(i int, prep []int64) (keys, args []string)
	// memory names the key whose MEMORY USAGE the series reports, or "".
	memory string
}

func scKey(i int, part string) string {
	return "rl:sc:{" + strconv.Itoa(i%scriptKeys) + "}" + part
}

// takeCall returns the KEYS and ARGV of a take of one policy per algorithm argument list in pols,
// each on its own key of call i.
func takeCall(i int, pols ...[]string) (keys, args []string) {
	args = []string{strconv.Itoa(len(pols)), "", ""}
	for p, pol := range pols {
		keys = append(keys, scKey(i, ":"+strconv.Itoa(p)))
		args = append(args, pol...)
	}
	return keys, args
}

var (
	maxRate   = strconv.FormatInt(bound.MaxRate, 10)
	fixedPol  = []string{"fixed_window", maxRate, "3600000", "1", "0"}
	alignPol  = []string{"fixed_window", maxRate, "3600000", "1", "1"}
	dayPol    = []string{"fixed_window", maxRate, "86400000", "1", "0"}
	slidePol  = []string{"sliding_window", maxRate, "3600000", "1"}
	logPol    = []string{"sliding_log", strconv.FormatInt(bound.MaxSlidingLogRate, 10), "3600000", "1"}
	gcraPol   = []string{"gcra", "1000", "3600000", "1", "1000000"} // 3.6 s a unit: keys stay live
	leaseTTL  = "3600000"
	leaseRate = strconv.FormatInt(bound.MaxConcurrency, 10)
)

// leasePol is a concurrency policy that acquires the lease token.
func leasePol(token int) []string {
	return []string{"concurrency", leaseRate, leaseTTL, "1", strconv.Itoa(token)}
}

// settleCase settles, on call i, a reservation of 2 units of pol (cost 2 in place of pol's 1) at
// an actual cost of 1: a refund of one unit, with the token its take reported.
func settleCase(alg string, pol []string) scriptCase {
	reserve := func() []string {
		p := append([]string(nil), pol...)
		p[3] = "2"
		return p
	}()
	return scriptCase{name: "Settle/alg=" + alg, entry: "settle", policies: 1,
		setup: func(i int) ([]string, []string) { return takeCall(i, reserve) },
		call: func(i int, prep []int64) ([]string, []string) {
			keys, _ := takeCall(i, reserve)
			return keys, append(append([]string(nil), reserve...), strconv.FormatInt(prep[6], 10), "1")
		},
	}
}

var scriptCases = []scriptCase{
	{name: "Take/alg=fixed_window", entry: "take", policies: 1, memory: scKey(0, ":0"),
		call: func(i int, _ []int64) ([]string, []string) { return takeCall(i, fixedPol) }},
	{name: "Take/alg=fixed_window_aligned", entry: "take", policies: 1, memory: scKey(0, ":0"),
		call: func(i int, _ []int64) ([]string, []string) { return takeCall(i, alignPol) }},
	{name: "Take/alg=sliding_window", entry: "take", policies: 1, memory: scKey(0, ":0"),
		call: func(i int, _ []int64) ([]string, []string) { return takeCall(i, slidePol) }},
	{name: "Take/alg=sliding_log", entry: "take", policies: 1, memory: scKey(0, ":0"),
		call: func(i int, _ []int64) ([]string, []string) { return takeCall(i, logPol) }},
	{name: "Take/alg=gcra", entry: "take", policies: 1, memory: scKey(0, ":0"),
		call: func(i int, _ []int64) ([]string, []string) { return takeCall(i, gcraPol) }},
	{name: "Take/alg=concurrency", entry: "take", policies: 1, memory: scKey(0, ":0"),
		call: func(i int, _ []int64) ([]string, []string) { return takeCall(i, leasePol(i+1)) }},
	{name: "Take/policies=2", entry: "take", policies: 2,
		call: func(i int, _ []int64) ([]string, []string) { return takeCall(i, fixedPol, dayPol) }},
	{name: "Take/policies=3", entry: "take", policies: 3,
		call: func(i int, _ []int64) ([]string, []string) { return takeCall(i, fixedPol, slidePol, gcraPol) }},
	{name: "Release", entry: "release", policies: 1,
		setup: func(i int) ([]string, []string) { return takeCall(i, leasePol(i+1)) },
		call: func(i int, _ []int64) ([]string, []string) {
			return []string{scKey(i, ":0")}, []string{strconv.Itoa(i + 1)}
		}},
	settleCase("fixed_window", fixedPol),
	settleCase("sliding_window", slidePol),
	settleCase("sliding_log", logPol),
	settleCase("gcra", gcraPol),
}

// BenchmarkScriptCost_ReferenceMinimalFixedWindow is the group's reference: the minimal
// fixed-window script alone, on live keys.
func BenchmarkScriptCost_ReferenceMinimalFixedWindow(b *testing.B) {
	r := newScriptRunner(b)
	r.warm(r.minimal, minimalCall)
	var cost scriptCost
	for done := 0; done < b.N; done += scriptChunk {
		n := min(scriptChunk, b.N-done)
		cost.add(r.measure(r.minimal, done, n, minimalCall, nil))
	}
	cost.report(b, "", 1)
}

func minimalCall(i int, _ []int64) ([]string, []string) {
	return []string{"rl:ref:{" + strconv.Itoa(i%scriptKeys) + "}"}, []string{maxRate, "3600000", "1"}
}

// BenchmarkScriptCost_Entry measures every entry point against the minimal script; see the group's
// comment above.
func BenchmarkScriptCost_Entry(b *testing.B) {
	for _, sc := range scriptCases {
		b.Run(sc.name, func(b *testing.B) {
			r := newScriptRunner(b)
			src, ok := luasource.Lookup(sc.entry)
			if !ok {
				b.Fatalf("redisstore has no %q script", sc.entry)
			}
			script := r.load(src)
			take := r.load(mustScript(b, "take"))
			r.warm(r.minimal, minimalCall)
			if sc.setup == nil { // the measured calls find live keys, as the reference's do
				r.warm(script, sc.call)
			}
			var cost, ref scriptCost
			for done := 0; done < b.N; done += scriptChunk {
				n := min(scriptChunk, b.N-done)
				var prep [][]int64
				if sc.setup != nil {
					prep = r.run(take, done, n, func(i int, _ []int64) ([]string, []string) { return sc.setup(i) }, nil)
				}
				cost.add(r.measure(script, done, n, sc.call, prep))
				ref.add(r.measure(r.minimal, done, n, minimalCall, nil))
			}
			cost.report(b, "", sc.policies)
			ref.report(b, "ref-", 0)
			ratio := cost.perCall() / ref.perCall()
			b.ReportMetric(ratio, "x-minimal")
			b.ReportMetric(ratio/float64(sc.policies), "x-minimal/policy")
			b.ReportMetric(cost.cpu/ref.cpu, "x-minimal-proc-cpu") // the same number of calls each
			if sc.memory != "" {
				bytes, err := r.srv.Do(b, "MEMORY", "USAGE", sc.memory, "SAMPLES", "0").AsInt64()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(bytes), "B/key")
			}
		})
	}
}

func mustScript(b *testing.B, name string) string {
	src, ok := luasource.Lookup(name)
	if !ok {
		b.Fatalf("redisstore has no %q script", name)
	}
	return src
}

// A scriptRunner drives scripts on one harness-started Redis.
type scriptRunner struct {
	b       *testing.B
	srv     *redistest.Server
	c       rueidis.Client
	minimal string // the minimal script's SHA
}

func newScriptRunner(b *testing.B) *scriptRunner {
	b.Helper()
	srv := redistest.Start(b)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	r := &scriptRunner{b: b, srv: srv, c: c}
	src, err := os.ReadFile("testdata/minimal_fixed_window.lua")
	if err != nil {
		b.Fatal(err)
	}
	r.minimal = r.load(string(src))
	return r
}

func (r *scriptRunner) load(src string) string {
	sha, err := r.c.Do(context.Background(), r.c.B().ScriptLoad().Script(src).Build()).ToString()
	if err != nil {
		r.b.Fatal(err)
	}
	return sha
}

// warm calls sha once on every key, so that measured calls find live state.
func (r *scriptRunner) warm(sha string, call func(int, []int64) ([]string, []string)) {
	r.run(sha, 1<<30, scriptKeys, call, nil) // indices far from the measured ones: lease tokens differ
}

// run calls sha for i in from … from+n−1, pipelined in batches, and returns each reply's integers
// (nil for an integer reply). Any error or a rejection (a first integer 0) fails the benchmark:
// every series measures the admitting path.
func (r *scriptRunner) run(sha string, from, n int, call func(int, []int64) ([]string, []string), prep [][]int64) [][]int64 {
	ctx := context.Background()
	out := make([][]int64, 0, n)
	cmds := make(rueidis.Commands, 0, scriptBatch)
	for at := 0; at < n; at += scriptBatch {
		cmds = cmds[:0]
		for j := at; j < min(at+scriptBatch, n); j++ {
			var p []int64
			if prep != nil {
				p = prep[j]
			}
			keys, args := call(from+j, p)
			cmds = append(cmds, r.c.B().Evalsha().Sha1(sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
		}
		for _, res := range r.c.DoMulti(ctx, cmds...) {
			msg, err := res.ToMessage()
			if err != nil {
				r.b.Fatal(err)
			}
			if !msg.IsArray() {
				if v, err := msg.AsInt64(); err != nil || v != 1 {
					r.b.Fatalf("reply %v, %v: want 1", v, err)
				}
				out = append(out, nil)
				continue
			}
			arr, err := msg.AsIntSlice()
			if err != nil || len(arr) == 0 || arr[0] != 1 {
				r.b.Fatalf("reply %v, %v: want an admission", arr, err)
			}
			out = append(out, arr)
		}
	}
	return out
}

// measure runs n calls as run does, between two reads of the server's statistics, and returns
// what they cost.
func (r *scriptRunner) measure(sha string, from, n int, call func(int, []int64) ([]string, []string), prep [][]int64) scriptCost {
	r.srv.Do(r.b, "CONFIG", "RESETSTAT")
	before := r.stats()
	r.run(sha, from, n, call, prep)
	after := r.stats()
	if after.calls != int64(n) {
		r.b.Fatalf("commandstats counted %d EVALSHA calls, want %d", after.calls, n)
	}
	return scriptCost{calls: after.calls, usec: after.usec, cpu: after.cpu - before.cpu}
}

type serverStats struct {
	calls, usec int64
	cpu         float64 // used_cpu_user + used_cpu_sys, in µs
}

func (r *scriptRunner) stats() serverStats {
	info, err := r.srv.Do(r.b, "INFO", "cpu", "commandstats").ToString()
	if err != nil {
		r.b.Fatal(err)
	}
	var s serverStats
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		name, value, _ := strings.Cut(line, ":")
		switch name {
		case "used_cpu_user", "used_cpu_sys":
			f, err := strconv.ParseFloat(value, 64)
			if err != nil {
				r.b.Fatalf("INFO %s: %v", line, err)
			}
			s.cpu += f * 1e6
		case "cmdstat_evalsha":
			for field := range strings.SplitSeq(value, ",") {
				k, v, _ := strings.Cut(field, "=")
				switch k {
				case "calls":
					s.calls, err = strconv.ParseInt(v, 10, 64)
				case "usec":
					s.usec, err = strconv.ParseInt(v, 10, 64)
				}
				if err != nil {
					r.b.Fatalf("INFO %s: %v", line, err)
				}
			}
		}
	}
	return s
}

// scriptCost sums what calls cost the server.
type scriptCost struct {
	calls, usec int64
	cpu         float64
}

func (c *scriptCost) add(d scriptCost) {
	c.calls, c.usec, c.cpu = c.calls+d.calls, c.usec+d.usec, c.cpu+d.cpu
}

func (c scriptCost) perCall() float64 { return float64(c.usec) / float64(c.calls) }

// report reports the cost per call, with the metrics' names prefixed, and per policy when
// policies > 1.
func (c scriptCost) report(b *testing.B, prefix string, policies int) {
	b.ReportMetric(c.perCall(), prefix+"redis-cpu-us/op")
	b.ReportMetric(c.cpu/float64(c.calls), prefix+"redis-proc-cpu-us/op")
	if policies > 1 {
		b.ReportMetric(c.perCall()/float64(policies), prefix+"redis-cpu-us/policy")
	}
}
