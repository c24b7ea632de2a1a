package redisstore

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// ringClient models what makes a frozen Redis hold decisions up in rueidis: one connection's ring
// of 1<<ringScale places. A command takes a place, waiting for one without looking at its context
// when the ring is full (counted in overflows), and keeps it until the server answers. While frozen
// the server answers nothing: a call ends by its context, as rueidis's does, but its place stays
// taken until thaw (when rueidis would have dropped the connection). Everything but Do and DoMulti
// is left to the nil embedded Client.
type ringClient struct {
	rueidis.Client
	mu        sync.Mutex
	cond      *sync.Cond
	taken     int
	overflows int
	frozen    bool
	thawed    chan struct{}
}

func newRingClient() *ringClient {
	c := &ringClient{thawed: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *ringClient) freeze() {
	c.mu.Lock()
	c.frozen, c.thawed = true, make(chan struct{})
	c.mu.Unlock()
}

func (c *ringClient) thaw() {
	c.mu.Lock()
	c.frozen = false
	close(c.thawed)
	c.mu.Unlock()
}

func (c *ringClient) free() {
	c.mu.Lock()
	c.taken--
	c.cond.Signal()
	c.mu.Unlock()
}

func (c *ringClient) Do(ctx context.Context, _ rueidis.Completed) rueidis.RedisResult {
	c.mu.Lock()
	if c.taken == 1<<ringScale {
		c.overflows++
	}
	for c.taken == 1<<ringScale {
		c.cond.Wait() // as rueidis's ring: the context is not looked at
	}
	c.taken++
	frozen, thawed := c.frozen, c.thawed
	c.mu.Unlock()
	if !frozen {
		c.free()
		return rueidis.RedisResult{}
	}
	select {
	case <-thawed:
		c.free()
		return rueidis.RedisResult{}
	case <-ctx.Done():
		go func() { <-thawed; c.free() }()
		return rueidis.NewErrorResult(ctx.Err())
	}
}

func (c *ringClient) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	res := c.Do(ctx, rueidis.Completed{})
	resps := make([]rueidis.RedisResult, len(multi))
	for i := range resps {
		resps[i] = res
	}
	return resps
}

// fanIn has callers goroutines call do in a loop, each call bounded by timeout, for healthy, then
// with c frozen for frozen, then thawed for healthy again. It returns the slowest call and the
// number of calls after the thaw that succeeded.
func fanIn(c *ringClient, callers int, timeout, healthy, frozen time.Duration, do func(ctx context.Context) error) (slowest time.Duration, after int64) {
	var (
		stop    atomic.Bool
		thawed  atomic.Bool
		worst   atomic.Int64
		decided atomic.Int64
		wg      sync.WaitGroup
	)
	for range callers {
		wg.Go(func() {
			for !stop.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				start := time.Now()
				err := do(ctx)
				elapsed := time.Since(start)
				cancel()
				if int64(elapsed) > worst.Load() {
					worst.Store(int64(elapsed))
				}
				if err == nil && thawed.Load() {
					decided.Add(1)
				}
				time.Sleep(time.Millisecond) // not a spin: 2,000 spinning goroutines would starve the timers
			}
		})
	}
	time.Sleep(healthy)
	c.freeze()
	time.Sleep(frozen)
	c.thaw()
	thawed.Store(true)
	time.Sleep(healthy)
	stop.Store(true)
	wg.Wait()
	return time.Duration(worst.Load()), decided.Load()
}

// The bound, against a model of rueidis's ring: 2,000 callers on a frozen connection never need
// more places than the ring has, so none would wait inside the client, ignoring its deadline (the
// slowest call is logged; TestFanInFreeze checks deadlines against a real Redis); calls succeed
// again after the thaw; the tokens of calls given up on come back after
// hold; and stop leaves no worker behind. The same load on the model without the bound overflows
// it: the test can tell.
func TestInflightKeepsTheRingFromFilling(t *testing.T) {
	const (
		callers = 2000
		timeout = 50 * time.Millisecond
		healthy = 200 * time.Millisecond
		frozen  = 600 * time.Millisecond
		hold    = 2 * time.Second // longer than the freeze: the model frees places at the thaw
	)

	bare := newRingClient()
	fanIn(bare, callers, timeout, healthy, frozen, func(ctx context.Context) error {
		return bare.Do(ctx, rueidis.Completed{}).Error()
	})
	if bare.overflows == 0 {
		t.Fatalf("%d callers on the bare model never filled its ring of %d: the test cannot tell", callers, 1<<ringScale)
	}
	t.Logf("without the bound: %d calls waited for a place in the ring, ignoring their context", bare.overflows)

	baseline := runtime.NumGoroutine()
	c := newRingClient()
	in := newInflight(hold)
	b := &bounded{Client: c, in: in}
	var multi atomic.Int64
	slowest, after := fanIn(c, callers, timeout, healthy, frozen, func(ctx context.Context) error {
		if multi.Add(1)%16 == 0 { // DoMulti now and then: the same bound
			return b.DoMulti(ctx, rueidis.Completed{}, rueidis.Completed{})[1].Error()
		}
		return b.Do(ctx, rueidis.Completed{}).Error()
	})
	t.Logf("with the bound: slowest call %v (timeout %v), %d calls decided after the thaw, %d tokens held after it", slowest, timeout, after, len(in.sem))
	if c.overflows != 0 {
		t.Fatalf("%d calls waited for a place in the ring", c.overflows)
	}
	if after == 0 {
		t.Fatal("no call succeeded after the thaw")
	}
	deadline := time.Now().Add(hold + 10*time.Second)
	for len(in.sem) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d tokens still held %v after the thaw", len(in.sem), hold+10*time.Second)
		}
		time.Sleep(10 * time.Millisecond)
	}
	in.stop()
	requireGoroutinesBack(t, "after stop", baseline)
}

// A call whose context is done before it starts never reaches the client; a cancelled call
// returns the context's error.
func TestInflightHonoursItsContext(t *testing.T) {
	c := newRingClient()
	in := newInflight(time.Second)
	defer in.stop()
	b := &bounded{Client: c, in: in}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Do(ctx, rueidis.Completed{}).Error(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do with a cancelled context: %v", err)
	}
	for _, r := range b.DoMulti(ctx, rueidis.Completed{}, rueidis.Completed{}) {
		if !errors.Is(r.Error(), context.Canceled) {
			t.Fatalf("DoMulti with a cancelled context: %v", r.Error())
		}
	}
	if c.taken != 0 || len(in.sem) != 0 {
		t.Fatalf("a call with a done context took a place (%d) or a token (%d)", c.taken, len(in.sem))
	}
	if b.DoMulti(context.Background()) != nil {
		t.Fatal("DoMulti of nothing returned results")
	}
}

// instantClient answers every command at once, with nothing.
type instantClient struct{ rueidis.Client }

func (instantClient) Do(context.Context, rueidis.Completed) rueidis.RedisResult {
	return rueidis.RedisResult{}
}

// BenchmarkInflight measures what the bound adds to a call on a healthy Redis (the inline path),
// on a client that answers at once.
func BenchmarkInflight(b *testing.B) {
	in := newInflight(time.Second)
	defer in.stop()
	c := &bounded{Client: instantClient{}, in: in}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Do(ctx, rueidis.Completed{})
		}
	})
}

// The token of a command given up on is kept for twice the longest rueidis takes to drop a silent
// connection: two keep-alive intervals (1s each) and a write timeout (1s, or the URL's).
func TestAbandonedHold(t *testing.T) {
	for url, want := range map[string]time.Duration{
		"redis://127.0.0.1:6379":                  6 * time.Second,
		"redis://127.0.0.1:6379?write_timeout=3s": 10 * time.Second,
	} {
		s, err := New(Config{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		if s.inflight.hold != want {
			t.Errorf("New(%q): abandoned commands hold their tokens for %v, want %v", url, s.inflight.hold, want)
		}
		if s.opt.RingScaleEachConn != ringScale {
			t.Errorf("New(%q): RingScaleEachConn %d, want %d", url, s.opt.RingScaleEachConn, ringScale)
		}
		s.Close()
	}
}
