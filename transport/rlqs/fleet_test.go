package rlqs_test

import (
	"fmt"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"

	"github.com/admit-dev/admit/internal/envoyfleet"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/transport/rlqs"
)

// The fleet tests run simulated Envoys (internal/envoyfleet) against Servers over real gRPC on
// loopback, on a fake clock that both sides read: minutes of a fleet take seconds, and every
// figure is exact whatever the machine's load. Each report is answered before the clock moves
// on (waited for in real time, patiently).

const fleetConfig = `policies:
  - {name: api-global, algorithm: token_bucket, limit: %d, window: 1m}
rlqs:
  - domain: mesh
    assignment_ttl: 5s
    idle_after: 30s
    buckets:
      - match: {name: api}
        policy: api-global
`

// fakeClock is the time of a fleet and its servers.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func parseConfig(t *testing.T, limit int) *policy.Config {
	t.Helper()
	cfg, err := policy.Parse("fleet.yaml", fmt.Appendf(nil, fleetConfig, limit))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// instance is one admit RLQS server on loopback.
type instance struct {
	srv   *rlqs.Server
	g     *grpc.Server
	addr  string
	clock *fakeClock
}

func startInstance(t *testing.T, cfg *policy.Config, ledger rlqs.Ledger, clock *fakeClock) *instance {
	t.Helper()
	return startInstanceOpts(t, rlqs.Options{Config: cfg, Ledger: ledger}, clock)
}

func startInstanceOpts(t *testing.T, opts rlqs.Options, clock *fakeClock) *instance {
	t.Helper()
	opts.Now, opts.Tick = clock.Now, 20*time.Millisecond
	s, err := rlqs.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	rlqsv3.RegisterRateLimitQuotaServiceServer(g, s)
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	return &instance{srv: s, g: g, addr: ln.Addr().String(), clock: clock}
}

var apiBucket = map[string]string{"name": "api"}

// fleet is N Envoys and their open-loop demand.
type fleet struct {
	t      *testing.T
	clock  *fakeClock
	envoys []*envoyfleet.Envoy
	owed   []float64
	start  time.Time
	// minutes are the fleet's admitted requests per minute of fake time, and bursts the
	// max_tokens of the token buckets that started full within it (the reassignment bound).
	minutes, bursts []uint64
	lastBursts      uint64
	id              map[string]string
	// wait is how long, in real time, a report waits for its answer: long, but short while the
	// ledger is down and no answer comes.
	wait time.Duration
}

func newFleet(t *testing.T, clock *fakeClock, n int, addrs func(i int) []string) *fleet {
	f := &fleet{t: t, clock: clock, start: clock.Now(), id: apiBucket, wait: 30 * time.Second}
	for i := range n {
		f.add(addrs(i))
	}
	return f
}

func (f *fleet) add(addrs []string) *envoyfleet.Envoy {
	e := envoyfleet.New(envoyfleet.Options{Domain: "mesh", Addrs: addrs, Now: f.clock.Now,
		NoAssignment: envoyfleet.AllowAll, Expired: envoyfleet.ReuseLast})
	f.envoys = append(f.envoys, e)
	f.owed = append(f.owed, 0)
	return e
}

const (
	step           = 10 * time.Millisecond
	reportInterval = time.Second
)

// run drives the fleet for d of fake time: each Envoy receives demand(i) requests per second,
// evenly, and reports every reportInterval; after each report the clock waits for its answer.
func (f *fleet) run(d time.Duration, demand func(i int) float64) {
	f.t.Helper()
	end := f.clock.Now().Add(d)
	for f.clock.Now().Before(end) {
		for i, e := range f.envoys {
			if e == nil {
				continue
			}
			f.owed[i] += demand(i) * step.Seconds()
			for ; f.owed[i] >= 1; f.owed[i]-- {
				before := e.Received()
				if e.Request(f.id) {
					f.count(1)
				}
				if _, _, ok := e.Bucket(f.id); ok && before == 0 && e.Received() == 0 {
					e.WaitReceived(1, 30*time.Second) // the first report's answer
				}
			}
		}
		f.clock.advance(step)
		if f.clock.Now().Sub(f.start)%reportInterval == 0 {
			f.report()
		}
	}
}

func (f *fleet) count(n uint64) {
	m := int(f.clock.Now().Sub(f.start) / time.Minute)
	for len(f.minutes) <= m {
		f.minutes = append(f.minutes, 0)
		f.bursts = append(f.bursts, 0)
	}
	f.minutes[m] += n
}

// report has every Envoy report, waits for the answers, and notes the bursts handed out.
func (f *fleet) report() {
	f.t.Helper()
	var wg sync.WaitGroup
	for _, e := range f.envoys {
		if e == nil {
			continue
		}
		wg.Go(func() {
			n := e.Received()
			if err := e.Report(); err == nil { // else the stream failed: the next report opens another
				e.WaitReceived(n+1, f.wait)
			}
		})
	}
	wg.Wait()
	var bursts uint64
	for _, e := range f.envoys {
		if e == nil {
			continue
		}
		if b, _, ok := e.Bucket(f.id); ok {
			bursts += b.Bursts
		}
	}
	f.count(0)
	if bursts > f.lastBursts {
		f.bursts[len(f.bursts)-1] += bursts - f.lastBursts
	}
	f.lastBursts = bursts
}

// rates returns each Envoy's assigned rate, tokens per minute.
func (f *fleet) rates() []float64 {
	out := make([]float64, len(f.envoys))
	for i, e := range f.envoys {
		if e == nil {
			continue
		}
		_, r, _ := e.Bucket(f.id)
		out[i] = r * 60
	}
	return out
}

func sum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

// skewed is the demand of the exactness test: Envoy 0 sends 70% of 9,000 requests a minute, the
// nine others the rest evenly: 150 a second, above the limit of 100.
func skewed(hot int) func(i int) float64 {
	return func(i int) float64 {
		if i == hot {
			return 105
		}
		return 5
	}
}

// checkExact checks every whole minute's admitted total against the limit and the reassignment
// bound (the max_tokens of every token bucket that started full in that minute), and that the
// fleet used most of the budget, its demand being over it.
func checkExact(t *testing.T, f *fleet, limit uint64, from int) {
	t.Helper()
	for m := from; m < len(f.minutes)-1; m++ {
		got, bound := f.minutes[m], limit+f.bursts[m]
		t.Logf("minute %d: admitted %d of %d (bound %d: %d tokens of buckets that started full)", m, got, limit, bound, f.bursts[m])
		if got > bound {
			t.Errorf("minute %d: the fleet admitted %d, more than the limit %d + the reassignment bound %d", m, got, limit, f.bursts[m])
		}
		if float64(got) < 0.85*float64(limit) {
			t.Errorf("minute %d: the fleet admitted %d, under 85%% of the limit %d with demand over it", m, got, limit)
		}
	}
}

// checkFair checks that each Envoy's admitted share follows the split: FloorFraction equally,
// the rest by demand (within 2 points), and so its demand share within FloorFraction + 2 points.
func checkFair(t *testing.T, f *fleet, demand func(int) float64, before []uint64) {
	t.Helper()
	var admitted []float64
	for i, e := range f.envoys {
		b, _, _ := e.Bucket(f.id)
		admitted = append(admitted, float64(b.Allowed-before[i]))
	}
	total, totalDemand, n := sum(admitted), 0.0, float64(len(f.envoys))
	for i := range f.envoys {
		totalDemand += demand(i)
	}
	for i := range f.envoys {
		got, ds := admitted[i]/total, demand(i)/totalDemand
		want := rlqs.FloorFraction/n + (1-rlqs.FloorFraction)*ds
		t.Logf("envoy %d: demand share %.3f, admitted share %.3f (split %.3f)", i, ds, got, want)
		if math.Abs(got-want) > 0.02 || math.Abs(got-ds) > rlqs.FloorFraction+0.02 {
			t.Errorf("envoy %d: admitted share %.3f, want %.3f ± 0.02 (demand share %.3f)", i, got, want, ds)
		}
	}
}

func allowedTotals(f *fleet) []uint64 {
	out := make([]uint64, len(f.envoys))
	for i, e := range f.envoys {
		if e != nil {
			b, _, _ := e.Bucket(f.id)
			out[i] = b.Allowed
		}
	}
	return out
}

// TestFleetExactAndFair runs 10 Envoys of skewed demand over the limit against one instance on
// the memory ledger for six minutes of fake time: every minute after the first is within the
// limit and the reassignment bound, every Envoy's admitted share follows its demand, and no
// request waited for a call (the reports are the only messages).
func TestFleetExactAndFair(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	in := startInstance(t, parseConfig(t, 6000), &rlqs.MemoryLedger{}, clock)
	f := newFleet(t, clock, 10, func(int) []string { return []string{in.addr} })
	f.run(time.Minute, skewed(0))
	before := allowedTotals(f)
	f.run(5*time.Minute, skewed(0))
	checkExact(t, f, 6000, 1)
	checkFair(t, f, skewed(0), before)
	if s := sum(f.rates()); s > 6000 {
		t.Errorf("assigned %v a minute in all, more than the limit", s)
	}
	for i, e := range f.envoys {
		if got := e.Received(); got > 6*60+2 {
			t.Errorf("envoy %d received %d messages in 6 minutes of 1s reports: more than one a report", i, got)
		}
	}
}

// TestFleetConvergence shifts the hot Envoy's demand to another: within two report intervals the
// new hot Envoy holds most of the budget, and the old one a small share.
func TestFleetConvergence(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	in := startInstance(t, parseConfig(t, 6000), &rlqs.MemoryLedger{}, clock)
	f := newFleet(t, clock, 10, func(int) []string { return []string{in.addr} })
	f.run(time.Minute, skewed(0))
	prior := f.rates()
	f.run(2*reportInterval, skewed(3))
	after := f.rates()
	f.run(30*time.Second, skewed(3))
	steady := f.rates()
	t.Logf("before the shift: %v; two reports after: %v; 30s later: %v", prior, after, steady)
	for _, i := range []int{0, 3} { // each has gone 3/4 of the way from before to the steady state
		if moved, way := math.Abs(after[i]-prior[i]), math.Abs(steady[i]-prior[i]); moved < 0.75*way {
			t.Errorf("envoy %d two reports after the shift: %v a minute, from %v; steady %v: moved %.0f%% of the way", i, after[i], prior[i], steady[i], 100*moved/way)
		}
	}
	if after[3] <= after[0] {
		t.Errorf("two reports after the shift the new hot envoy has %v, the old %v", after[3], after[0])
	}
}

// TestFleetChurn has an Envoy leave (its share goes to the others within one report interval)
// and a newcomer join (it is assigned at least the floor at once), then reloads a lower limit
// (every Envoy is told at once, the sum within it).
func TestFleetChurn(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	in := startInstance(t, parseConfig(t, 6000), &rlqs.MemoryLedger{}, clock)
	f := newFleet(t, clock, 10, func(int) []string { return []string{in.addr} })
	f.run(30*time.Second, skewed(0))
	before := sum(f.rates())
	f.envoys[0].Close()
	f.envoys[0] = nil
	f.run(2*reportInterval, skewed(0))
	after := sum(f.rates())
	t.Logf("assigned a minute: %v before the hot envoy left, %v after", before, after)
	if after < 0.9*before || after > 6000 {
		t.Errorf("after the hot envoy left the others hold %v a minute, want most of %v and at most 6000", after, before)
	}
	e := f.add([]string{in.addr})
	f.run(2*reportInterval, skewed(0))
	floor := 6000 / (1 + rlqs.Deadband) * rlqs.FloorFraction / 10
	if r := f.rates()[10]; r < floor-1 {
		t.Errorf("the newcomer holds %v a minute, under the floor %v", r, floor)
	}
	if s := sum(f.rates()); s > 6000 {
		t.Errorf("with the newcomer %v a minute in all", s)
	}

	counts := make([]int, len(f.envoys))
	for i, e := range f.envoys {
		if e != nil {
			counts[i] = e.Received()
		}
	}
	in.srv.Swap(parseConfig(t, 3000))
	for i, e := range f.envoys {
		if e != nil && !e.WaitReceived(counts[i]+1, 30*time.Second) {
			t.Fatalf("envoy %d: no assignment pushed after the reload", i)
		}
	}
	if s := sum(f.rates()); s > 3000 {
		t.Errorf("after reloading a limit of 3000 a minute, %v a minute assigned", s)
	}
	_ = e
}

// TestFleetTwoInstancesOnRedis splits the fleet between two instances on one Redis: they split one
// budget, exactly and fairly; then one instance is stopped, its Envoys open streams to the other,
// and the budget holds; then Redis restarts: the assignments expire into
// expired_assignment_behavior (reuse_last_assignment) and come back.
func TestFleetTwoInstancesOnRedis(t *testing.T) {
	srv, ins, f := twoInstancesOnRedis(t)
	f.run(time.Minute, skewed(0))
	before := allowedTotals(f)
	f.run(3*time.Minute, skewed(0))
	checkExact(t, f, 6000, 1)
	checkFair(t, f, skewed(0), before)

	ins[0].g.Stop() // its streams end; their demands leave the ledger as the handlers return
	f.run(2*time.Minute, skewed(0))
	for i, e := range f.envoys {
		if n, _ := e.Streams(); i%2 == 0 && n < 2 {
			t.Errorf("envoy %d of the stopped instance opened %d streams, want a second one", i, n)
		}
		if k := e.Kind(f.id); k != "tokens" {
			t.Errorf("envoy %d after the instance stopped: %s, want a token bucket", i, k)
		}
	}
	checkExact(t, f, 6000, 5)

	srv.Kill(t)
	f.wait = 3 * time.Second        // the ledger's timeout is 2s: no answer comes
	f.run(7*time.Second, skewed(0)) // over the 5s TTL
	f.wait = 30 * time.Second
	for i, e := range f.envoys {
		if k := e.Kind(f.id); k != "tokens expired" {
			t.Errorf("envoy %d with Redis down: %s, want its token bucket expired (reused)", i, k)
		}
	}
	if s := sum(f.rates()); s > 6000 {
		t.Errorf("with Redis down the reused assignments sum to %v a minute", s)
	}
	srv.Restart(t)
	f.run(5*time.Second, skewed(0))
	for i, e := range f.envoys {
		if k := e.Kind(f.id); k != "tokens" {
			t.Errorf("envoy %d after Redis came back: %s, want a token bucket", i, k)
		}
	}
}

// TestFleetExactWhileDemandMoves moves the hot spot to another Envoy every 20 seconds for four
// minutes: the token buckets are replaced (each starting full) and every minute stays within
// the limit plus the reassignment bound those replacements make.
func TestFleetExactWhileDemandMoves(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	in := startInstance(t, parseConfig(t, 6000), &rlqs.MemoryLedger{}, clock)
	f := newFleet(t, clock, 10, func(int) []string { return []string{in.addr} })
	f.run(time.Minute, skewed(0))
	for i := range 12 {
		f.run(20*time.Second, skewed(1+i%9))
	}
	checkExact(t, f, 6000, 1)
	replaced := uint64(0)
	for _, e := range f.envoys {
		b, _, _ := e.Bucket(f.id)
		replaced += b.Replaced
	}
	t.Logf("%d token buckets replaced", replaced)
	if replaced == 0 {
		t.Error("no token bucket was replaced: the demand did not move the shares")
	}
}

// twoInstancesOnRedis starts a redis-server, two instances of a limit of 6000 a minute on it, each
// with its own Store, and a fleet of ten Envoys, the i-th streaming to instance i%2 first and the
// other when that one is gone, all on one fake clock.
func twoInstancesOnRedis(t *testing.T) (*redistest.Server, []*instance, *fleet) {
	t.Helper()
	srv := redistest.Start(t)
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	cfg := parseConfig(t, 6000)
	var ins []*instance
	for range 2 {
		st, err := redisstore.New(redisstore.Config{URL: srv.URL()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		ins = append(ins, startInstance(t, cfg, st, clock))
	}
	f := newFleet(t, clock, 10, func(i int) []string { return []string{ins[i%2].addr, ins[(i+1)%2].addr} })
	return srv, ins, f
}
