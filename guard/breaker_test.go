package guard_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/guard"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/limittest"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/redisstore"
)

// counting is an admit.Store that forwards every operation to another and counts the calls that
// reach it: the round trips a decorator above it did not save.
type counting struct {
	next  admit.Store
	calls atomic.Int64
}

func (c *counting) Take(ctx context.Context, r admit.Request) (admit.Decision, error) {
	c.calls.Add(1)
	return c.next.Take(ctx, r)
}

func (c *counting) TakeAll(ctx context.Context, rs []admit.Request, ds []admit.Decision) (bool, error) {
	c.calls.Add(1)
	return c.next.TakeAll(ctx, rs, ds)
}

func (c *counting) Release(ctx context.Context, l admit.Lease) error {
	c.calls.Add(1)
	return c.next.Release(ctx, l)
}

func (c *counting) Settle(ctx context.Context, res admit.Reservation, actual int64) (admit.Decision, error) {
	c.calls.Add(1)
	return c.next.Settle(ctx, res, actual)
}

func (c *counting) Reset(ctx context.Context, keys []string) error {
	c.calls.Add(1)
	return c.next.Reset(ctx, keys)
}

func newClock() *limittest.Clock {
	return limittest.NewClock(time.Date(2026, 3, 1, 12, 0, 7, 123_456_789, time.UTC))
}

// newRedisStore returns a redisstore.Store of url with the given command timeout, closed at cleanup.
func newRedisStore(t testing.TB, url string, timeout time.Duration) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(redisstore.Config{URL: url, CommandTimeout: timeout, DialTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var perMinute = admit.Limit{Name: "per-minute", Algorithm: admit.FixedWindow, Rate: 3, Period: time.Minute}

// req returns a Take of 1 under perMinute on rl:key: inside ~rl:*, the key pattern of the
// least-privilege user the Redis-backed tests run as.
func req(key string) admit.Request { return admit.Request{Key: "rl:" + key, Limit: perMinute, Cost: 1} }

// transitions records a Breaker's changes of state.
type transitions struct {
	mu  sync.Mutex
	got []string
}

func (tr *transitions) record(from, to guard.BreakerState) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.got = append(tr.got, from.String()+"→"+to.String())
}

func (tr *transitions) String() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	s := ""
	for i, g := range tr.got {
		if i > 0 {
			s += " "
		}
		s += g
	}
	return s
}

// wantState fails t unless b is in state want.
func wantState(t *testing.T, b *guard.Breaker, want guard.BreakerState) {
	t.Helper()
	if got := b.State(); got != want {
		t.Fatalf("State() = %v, want %v", got, want)
	}
}

// awaitState fails t unless b comes to state want within a minute: a Store's own timeout is counted
// once its Store has judged it (redisstore: after a grace, on its own timer).
func awaitState(t *testing.T, b *guard.Breaker, want guard.BreakerState) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); b.State() != want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("State() = %v a minute on, want %v", b.State(), want)
		}
	}
}

// wantUnavailable fails t unless err matches admit.ErrUnavailable, and matches guard.ErrOpen as open says.
func wantUnavailable(t *testing.T, err error, open bool) {
	t.Helper()
	if !errors.Is(err, admit.ErrUnavailable) {
		t.Fatalf("error %v does not match admit.ErrUnavailable", err)
	}
	if errors.Is(err, guard.ErrOpen) != open {
		t.Fatalf("error %v: matches guard.ErrOpen = %v, want %v", err, !open, open)
	}
}

func TestBreakerKilledRedis(t *testing.T) {
	srv := redistest.Start(t)
	backend := &counting{next: newRedisStore(t, srv.URL(), 200*time.Millisecond)}
	clock := newClock()
	var tr transitions
	b := guard.NewBreaker(backend, guard.BreakerOptions{Failures: 3, CoolOff: time.Second, Now: clock.Now, OnStateChange: tr.record})
	ctx := t.Context()

	if d, err := b.Take(ctx, req("k")); err != nil || !d.Allowed {
		t.Fatalf("healthy Take = %+v, %v; want allowed", d, err)
	}
	srv.Kill(t)
	for i := range 3 {
		_, err := b.Take(ctx, req("k"))
		wantUnavailable(t, err, false)
		if i < 2 {
			wantState(t, b, guard.BreakerClosed)
		}
	}
	wantState(t, b, guard.BreakerOpen)
	calls := backend.calls.Load()
	for range 100 {
		_, err := b.Take(ctx, req("k"))
		wantUnavailable(t, err, true)
	}
	var ds [1]admit.Decision
	_, err := b.TakeAll(ctx, []admit.Request{req("k")}, ds[:])
	wantUnavailable(t, err, true)
	_, err = b.Settle(ctx, admit.Reservation{Request: req("k"), Token: 1}, 0)
	wantUnavailable(t, err, true)
	if got := backend.calls.Load(); got != calls {
		t.Fatalf("the open Breaker made %d backend calls", got-calls)
	}
	if got := b.Refused(); got != 102 {
		t.Fatalf("Refused() = %d, want 102", got)
	}

	// After the cool-off, a probe goes through; Redis is still down, so it reopens the Breaker.
	clock.Advance(time.Second)
	_, err = b.Take(ctx, req("k"))
	wantUnavailable(t, err, false)
	wantState(t, b, guard.BreakerOpen)
	if got := backend.calls.Load(); got != calls+1 {
		t.Fatalf("the probe made %d backend calls, want 1", got-calls)
	}
	_, err = b.Take(ctx, req("k"))
	wantUnavailable(t, err, true)

	// Recovery: a probe succeeds and closes the Breaker. The first may still find a connection of
	// the killed server (EOF) and reopen it; a few cool-offs later one gets through.
	srv.Restart(t)
	failedProbes := 0
	for probe := 1; ; probe++ {
		clock.Advance(time.Second)
		d, err := b.Take(ctx, req("k"))
		if err == nil && d.Allowed {
			break
		}
		failedProbes++
		if probe == 5 {
			t.Fatalf("probe %d after restart = %+v, %v; want allowed", probe, d, err)
		}
		t.Logf("probe %d after restart: %v", probe, err)
	}
	wantState(t, b, guard.BreakerClosed)
	if d, err := b.Take(ctx, req("k")); err != nil || !d.Allowed {
		t.Fatalf("Take after recovery = %+v, %v; want allowed", d, err)
	}
	if got := b.Opened(); got != uint64(2+failedProbes) {
		t.Fatalf("Opened() = %d, want %d", got, 2+failedProbes)
	}
	want := "closed→open open→half_open half_open→open " + strings.Repeat("open→half_open half_open→open ", failedProbes) + "open→half_open half_open→closed"
	if got := tr.String(); got != want {
		t.Fatalf("transitions:\n got %s\nwant %s", got, want)
	}
}

func TestBreakerBlackHole(t *testing.T) {
	backend := &counting{next: newRedisStore(t, "redis://"+redistest.BlackHole(t), 100*time.Millisecond)}
	clock := newClock()
	b := guard.NewBreaker(backend, guard.BreakerOptions{Failures: 2, Now: clock.Now})
	ctx := t.Context()
	for range 2 {
		_, err := b.Take(ctx, req("k"))
		wantUnavailable(t, err, false) // each waited for the command timeout
	}
	awaitState(t, b, guard.BreakerOpen)
	for range 1000 {
		_, err := b.Take(ctx, req("k"))
		wantUnavailable(t, err, true)
	}
	if got := backend.calls.Load(); got != 2 {
		t.Fatalf("%d backend calls, want the 2 that opened the Breaker", got)
	}

	// Half-open: one probe in flight (it waits on the black hole), every other caller gets ErrOpen.
	clock.Advance(guard.DefaultCoolOff)
	probed := make(chan error)
	go func() {
		_, err := b.Take(ctx, req("k"))
		probed <- err
	}()
	for backend.calls.Load() != 3 {
		time.Sleep(time.Millisecond) // until the probe has reached the backend
	}
	wantState(t, b, guard.BreakerHalfOpen)
	for range 10 {
		_, err := b.Take(ctx, req("k"))
		wantUnavailable(t, err, true)
	}
	wantUnavailable(t, <-probed, false)
	awaitState(t, b, guard.BreakerOpen)
	if got := backend.calls.Load(); got != 3 {
		t.Fatalf("%d backend calls, want 3", got)
	}
}

func TestBreakerCorruptStateDoesNotTrip(t *testing.T) {
	srv := redistest.Start(t)
	backend := &counting{next: newRedisStore(t, srv.URL(), time.Second)}
	b := guard.NewBreaker(backend, guard.BreakerOptions{Failures: 2, Now: newClock().Now})
	srv.Do(t, "SET", "rl:corrupt", "abc")
	for range 10 {
		_, err := b.Take(t.Context(), req("corrupt"))
		if !errors.Is(err, admit.ErrCorruptState) {
			t.Fatalf("Take of a corrupt key: %v, want ErrCorruptState", err)
		}
	}
	wantState(t, b, guard.BreakerClosed)
	if got := backend.calls.Load(); got != 10 {
		t.Fatalf("%d backend calls, want 10", got)
	}
	// A corrupt key between failures resets the count: the backend answered.
	if got := b.Opened(); got != 0 {
		t.Fatalf("Opened() = %d, want 0", got)
	}
}

func TestBreakerCallerGivingUpDoesNotTrip(t *testing.T) {
	backend := &counting{next: newRedisStore(t, "redis://"+redistest.BlackHole(t), time.Second)}
	b := guard.NewBreaker(backend, guard.BreakerOptions{Failures: 1, Now: newClock().Now})

	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	for range 3 {
		_, err := b.Take(cancelled, req("k"))
		if err == nil {
			t.Fatal("Take with a cancelled context: no error")
		}
	}
	wantState(t, b, guard.BreakerClosed)

	// The caller's deadline, shorter than the store's timeout, ends the call on the black hole.
	short, cancel2 := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel2()
	_, err := b.Take(short, req("k"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Take with a short deadline: %v, want DeadlineExceeded", err)
	}
	wantState(t, b, guard.BreakerClosed)
}

func TestBreakerStoreTimeoutTrips(t *testing.T) {
	backend := newRedisStore(t, "redis://"+redistest.BlackHole(t), 30*time.Millisecond)
	b := guard.NewBreaker(backend, guard.BreakerOptions{Failures: 1, Now: newClock().Now})
	// The caller's ctx has no deadline: the DeadlineExceeded is the store's own timeout.
	_, err := b.Take(t.Context(), req("k"))
	wantUnavailable(t, err, false)
	awaitState(t, b, guard.BreakerOpen)
}

func TestBreakerInvalidRequests(t *testing.T) {
	backend := newRedisStore(t, "redis://"+redistest.ClosedPort(t), 200*time.Millisecond)
	b := guard.NewBreaker(backend, guard.BreakerOptions{Failures: 1, Now: newClock().Now})
	bad := admit.Request{Key: "", Limit: perMinute, Cost: 1}
	for range 3 {
		if _, err := b.Take(t.Context(), bad); !errors.Is(err, admit.ErrInvalidRequest) {
			t.Fatalf("invalid Take: %v, want ErrInvalidRequest", err)
		}
	}
	wantState(t, b, guard.BreakerClosed)
	_, err := b.Take(t.Context(), req("k")) // refused: opens the Breaker
	wantUnavailable(t, err, false)
	wantState(t, b, guard.BreakerOpen)
	// Open, an invalid request still gets its own error: it is a caller's mistake, not an outage.
	if _, err := b.Take(t.Context(), bad); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Fatalf("invalid Take, open: %v, want ErrInvalidRequest", err)
	}
	if err := b.Release(t.Context(), admit.Lease{Key: "k", Limit: perMinute, Token: 1}); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Fatalf("Release of a fixed-window lease, open: %v, want ErrInvalidRequest", err)
	}
}

// A Breaker over a correct store decides exactly as the store does.
func TestBreakerConformance(t *testing.T) {
	limittest.TestStore(t, func(t *testing.T) limittest.Backend {
		clock := newClock()
		s := memstore.New(memstore.Options{Now: clock.Now})
		t.Cleanup(func() { s.Close() })
		return &memBackend{clock: clock, store: guard.NewBreaker(s, guard.BreakerOptions{Now: clock.Now})}
	})
}

// memBackend is a limittest.Backend of one decorated memstore on a fake clock.
type memBackend struct {
	clock *limittest.Clock
	store admit.Store
}

func (b *memBackend) Open(t *testing.T) admit.Store       { return b.store }
func (b *memBackend) Now(t *testing.T) time.Time          { return b.clock.Now() }
func (b *memBackend) Sleep(t *testing.T, d time.Duration) { b.clock.Advance(d) }

// BenchmarkBreakerOpen measures a Take answered by an open Breaker: no backend call.
func BenchmarkBreakerOpen(b *testing.B) {
	backend := newRedisStore(b, "redis://"+redistest.ClosedPort(b), 200*time.Millisecond)
	br := guard.NewBreaker(backend, guard.BreakerOptions{Failures: 1, CoolOff: time.Hour})
	ctx := context.Background()
	if _, err := br.Take(ctx, req("k")); errors.Is(err, guard.ErrOpen) || err == nil {
		b.Fatalf("first Take: %v, want a refused connection", err)
	}
	if br.State() != guard.BreakerOpen {
		b.Fatal("the Breaker did not open")
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := req("k")
		for pb.Next() {
			if _, err := br.Take(ctx, r); err != guard.ErrOpen {
				b.Fatalf("Take: %v, want ErrOpen", err)
			}
		}
	})
}

// A probe whose caller gives up tells nothing: the Breaker stays half-open and the next operation
// probes.
func TestBreakerProbeCallerGivesUp(t *testing.T) {
	backend := &counting{next: newRedisStore(t, "redis://"+redistest.ClosedPort(t), 200*time.Millisecond)}
	clock := newClock()
	b := guard.NewBreaker(backend, guard.BreakerOptions{Failures: 1, Now: clock.Now})
	_, err := b.Take(t.Context(), req("k"))
	wantUnavailable(t, err, false)
	wantState(t, b, guard.BreakerOpen)
	clock.Advance(guard.DefaultCoolOff)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.Take(cancelled, req("k")); err == nil || errors.Is(err, guard.ErrOpen) {
		t.Fatalf("probe with a cancelled context: %v, want its own error", err)
	}
	wantState(t, b, guard.BreakerHalfOpen)
	_, err = b.Take(t.Context(), req("k")) // the next probe: refused by the closed port
	wantUnavailable(t, err, false)
	wantState(t, b, guard.BreakerOpen)
	if got := backend.calls.Load(); got != 3 {
		t.Fatalf("%d backend calls, want 3", got)
	}
}

// Many callers at once: once open, no call reaches the backend; before, at most the ones already
// in flight when the last counted failure came back.
func TestBreakerConcurrentCallers(t *testing.T) {
	backend := &counting{next: newRedisStore(t, "redis://"+redistest.ClosedPort(t), 200*time.Millisecond)}
	const failures, workers = 5, 8
	b := guard.NewBreaker(backend, guard.BreakerOptions{Failures: failures, CoolOff: time.Hour})
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range 200 {
				_, err := b.Take(context.Background(), req("k"))
				if !errors.Is(err, admit.ErrUnavailable) {
					t.Errorf("Take: %v, want unavailable", err)
					return
				}
			}
		})
	}
	wg.Wait()
	wantState(t, b, guard.BreakerOpen)
	if got := backend.calls.Load(); got > failures+workers-1 {
		t.Fatalf("%d backend calls, want at most %d", got, failures+workers-1)
	}
	if got := b.Opened(); got != 1 {
		t.Fatalf("Opened() = %d, want 1", got)
	}
}

// switchable is an admit.Store that forwards to next while up, and fails every operation with an
// error matching admit.ErrUnavailable while down.
type switchable struct {
	next admit.Store
	down atomic.Bool
}

var errDown = fmt.Errorf("switchable: %w", admit.ErrUnavailable)

func (s *switchable) Take(ctx context.Context, r admit.Request) (admit.Decision, error) {
	if s.down.Load() {
		return admit.Decision{}, errDown
	}
	return s.next.Take(ctx, r)
}

func (s *switchable) TakeAll(ctx context.Context, rs []admit.Request, ds []admit.Decision) (bool, error) {
	if s.down.Load() {
		return false, errDown
	}
	return s.next.TakeAll(ctx, rs, ds)
}

func (s *switchable) Release(ctx context.Context, l admit.Lease) error {
	if s.down.Load() {
		return errDown
	}
	return s.next.Release(ctx, l)
}

func (s *switchable) Settle(ctx context.Context, res admit.Reservation, actual int64) (admit.Decision, error) {
	if s.down.Load() {
		return admit.Decision{}, errDown
	}
	return s.next.Settle(ctx, res, actual)
}

func (s *switchable) Reset(ctx context.Context, keys []string) error {
	if s.down.Load() {
		return errDown
	}
	return s.next.Reset(ctx, keys)
}

// Only consecutive failures open the Breaker: a success between them starts the count again, so
// fail, fail, succeed, then four more failures — six in all, never five in a row — leave it
// closed, and the fifth in a row opens it.
func TestBreakerCountsOnlyConsecutiveFailures(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	t.Cleanup(func() { mem.Close() })
	backend := &switchable{next: mem}
	var tr transitions
	b := guard.NewBreaker(backend, guard.BreakerOptions{Now: newClock().Now, OnStateChange: tr.record})
	take := func(up bool) {
		t.Helper()
		backend.down.Store(!up)
		_, err := b.Take(t.Context(), req("k"))
		if up && err != nil {
			t.Fatalf("Take with the backend up: %v", err)
		}
		if !up {
			wantUnavailable(t, err, false)
		}
	}
	for i, up := range []bool{false, false, true, false, false, false, false} {
		take(up)
		if b.State() != guard.BreakerClosed {
			t.Fatalf("after operation %d of fail, fail, succeed, fail, fail, fail, fail: State() = %v, want closed (transitions: %s); a success resets the count of consecutive failures",
				i+1, b.State(), &tr)
		}
	}
	take(false) // the fifth failure in a row
	wantState(t, b, guard.BreakerOpen)
	if got := b.Opened(); got != 1 {
		t.Fatalf("Opened() = %d, want 1", got)
	}
}

func (c *counting) SetOverride(ctx context.Context, o admit.Override) error {
	return c.next.SetOverride(ctx, o)
}
func (c *counting) Override(ctx context.Context, key string) (admit.Override, bool, error) {
	return c.next.Override(ctx, key)
}
func (c *counting) DeleteOverride(ctx context.Context, key string) (bool, error) {
	return c.next.DeleteOverride(ctx, key)
}
func (c *counting) Overrides(ctx context.Context, policy, cursor string, n int) ([]admit.Override, string, error) {
	return c.next.Overrides(ctx, policy, cursor, n)
}

func (s *switchable) SetOverride(ctx context.Context, o admit.Override) error {
	if s.down.Load() {
		return errDown
	}
	return s.next.SetOverride(ctx, o)
}
func (s *switchable) Override(ctx context.Context, key string) (admit.Override, bool, error) {
	if s.down.Load() {
		return admit.Override{}, false, errDown
	}
	return s.next.Override(ctx, key)
}
func (s *switchable) DeleteOverride(ctx context.Context, key string) (bool, error) {
	if s.down.Load() {
		return false, errDown
	}
	return s.next.DeleteOverride(ctx, key)
}
func (s *switchable) Overrides(ctx context.Context, policy, cursor string, n int) ([]admit.Override, string, error) {
	if s.down.Load() {
		return nil, "", errDown
	}
	return s.next.Overrides(ctx, policy, cursor, n)
}

func (c *counting) OverrideCount(ctx context.Context, policy string) (int64, error) {
	return c.next.OverrideCount(ctx, policy)
}
func (s *switchable) OverrideCount(ctx context.Context, policy string) (int64, error) {
	if s.down.Load() {
		return 0, errDown
	}
	return s.next.OverrideCount(ctx, policy)
}
