package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/admit-dev/admit/internal/envoyfleet"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/transport/rlqs"
)

// rlqsListeningRE finds the address of the rate limit quota service in admit serve's log.
var rlqsListeningRE = regexp.MustCompile(`msg="Envoy rate limit quota service" listen=(\S+)`)

// rlqsFleetEnv sets how long TestE2ERLQSFleet measures exactness and fairness, as a Go duration:
// ADMIT_RLQS_FLEET=5m is the five minutes of docs/rlqs.md's figures; without it, 20s.
const rlqsFleetEnv = "ADMIT_RLQS_FLEET"

const rlqsFleetConfig = `policies:
  - {name: api-global, algorithm: token_bucket, limit: %d, window: 1m}
rlqs:
  - domain: mesh
    assignment_ttl: 5s
    buckets:
      - {match: {name: api}, policy: api-global}
`

var rlqsAPI = map[string]string{"name": "api"}

// liveFleet is simulated Envoys in real time: a goroutine sends each Envoy its open-loop demand
// for the real time that passed, every few milliseconds, and the test runs report rounds, each
// Envoy reporting and waiting for its answer, a second apart (or at once after a slow round).
type liveFleet struct {
	t      *testing.T
	envoys []*envoyfleet.Envoy
	hot    atomic.Int64 // the Envoy of 70% of the demand
	stop   chan struct{}
	done   sync.WaitGroup

	wait       time.Duration // for the answer to a report
	lastRound  time.Time
	rounds     int
	roundLimit float64 // the limit per minute the assigned sum is checked against after each round
	overRounds int     // rounds after which the assigned rates summed above roundLimit
	overRun    int     // the rounds in a row that did, up to the last
	longestRun int     // the most rounds in a row that did
	mostOver   float64 // the largest sum above roundLimit, per minute
	// Rounds that end before warmUntil are in a ledger's warm-up (its birth is after warmFrom, the
	// push of the split at its end is not yet due): the assigned rates must sum within warmLimit.
	warmFrom, warmUntil time.Time
	warmLimit           float64
	warmRounds          int     // such rounds, in the last warm-up
	warmMost            float64 // the largest sum assigned after one of them
}

// fleetDemand is Envoy i's demand, requests per second: the hot one 105, the others 5; 9,000 a
// minute in all, 70% on the hot one, over the limit of 6,000.
func fleetDemand(i, hot int) float64 {
	if i == hot {
		return 105
	}
	return 5
}

func startLiveFleet(t *testing.T, envoys []*envoyfleet.Envoy) *liveFleet {
	f := &liveFleet{t: t, envoys: envoys, stop: make(chan struct{}), wait: 30 * time.Second}
	f.done.Go(func() {
		owed := make([]float64, len(envoys))
		last := time.Now()
		for {
			select {
			case <-f.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			now := time.Now()
			dt := now.Sub(last).Seconds()
			last = now
			hot := int(f.hot.Load())
			for i, e := range envoys {
				for owed[i] += fleetDemand(i, hot) * dt; owed[i] >= 1; owed[i]-- {
					e.Request(rlqsAPI)
				}
			}
		}
	})
	t.Cleanup(func() {
		close(f.stop)
		f.done.Wait()
		for _, e := range envoys {
			e.Close()
		}
	})
	return f
}

// warmup checks the rounds of a ledger's warm-up that begins after from: each ends with the
// assigned rates within limit.
func (f *liveFleet) warmup(from time.Time, limit float64) {
	f.warmFrom, f.warmLimit, f.warmRounds, f.warmMost = from, limit, 0, 0
	f.warmUntil = f.warmFrom.Add(rlqs.Warmup(5 * time.Second))
}

// round waits until a second has passed since the last round began, then has every Envoy report
// and wait for its answer (f.wait; 0 waits for none).
func (f *liveFleet) round() {
	if d := time.Until(f.lastRound.Add(time.Second)); d > 0 {
		time.Sleep(d)
	}
	f.lastRound = time.Now()
	var wg sync.WaitGroup
	for _, e := range f.envoys {
		wg.Go(func() {
			n := e.Received()
			if err := e.Report(); err == nil && f.wait > 0 { // else the stream failed: the next report opens another
				e.WaitReceived(n+1, f.wait)
			}
		})
	}
	wg.Wait()
	f.rounds++
	if a := f.assigned(); time.Now().Before(f.warmUntil) {
		f.warmRounds++
		f.warmMost = max(f.warmMost, a)
		if a > f.warmLimit {
			f.t.Errorf("a round %v into a warm-up: %.0f a minute assigned, over %.0f", time.Since(f.warmFrom).Round(time.Millisecond), a, f.warmLimit)
		}
	}
	if a := f.assigned(); f.roundLimit > 0 && a > f.roundLimit {
		f.overRounds++
		f.overRun++
		f.longestRun = max(f.longestRun, f.overRun)
		f.mostOver = max(f.mostOver, a)
	} else {
		f.overRun = 0
	}
}

// until runs rounds until ok holds, for at most a patient two minutes of real time.
func (f *liveFleet) until(what string, ok func() bool) {
	f.t.Helper()
	for start := time.Now(); !ok(); f.round() {
		if time.Since(start) > 2*time.Minute {
			f.t.Fatalf("%s: not after %d rounds in %v", what, f.rounds, time.Since(start))
		}
	}
}

// rates returns each Envoy's assigned rate, per minute.
func (f *liveFleet) rates() []float64 {
	out := make([]float64, len(f.envoys))
	for i, e := range f.envoys {
		_, r, _ := e.Bucket(rlqsAPI)
		out[i] = r * 60
	}
	return out
}

func (f *liveFleet) assigned() float64 {
	s := 0.0
	for _, r := range f.rates() {
		s += r
	}
	return s
}

// kinds reports whether every Envoy's assignment is of kind k.
func (f *liveFleet) kinds(k string) bool {
	for _, e := range f.envoys {
		if e.Kind(rlqsAPI) != k {
			return false
		}
	}
	return true
}

// requests returns how many requests e has had of the API bucket, allowed or denied.
func requests(e *envoyfleet.Envoy) float64 {
	b, _, _ := e.Bucket(rlqsAPI)
	return float64(b.Allowed + b.Denied)
}

// fleetSnapshot is the fleet's counts at one moment.
type fleetSnapshot struct {
	at      time.Time
	allowed []uint64
	held    uint64 // the max_tokens of every token bucket: the most they hold at once
	bursts  uint64 // the max_tokens of every token bucket started so far (each starts full)
}

func (f *liveFleet) snapshot() fleetSnapshot {
	s := fleetSnapshot{at: time.Now()}
	for _, e := range f.envoys {
		b, _, _ := e.Bucket(rlqsAPI)
		s.allowed = append(s.allowed, b.Allowed)
		s.held += uint64(b.MaxTokens())
		s.bursts += b.Bursts
	}
	return s
}

// admittedSince returns what the fleet admitted from s0 to s1, and the bound of docs/rlqs.md:
// the limit per minute over the time that passed, plus what the token buckets held at s0, plus
// the max_tokens of each token bucket that started full in between.
func admittedSince(s0, s1 fleetSnapshot, limit float64) (admitted uint64, bound float64) {
	for i := range s1.allowed {
		admitted += s1.allowed[i] - s0.allowed[i]
	}
	return admitted, limit*s1.at.Sub(s0.at).Minutes() + float64(s0.held) + float64(s1.bursts-s0.bursts)
}

// TestE2ERLQSFleet runs the fleet of docs/rlqs.md against two real admit serve --rlqs-listen
// processes on one real redis-server, over real gRPC in real time: ten simulated Envoys, five on
// each process, the second process their fallback, with a demand of 9,000 a minute (70% on one
// Envoy) over a limit of 6,000. It checks, in turn:
//   - a new fleet: after every round of the ledger's warm-up the assigned rates sum within the
//     limit;
//   - exactness: over each window of the measurement (20s, or ADMIT_RLQS_FLEET), the fleet admits
//     at most the limit plus the reassignment bound, and at least half the limit; the assigned
//     rates sum above the limit for one round at a time at most;
//   - no request is an RPC: each Envoy sent one report a round;
//   - fairness: each Envoy's admitted share is its split (a tenth of the budget equally, the rest
//     by demand) within the dead band of a share, and 2 points;
//   - convergence: two rounds after the hot spot moved to another Envoy (rounds whose reports carry
//     the demand as it is), both have gone 75% of the way to their new shares;
//   - a reload (SIGHUP to both processes) to 3,000 a minute is pushed to every Envoy without a
//     report, and holds;
//   - a process killed: its Envoys open streams to the other, and once its records expired
//     (assignment_ttl), the survivors hold the budget again;
//   - Redis killed: the RLQS health goes NOT_SERVING, every assignment expires into
//     reuse_last_assignment and the fleet stays within the bound; Redis restarted (empty):
//     SERVING, token buckets again, within the limit at the first answers and every round of the
//     ledger's warm-up, then the split again, and the fleet within the bound from Redis's return;
//   - SIGTERM with Envoys connected: NOT_SERVING, their streams end, and the process exits 0.
//
// Nothing depends on how long a sleep takes: the bounds are computed from the time that passed
// and the token buckets handed out, convergence counts rounds, and every wait is patient.
func TestE2ERLQSFleet(t *testing.T) {
	measure := 20 * time.Second
	if v := os.Getenv(rlqsFleetEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive Go duration", rlqsFleetEnv, v)
		}
		measure = d
	}
	srv := redistest.Start(t)
	cfg := filepath.Join(t.TempDir(), "admit.yaml")
	write := func(limit int) {
		t.Helper()
		if err := os.WriteFile(cfg, fmt.Appendf(nil, rlqsFleetConfig, limit), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(6000)
	var addrs []string
	var procs []*proc
	for range 2 {
		p := startAdmit(t, "--config", cfg, "--redis", srv.URL(), "--rlqs-listen", "127.0.0.1:0")
		p.logs.waitLine(t, "Envoy rate limit quota service")
		m := rlqsListeningRE.FindStringSubmatch(p.logs.String())
		if m == nil {
			t.Fatalf("no RLQS address in the log:\n%s", p.logs)
		}
		addrs, procs = append(addrs, m[1]), append(procs, p)
	}
	var envoys []*envoyfleet.Envoy
	for i := range 10 {
		envoys = append(envoys, envoyfleet.New(envoyfleet.Options{Domain: "mesh", Addrs: []string{addrs[i%2], addrs[(i+1)%2]},
			Now: time.Now, NoAssignment: envoyfleet.AllowAll, Expired: envoyfleet.ReuseLast}))
	}
	born := time.Now() // the first requests report at once: the ledger is born after this
	f := startLiveFleet(t, envoys)
	f.warmup(born, 6000)

	// The RLQS listener's own health names; "ratelimit" is the rate limit service's, not its.
	conn, err := grpc.NewClient(addrs[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	health := healthpb.NewHealthClient(conn)
	ctx := t.Context()
	for _, svc := range rlqs.HealthServices {
		if r, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: svc}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("RLQS health Check(%q) = %v, %v; want SERVING", svc, r, err)
		}
	}
	if _, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "ratelimit"}); status.Code(err) != codes.NotFound {
		t.Errorf("RLQS health Check(ratelimit): %v, want NotFound", err)
	}
	watch, err := health.Watch(ctx, &healthpb.HealthCheckRequest{Service: "envoy.service.rate_limit_quota.v3.RateLimitQuotaService"})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := watchNext(t, watch); err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("RLQS health Watch: %v %v, want SERVING", st, err)
	}

	// A new fleet: in the ledger's warm-up (half the TTL), every round within the limit, whatever
	// the order the Envoys first reported in; then every Envoy holds a token bucket, and three more
	// rounds let the demands settle.
	f.until("every Envoy assigned a token bucket", func() bool { return f.kinds("tokens") })
	for range 3 {
		f.round()
	}
	t.Logf("a new fleet: %d rounds in the warm-up, at most %.0f a minute assigned", f.warmRounds, f.warmMost)

	// Exactness and fairness, over windows of a minute at most.
	f.roundLimit = 6000
	window := min(measure, time.Minute)
	s0 := f.snapshot()
	sent0 := make([]int, len(envoys))
	for i, e := range envoys {
		sent0[i] = e.Sent()
	}
	rounds0 := f.rounds
	for w, ws := 0, s0; ws.at.Sub(s0.at) < measure; w++ {
		for time.Since(ws.at) < window {
			f.round()
		}
		we := f.snapshot()
		admitted, bound := admittedSince(ws, we, 6000)
		perMinute := float64(admitted) / we.at.Sub(ws.at).Minutes()
		t.Logf("window %d (%v): admitted %d, %.0f a minute; bound %.0f (limit %.0f + %d held + %d of buckets that started full)",
			w, we.at.Sub(ws.at).Round(time.Millisecond), admitted, perMinute, bound, 6000*we.at.Sub(ws.at).Minutes(), ws.held, we.bursts-ws.bursts)
		if float64(admitted) > bound {
			t.Errorf("window %d: the fleet admitted %d, over the bound %.0f", w, admitted, bound)
		}
		// A floor, not the measure (docs/rlqs.md quotes the long runs: 95%): on a loaded machine the
		// demand's goroutine falls behind and catches up in bursts, which the token buckets partly
		// refuse (a CI run beside other jobs admitted 75%). Shares gone wrong (floors only, or
		// nothing assigned) fall far below it.
		if perMinute < 0.5*6000 {
			t.Errorf("window %d: the fleet admitted %.0f a minute, under half the limit with demand over it", w, perMinute)
		}
		ws = we
	}
	s1 := f.snapshot()
	admitted, _ := admittedSince(s0, s1, 6000)
	t.Logf("%v: admitted %.0f a minute in all; %d of %d rounds assigned above the limit, at most %.0f a minute, %d in a row",
		s1.at.Sub(s0.at).Round(time.Millisecond), float64(admitted)/s1.at.Sub(s0.at).Minutes(), f.overRounds, f.rounds-rounds0, f.mostOver, f.longestRun)
	if f.longestRun > 1 {
		t.Errorf("the assignments summed above the limit after %d rounds in a row: the bound is one reporting interval", f.longestRun)
	}
	for i, e := range envoys {
		if n, want := e.Sent()-sent0[i], f.rounds-rounds0; n != want {
			t.Errorf("envoy %d sent %d messages in %d rounds: want one report a round, whatever its requests", i, n, want)
		}
	}
	total, n := float64(admitted), float64(len(envoys))
	for i := range envoys {
		got := float64(s1.allowed[i]-s0.allowed[i]) / total
		ds := fleetDemand(i, 0) / 150
		want := rlqs.FloorFraction/n + (1-rlqs.FloorFraction)*ds
		tol := rlqs.Deadband*want + 0.02
		t.Logf("envoy %d: demand share %.3f, admitted share %.3f (split %.3f ± %.3f)", i, ds, got, want, tol)
		if math.Abs(got-want) > tol {
			t.Errorf("envoy %d: admitted share %.3f, want %.3f ± %.3f (demand share %.3f)", i, got, want, tol, ds)
		}
	}

	// Convergence: the hot spot moves from Envoy 0 to Envoy 3, at the end of a round.
	// The two rounds counted are the first two in a row whose reports carry the moved demand as it
	// is: on a loaded machine the demand's goroutine may not run for a while and then catch up in
	// a burst, so that a round's reports say less, or more, than the demand, and no ledger could
	// follow them. A round is clean when Envoy 3 sent its share of the fleet's requests within 5
	// points, and Envoy 0 at most twice its own.
	prior := f.rates()
	f.hot.Store(3)
	f.roundLimit = 0
	var fleetTotal float64
	for i := range envoys {
		fleetTotal += fleetDemand(i, 3)
	}
	skipped := 0
	for start, clean := time.Now(), 0; clean < 2; {
		before := make([]float64, len(envoys))
		for i, e := range envoys {
			before[i] = requests(e)
		}
		f.round()
		var sent float64
		for i, e := range envoys {
			sent += requests(e) - before[i]
		}
		hot, cold := (requests(envoys[3])-before[3])/sent, (requests(envoys[0])-before[0])/sent
		if sent > 0 && math.Abs(hot-fleetDemand(3, 3)/fleetTotal) <= 0.05 && cold <= 2*fleetDemand(0, 3)/fleetTotal {
			clean++
		} else {
			clean, skipped = 0, skipped+1
		}
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("no two clean rounds in a row after the shift in %v (%d rounds not clean)", time.Since(start), skipped)
		}
	}
	after := f.rates()
	for range 10 {
		f.round()
	}
	steady := f.rates()
	t.Logf("the hot spot moved: before %v; two clean rounds after %v (%d rounds not clean first); ten more %v", prior, after, skipped, steady)
	for _, i := range []int{0, 3} {
		if moved, way := math.Abs(after[i]-prior[i]), math.Abs(steady[i]-prior[i]); moved < 0.75*way {
			t.Errorf("envoy %d two clean rounds after the shift: %.0f a minute, from %.0f; steady %.0f: moved %.0f%% of the way", i, after[i], prior[i], steady[i], 100*moved/way)
		}
	}

	// A reload to 3,000 a minute, by SIGHUP to both processes: pushed to every Envoy, no report
	// between (the demand goes on; only rounds report).
	counts := make([]int, len(envoys))
	for i, e := range envoys {
		counts[i] = e.Received()
	}
	write(3000)
	for _, p := range procs {
		n := strings.Count(p.logs.String(), "configuration reloaded")
		p.cmd.Process.Signal(syscall.SIGHUP)
		p.logs.waitCount(t, "configuration reloaded", n+1)
	}
	for i, e := range envoys {
		if !e.WaitReceived(counts[i]+1, 30*time.Second) {
			t.Errorf("envoy %d: no assignment pushed after the reload", i)
		}
	}
	t.Logf("after the reload to 3000 a minute: %.0f a minute assigned, %v", f.assigned(), f.rates())
	if s := f.assigned(); s > 3000 {
		t.Errorf("after the reload to 3000 a minute, %.0f a minute assigned", s)
	}

	// One process killed: its Envoys move to the other at their next report.
	procs[0].cmd.Process.Kill()
	procs[0].wait(t)
	f.until("every Envoy of the killed process on a second stream, with a token bucket", func() bool {
		for i, e := range envoys {
			if n, _ := e.Streams(); i%2 == 0 && n < 2 {
				return false
			}
		}
		return f.kinds("tokens")
	})
	t.Logf("one process killed: %.0f a minute assigned while its records live", f.assigned())
	if s := f.assigned(); s > 3000 {
		t.Errorf("after a process was killed, %.0f a minute assigned", s)
	}
	killed := time.Now()
	for time.Since(killed) < 5*time.Second+time.Second { // past assignment_ttl: its records have expired
		f.round()
	}
	f.round()
	t.Logf("its records expired: %.0f a minute assigned, %v", f.assigned(), f.rates())
	if s := f.assigned(); s > 3000 || s < 0.85*3000 {
		t.Errorf("the killed process's records expired: %.0f a minute assigned, want 85%% to 100%% of 3000", s)
	}

	// Redis killed: NOT_SERVING; no report is answered, every assignment expires into
	// reuse_last_assignment, and the fleet stays within the bound.
	srv.Kill(t)
	if st, err := watchNext(t, watch); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Redis killed: RLQS health %v %v, want NOT_SERVING", st, err)
	}
	f.wait = 0
	down := f.snapshot()
	f.until("every assignment expired with Redis down", func() bool { return f.kinds("tokens expired") })
	f.round()
	up := f.snapshot()
	admitted, bound := admittedSince(down, up, 3000)
	t.Logf("Redis down %v: admitted %.0f a minute (bound %.0f in all, admitted %d), assigned %.0f", up.at.Sub(down.at).Round(time.Millisecond),
		float64(admitted)/up.at.Sub(down.at).Minutes(), bound, admitted, f.assigned())
	if float64(admitted) > bound {
		t.Errorf("with Redis down the fleet admitted %d, over the bound %.0f", admitted, bound)
	}

	// Redis restarted, empty: SERVING; in the ledger's new warm-up every round within the limit
	// (no Envoy sent more than it held), the split of all the records after it.
	f.warmup(time.Now(), 3000)
	srv.Restart(t)
	if st, err := watchNext(t, watch); err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Redis back: RLQS health %v %v, want SERVING", st, err)
	}
	f.wait = 30 * time.Second
	back := f.snapshot()
	f.until("token buckets again after Redis came back", func() bool { return f.kinds("tokens") })
	t.Logf("Redis back: the first answers assign %.0f a minute", f.assigned())
	if s := f.assigned(); s > 3000 {
		t.Errorf("Redis back, the first answers: %.0f a minute assigned, over the limit", s)
	}
	// The warm-up's end pushes the split of every record: most of the budget again, within it.
	warmed := f.rounds
	f.until("the split again after the warm-up", func() bool { return f.assigned() >= 0.85*3000 })
	t.Logf("Redis back: %d rounds in the warm-up, at most %.0f a minute assigned; the split %d rounds after the first answers",
		f.warmRounds, f.warmMost, f.rounds-warmed)
	f.round()
	settled := f.snapshot()
	admitted, bound = admittedSince(back, settled, 3000)
	t.Logf("Redis back, one round later: %.0f a minute assigned; %d admitted in %v (bound %.0f)",
		f.assigned(), admitted, settled.at.Sub(back.at).Round(time.Millisecond), bound)
	if s := f.assigned(); s > 3000 || s < 0.85*3000 {
		t.Errorf("Redis back, after the warm-up: %.0f a minute assigned, want 85%% to 100%% of 3000", s)
	}
	if float64(admitted) > bound {
		t.Errorf("Redis back: the fleet admitted %d, over the bound %.0f", admitted, bound)
	}

	// SIGTERM with Envoys connected: NOT_SERVING, their streams end, and the process exits 0.
	procs[1].cmd.Process.Signal(syscall.SIGTERM)
	if st, err := watchNext(t, watch); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("SIGTERM: RLQS health %v %v, want NOT_SERVING", st, err)
	}
	if code := procs[1].wait(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM with Envoys connected, want 0", code)
	}
}
