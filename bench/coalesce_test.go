package bench

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/callers"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/redisstore"
)

// The Coalescing group measures redisstore's coalescing (redisstore.Config.Coalescing) against
// the minimal fixed-window script (testdata/minimal_fixed_window.lua) called by bare rueidis, one
// EVALSHA per decision, as the group's reference: Store.Take of a fixed window, on 1,024 keys
// (keys=many) or one (keys=hot), coalescing on and off. Every series reports, besides decisions/s:
//
//	redis-cpu-us/op   the redis-server process's CPU (INFO cpu, user + sys) per decision
//	client-cpu-us/op  this process's CPU (getrusage) per decision
//	p99-us            the 99th percentile of a decision's latency, call to answer
//
//	cd bench && ADMIT_REQUIRE_REDIS=1 go test -run '^$' -bench '^BenchmarkCoalescing_' -benchtime 50000x .

// BenchmarkCoalescing_ReferenceMinimalScript is the group's reference: the minimal fixed-window
// script, one EVALSHA per decision by bare rueidis, on the same keys.
func BenchmarkCoalescing_ReferenceMinimalScript(b *testing.B) {
	src, err := os.ReadFile("testdata/minimal_fixed_window.lua")
	if err != nil {
		b.Fatal(err)
	}
	for _, ks := range coalesceKeys {
		b.Run("keys="+ks.name, func(b *testing.B) {
			srv := redistest.Start(b)
			c, sha := bareRueidis(b, srv, string(src))
			ctx := context.Background()
			args := []string{strconv.FormatInt(limit.Rate, 10), strconv.FormatInt(limit.Period.Milliseconds(), 10), "1"}
			for _, n := range callers.Counts {
				b.Run(callers.Name(n), func(b *testing.B) {
					measureLatency(b, srv, n, func(i int) error {
						return c.Do(ctx, c.B().Evalsha().Sha1(sha).Numkeys(1).Key(ks.keys[i%len(ks.keys)]).Arg(args...).Build()).Error()
					})
				})
			}
		})
	}
}

// BenchmarkCoalescing_Redisstore is Store.Take with coalescing on and off.
func BenchmarkCoalescing_Redisstore(b *testing.B) {
	for _, mode := range []redisstore.Coalescing{redisstore.CoalescingOn, redisstore.CoalescingOff} {
		for _, ks := range coalesceKeys {
			b.Run("coalesce="+mode.String()+"/keys="+ks.name, func(b *testing.B) {
				srv := redistest.Start(b)
				// A long command timeout: on a loaded machine a 200 ms stall must not end the run.
				s, err := redisstore.New(redisstore.Config{URL: srv.URL(), CommandTimeout: 10 * time.Second, Coalescing: mode})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				ctx := context.Background()
				if _, err := s.Take(ctx, admit.Request{Key: ks.keys[0], Limit: limit, Cost: 0}); err != nil {
					b.Fatal(err) // connect, and load the script, before the clock runs
				}
				for _, n := range callers.Counts {
					b.Run(callers.Name(n), func(b *testing.B) {
						measureLatency(b, srv, n, func(i int) error {
							_, err := s.Take(ctx, admit.Request{Key: ks.keys[i%len(ks.keys)], Limit: limit, Cost: 1})
							return err
						})
					})
				}
			})
		}
	}
}

// coalesceKeys are the group's key sets: keys=many, the 1,024 of the other groups, and keys=hot, one.
var coalesceKeys = []struct {
	name string
	keys []string
}{
	{"many", keys},
	{"hot", keys[:1]},
}

// measureLatency runs op from n callers (callers.Run) and reports the CPU figures of cpuMeter and
// the 99th percentile of op's latency.
func measureLatency(b *testing.B, srv *redistest.Server, n int, op func(i int) error) {
	b.ReportAllocs()
	lat := make([]time.Duration, b.N)
	cpu := startCPU(b, srv)
	callers.Run(b, n, func(i int) error {
		start := time.Now()
		err := op(i)
		lat[i] = time.Since(start)
		return err
	})
	cpu.report(b)
	slices.Sort(lat)
	b.ReportMetric(float64(lat[(len(lat)-1)*99/100])/float64(time.Microsecond), "p99-us")
}

// BenchmarkScriptCost_Batch measures the batch script of coalescing (redisstore's scripts/batch.lua)
// against the minimal script: EVALSHA of batches of requests=N fixed-window takes, pipelined as
// the ScriptCost group pipelines, on many keys or on one (keys=hot), each chunk of it followed by
// as many minimal-script calls as it decided takes, on keys of their own. Per decision:
//
//	redis-cpu-us/op       the µs EVALSHA spent in Redis (INFO commandstats, usec) per take decided
//	ref-redis-cpu-us/op   the same of the minimal script, one call per decision, interleaved
//	x-minimal             the ratio of the two
//	x-minimal-proc-cpu    the ratio of the Redis process's CPU (INFO cpu), I/O included
//
//	cd bench && ADMIT_REQUIRE_REDIS=1 go test -run '^$' -bench '^BenchmarkScriptCost_Batch' -benchtime 20000x .
func BenchmarkScriptCost_Batch(b *testing.B) {
	for _, m := range []int{1, 16, 128} {
		for _, hot := range []bool{false, true} {
			name := "requests=" + strconv.Itoa(m) + "/keys=many"
			if hot {
				name = "requests=" + strconv.Itoa(m) + "/keys=hot"
			}
			b.Run(name, func(b *testing.B) {
				r := newScriptRunner(b)
				batch := r.load(mustScript(b, "batch"))
				call := func(i int, _ []int64) ([]string, []string) { return batchCall(i, m, hot) }
				r.warm(r.minimal, minimalCall)
				var cost, ref scriptCost
				for done := 0; done < b.N; done += scriptChunk {
					n := min(scriptChunk, b.N-done)
					calls := (n + m - 1) / m
					c := r.measureBatches(batch, done/m, calls, call)
					c.calls *= int64(m) // per take decided
					cost.add(c)
					ref.add(r.measure(r.minimal, done, calls*m, minimalCall, nil))
				}
				cost.report(b, "", 1)
				ref.report(b, "ref-", 0)
				b.ReportMetric(cost.perCall()/ref.perCall(), "x-minimal")
				b.ReportMetric((cost.cpu/float64(cost.calls))/(ref.cpu/float64(ref.calls)), "x-minimal-proc-cpu")
			})
		}
	}
}

// batchCall returns the batch script's KEYS and ARGV for its call i of m fixed-window takes, on
// keys of their own, or all on one key when hot.
func batchCall(i, m int, hot bool) (keys, args []string) {
	args = make([]string, 1+2*m)
	args[0] = strconv.Itoa(m)
	for j := range m {
		k := i*m + j
		if hot {
			k = 0
		}
		ks, as := takeCall(k, fixedPol)
		keys = append(keys, ks...)
		args[1+j], args[1+m+j] = strconv.Itoa(len(ks)), strconv.Itoa(len(as))
		args = append(args, as...)
	}
	return keys, args
}

// measureBatches calls the batch script sha n times (calls from … from+n−1), pipelined in batches
// of scriptBatch, between two reads of the server's statistics; every take must be admitted.
func (r *scriptRunner) measureBatches(sha string, from, n int, call func(int, []int64) ([]string, []string)) scriptCost {
	r.srv.Do(r.b, "CONFIG", "RESETSTAT")
	before := r.stats()
	ctx := context.Background()
	cmds := make(rueidis.Commands, 0, scriptBatch)
	for at := 0; at < n; at += scriptBatch {
		cmds = cmds[:0]
		for j := at; j < min(at+scriptBatch, n); j++ {
			keys, args := call(from+j, nil)
			cmds = append(cmds, r.c.B().Evalsha().Sha1(sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
		}
		for _, res := range r.c.DoMulti(ctx, cmds...) {
			replies, err := res.ToArray()
			if err != nil {
				r.b.Fatal(err)
			}
			for _, reply := range replies {
				arr, err := reply.AsIntSlice()
				if err != nil || len(arr) == 0 || arr[0] != 1 {
					r.b.Fatalf("reply %v, %v: want an admission", arr, err)
				}
			}
		}
	}
	after := r.stats()
	if after.calls != int64(n) {
		r.b.Fatalf("commandstats counted %d EVALSHA calls, want %d", after.calls, n)
	}
	return scriptCost{calls: after.calls, usec: after.usec, cpu: after.cpu - before.cpu}
}
