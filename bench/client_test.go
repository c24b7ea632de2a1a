package bench

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/callers"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/redisstore"
)

// The Client group measures redisstore's flush delay (redisstore.Config.MaxFlushDelay) against the
// pipelined ceiling: its reference, BenchmarkClient_ReferencePipelined, sends the same take script
// in batches of pipelineBatch commands per DoMulti, the most decisions per second one client and
// one Redis make on this machine. Every series reports, besides decisions/s:
//
//	redis-cpu-us/op   the redis-server process's CPU (INFO cpu, user + sys) per decision
//	client-cpu-us/op  this process's CPU (getrusage) per decision
//
// Both share the machine's cores, so their sum is the cost of a decision here.
//
//	cd bench && ADMIT_REQUIRE_REDIS=1 go test -run '^$' -bench '^BenchmarkClient_' -benchtime 50000x .

// pipelineBatch is the number of script calls the pipelined reference sends per DoMulti.
const pipelineBatch = 32

// flushDelays are the redisstore flush delays measured: off, and the two the docs discuss.
var flushDelays = []time.Duration{0, 20 * time.Microsecond, 100 * time.Microsecond}

// BenchmarkClient_ReferencePipelined is the pipelined ceiling: each caller sends pipelineBatch
// EVALSHA of redisstore's take script per DoMulti, by bare rueidis; ns/op and decisions/s are per
// script call.
func BenchmarkClient_ReferencePipelined(b *testing.B) {
	srv := redistest.Start(b)
	c, sha := bareRueidis(b, srv, takeScript(b))
	ctx := context.Background()
	for _, n := range callers.Counts {
		b.Run(callers.Name(n), func(b *testing.B) {
			b.ReportAllocs()
			cpu := startCPU(b, srv)
			callers.RunBatches(b, n, pipelineBatch, func(from, to int) error {
				cmds := make(rueidis.Commands, 0, to-from)
				for i := from; i < to; i++ {
					cmds = append(cmds, c.B().Evalsha().Sha1(sha).Numkeys(1).Key(keys[i%len(keys)]).Arg(takeArgs...).Build())
				}
				for _, r := range c.DoMulti(ctx, cmds...) {
					if err := r.Error(); err != nil {
						return err
					}
				}
				return nil
			})
			cpu.report(b)
		})
	}
}

// BenchmarkClient_Rueidis is BenchmarkReferenceRueidis with the CPU figures: the same script by bare
// rueidis, one EVALSHA per call, no flush delay. Against BenchmarkClient_Redisstore with
// max_flush_delay=0 its client-cpu-us/op is what redisstore adds to a decision.
func BenchmarkClient_Rueidis(b *testing.B) {
	srv := redistest.Start(b)
	c, sha := bareRueidis(b, srv, takeScript(b))
	ctx := context.Background()
	for _, n := range callers.Counts {
		b.Run(callers.Name(n), func(b *testing.B) {
			b.ReportAllocs()
			cpu := startCPU(b, srv)
			callers.Run(b, n, func(i int) error {
				return c.Do(ctx, c.B().Evalsha().Sha1(sha).Numkeys(1).Key(keys[i%len(keys)]).Arg(takeArgs...).Build()).Error()
			})
			cpu.report(b)
		})
	}
}

// BenchmarkClient_Redisstore measures Store.Take, one decision per call as an application makes
// them, with each flush delay.
func BenchmarkClient_Redisstore(b *testing.B) {
	srv := redistest.Start(b)
	for _, delay := range flushDelays {
		b.Run("max_flush_delay="+flushDelayName(delay), func(b *testing.B) {
			// A long command timeout: on a loaded machine a 200 ms stall must not end the run.
			s, err := redisstore.New(redisstore.Config{URL: srv.URL(), MaxFlushDelay: delay, CommandTimeout: 10 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			if _, err := s.Take(ctx, admit.Request{Key: keys[0], Limit: limit, Cost: 0}); err != nil {
				b.Fatal(err) // connect, and load the script, before the clock runs
			}
			for _, n := range callers.Counts {
				b.Run(callers.Name(n), func(b *testing.B) {
					b.ReportAllocs()
					cpu := startCPU(b, srv)
					callers.Run(b, n, func(i int) error {
						_, err := s.Take(ctx, admit.Request{Key: keys[i%len(keys)], Limit: limit, Cost: 1})
						return err
					})
					cpu.report(b)
				})
			}
		})
	}
}

// flushDelayName writes d as the URL's max_flush_delay would: 0, 20us, 100us.
func flushDelayName(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return strings.ReplaceAll(d.String(), "µs", "us")
}

// A cpuMeter holds the CPU time redis-server and this process had used when a run started.
type cpuMeter struct {
	srv           *redistest.Server
	redis, client time.Duration
}

func startCPU(b *testing.B, srv *redistest.Server) cpuMeter {
	return cpuMeter{srv: srv, redis: redisCPU(b, srv), client: processCPU(b)}
}

// report reports the CPU each process used since m was taken, per decision.
func (m cpuMeter) report(b *testing.B) {
	redis, client := redisCPU(b, m.srv)-m.redis, processCPU(b)-m.client
	b.ReportMetric(float64(redis.Microseconds())/float64(b.N), "redis-cpu-us/op")
	b.ReportMetric(float64(client.Microseconds())/float64(b.N), "client-cpu-us/op")
}

// redisCPU returns the CPU time redis-server has used, user and system, from INFO cpu.
func redisCPU(b *testing.B, srv *redistest.Server) time.Duration {
	info, err := srv.Do(b, "INFO", "cpu").ToString()
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for _, line := range strings.Split(info, "\n") {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || name != "used_cpu_user" && name != "used_cpu_sys" {
			continue
		}
		s, err := strconv.ParseFloat(value, 64)
		if err != nil {
			b.Fatalf("INFO cpu: %s: %v", line, err)
		}
		total += time.Duration(s * float64(time.Second))
	}
	return total
}

// processCPU returns the CPU time this process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
