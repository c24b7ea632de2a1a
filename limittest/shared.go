package limittest

import (
	"context"
	"errors"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/ratelimitfield"
)

// The cases every algorithm passes, parameterised by the algorithm: its own numbers differ, but
// concurrency, bounds, invalid input, a done context, read-only rejections and short windows hold
// for all.

// A sharedCase is a subtest of every algorithm, parameterised by the algorithm.
type sharedCase struct {
	name string
	run  func(t *testing.T, b Backend, a *algorithm)
}

// sharedCases are run for every algorithm, as subtests of the algorithm's own.
var sharedCases = []sharedCase{
	{"Concurrent", testConcurrent},
	{"SharedAcrossStores", testSharedAcrossStores},
	{"RejectionsAreReadOnly", testRejectionsAreReadOnly},
	{"KeysAreIndependent", testKeysAreIndependent},
	{"ShortWindows", testShortWindows},
	{"Cost", testCost},
	{"PeekMissingKey", testPeekMissingKey},
	{"Invalid", testInvalid},
	{"Bounds", testBounds},
	{"RetryAfterSeconds", testRetryAfterSeconds},
	{"CancelledContext", testCancelledContext},
}

func testConcurrent(t *testing.T, b Backend, a *algorithm) {
	const goroutines = 40
	lim := a.perMinute(3)
	key := newKey()
	stores := [2]admit.Store{b.Open(t), b.Open(t)}

	ds := make([]admit.Decision, goroutines)
	errs := make([]error, goroutines)
	race(goroutines, func(i int) {
		ds[i], errs[i] = stores[i%2].Take(t.Context(), admit.Request{Key: key, Limit: lim, Cost: 1})
	})

	var remaining []int64
	for i, d := range ds {
		if errs[i] != nil {
			t.Fatalf("goroutine %d: Take: unexpected error: %v", i, errs[i])
		}
		checkDecision(t, d, lim, 1)
		if d.Allowed {
			remaining = append(remaining, d.Remaining)
		}
	}
	if len(remaining) != 3 {
		t.Fatalf("%d goroutines took one unit each under %v: %d admitted; want exactly 3", goroutines, lim, len(remaining))
	}
	seen := map[int64]bool{}
	for _, r := range remaining {
		seen[r] = true
	}
	if !seen[0] || !seen[1] || !seen[2] {
		t.Errorf("the 3 admitted Decisions reported remaining %v; want 2, 1 and 0 in some order (each admission sees the others)", remaining)
	}
	if d := take(t, stores[0], key, lim, 0); !d.Allowed || d.Remaining != 0 {
		t.Errorf("peek after the race = allowed %v, remaining %d; want allowed true, remaining 0", d.Allowed, d.Remaining)
	}
}

// race calls f(0) … f(goroutines-1), each on a goroutine of its own, all released at once when every
// one has started, and returns when every call has.
func race(goroutines int, f func(i int)) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(goroutines)
	done.Add(goroutines)
	for i := range goroutines {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			f(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}

// raceCount is race, and counts the calls of f that return true.
func raceCount(goroutines int, f func(i int) bool) int {
	var n atomic.Int64
	race(goroutines, func(i int) {
		if f(i) {
			n.Add(1)
		}
	})
	return int(n.Load())
}

func testSharedAcrossStores(t *testing.T, b Backend, a *algorithm) {
	lim := a.perMinute(3)
	keys := keyBuilder(t)
	subject := newKey() // any string: the Limiters digest it
	key, err := keys.Key(lim, bound.DefaultVersion, admit.Subject{ID: subject})
	if err != nil {
		t.Fatal(err)
	}
	s1, s2 := b.Open(t), b.Open(t)
	l1, l2 := admit.NewLimiter(s1, keys, lim), admit.NewLimiter(s2, keys, lim)
	calls := []struct {
		name      string
		take      func() (admit.Decision, error)
		allowed   bool
		remaining int64
	}{
		{"limiter 1", func() (admit.Decision, error) { return l1.Allow(t.Context(), admit.Subject{ID: subject}) }, true, 2},
		{"limiter 2", func() (admit.Decision, error) { return l2.Allow(t.Context(), admit.Subject{ID: subject}) }, true, 1},
		{"store 2", func() (admit.Decision, error) {
			return s2.Take(t.Context(), admit.Request{Key: key, Limit: lim, Cost: 1})
		}, true, 0},
		{"limiter 1", func() (admit.Decision, error) { return l1.Allow(t.Context(), admit.Subject{ID: subject}) }, false, 0},
		{"store 1", func() (admit.Decision, error) {
			return s1.Take(t.Context(), admit.Request{Key: key, Limit: lim, Cost: 1})
		}, false, 0},
		{"limiter 2", func() (admit.Decision, error) { return l2.AllowN(t.Context(), admit.Subject{ID: subject}, 1) }, false, 0},
		{"store 1 peek", func() (admit.Decision, error) {
			return s1.Take(t.Context(), admit.Request{Key: key, Limit: lim, Cost: 0})
		}, true, 0},
	}
	for i, c := range calls {
		d, err := c.take()
		if err != nil {
			t.Fatalf("call %d (%s): unexpected error: %v", i, c.name, err)
		}
		if d.Allowed != c.allowed || d.Remaining != c.remaining {
			t.Fatalf("call %d (%s) = allowed %v, remaining %d; want allowed %v, remaining %d (Stores of one Backend share each key)",
				i, c.name, d.Allowed, d.Remaining, c.allowed, c.remaining)
		}
	}
}

func testRejectionsAreReadOnly(t *testing.T, b Backend, a *algorithm) {
	lim := a.perMinute(3)
	key := newKey()
	s := b.Open(t)
	run(t, b, s, key, lim, []step{
		{n: 1, allowed: true, remaining: 2, fresh: true},
		{n: 1, allowed: true, remaining: 1},
	})
	// Let time pass, so that a rejection that refreshed the expiry would show in ResetAfter.
	b.Sleep(t, 20*time.Millisecond)

	// Partly full: a rejected Take of 2 must not count.
	before := take(t, s, key, lim, 0)
	if !before.Allowed || before.Remaining != 1 {
		t.Fatalf("peek = allowed %v, remaining %d; want allowed, remaining 1", before.Allowed, before.Remaining)
	}
	if !a.unitCost { // a partly full key admits every cost of 1
		rejectMany(t, s, key, lim, 2, 1, before.ResetAfter)
		after := take(t, s, key, lim, 0)
		if after.Remaining != before.Remaining || after.ResetAfter > before.ResetAfter {
			t.Fatalf("peek before 20 rejections: remaining %d, ResetAfter %v; after: remaining %d, ResetAfter %v; want the same remaining and ResetAfter not increased",
				before.Remaining, before.ResetAfter, after.Remaining, after.ResetAfter)
		}
	}

	// Full: take the last unit, then reject more.
	run(t, b, s, key, lim, []step{{n: 1, allowed: true, remaining: 0}})
	before = take(t, s, key, lim, 0)
	maxRetry := before.ResetAfter
	if a.unitCost {
		// Time passes, so that a rejection that renewed the units held would show in a later
		// rejection's RetryAfter: the wait for a unit to come back only shrinks.
		b.Sleep(t, 20*time.Millisecond)
		maxRetry = take(t, s, key, lim, 1).RetryAfter
	}
	rejectMany(t, s, key, lim, 1, 0, maxRetry)
	after := take(t, s, key, lim, 0)
	if after.Remaining != 0 || after.ResetAfter > before.ResetAfter {
		t.Fatalf("peek before 20 rejections: remaining %d, ResetAfter %v; after: remaining %d, ResetAfter %v; want remaining 0 and ResetAfter not increased",
			before.Remaining, before.ResetAfter, after.Remaining, after.ResetAfter)
	}
	// A wait that runs from the first admission, 20 ms ago or more, has no more than that left.
	if a.windowFromFirst && after.ResetAfter > lim.MaxWait()-20*time.Millisecond {
		t.Fatalf("peek after 20 rejections: ResetAfter %v; want at most %v: the key's wait began with its first admission, at least 20ms ago",
			after.ResetAfter, lim.MaxWait()-20*time.Millisecond)
	}
	// Remaining stops at 0; a larger Limit on the same key shows the stored count itself.
	big := a.withRoom(lim, 100)
	if d := take(t, s, key, big, 0); d.Remaining != 97 {
		t.Fatalf("peek under %v after 3 admissions and 40 rejections: remaining %d; want 97 (rejections must not count)", big, d.Remaining)
	}
}

// rejectMany takes n units of key 20 times, each of which must be rejected with the given remaining and
// a RetryAfter of at most maxRetry.
func rejectMany(t *testing.T, s admit.Store, key string, lim admit.Limit, n, remaining int64, maxRetry time.Duration) {
	t.Helper()
	for i := range 20 {
		d := take(t, s, key, lim, n)
		if d.Allowed || d.Remaining != remaining {
			t.Fatalf("rejection %d: Take(n=%d) = allowed %v, remaining %d; want rejected, remaining %d", i, n, d.Allowed, d.Remaining, remaining)
		}
		if d.RetryAfter > maxRetry {
			t.Fatalf("rejection %d: RetryAfter = %v, more than the %v left before it: a rejection must not extend the window", i, d.RetryAfter, maxRetry)
		}
	}
}

func testKeysAreIndependent(t *testing.T, b Backend, a *algorithm) {
	lim := a.perMinute(3)
	s := b.Open(t)
	k1 := newKey()
	k2 := k1 + "b" // shares a prefix with k1
	run(t, b, s, k1, lim, a.steps([]step{
		{n: 3, allowed: true, remaining: 0, fresh: true},
		{n: 1, allowed: false, remaining: 0},
	}))
	run(t, b, s, k2, lim, a.steps([]step{
		{n: 1, allowed: true, remaining: 2, fresh: true},
		{n: 0, allowed: true, remaining: 2},
	}))
	run(t, b, s, newKey(), lim, a.steps([]step{
		{n: 0, allowed: true, remaining: 3},
		{n: 2, allowed: true, remaining: 1, fresh: true},
	}))
	run(t, b, s, k1, lim, a.steps([]step{{n: 1, allowed: false, remaining: 0}}))
	run(t, b, s, k2, lim, a.steps([]step{{n: 2, allowed: true, remaining: 0}}))
}

// testShortWindows hammers keys whose windows last 1 to 5 ms from several goroutines and two Stores
// while time passes, so that decisions meet every instant of a window, its last one included. Every
// decision must be made — no error — and valid.
func testShortWindows(t *testing.T, b Backend, a *algorithm) {
	const workers = 8
	stores := [2]admit.Store{b.Open(t), b.Open(t)}
	var keys [5]string
	var limits [5]admit.Limit
	for i := range keys {
		keys[i] = newKey()
		limits[i] = a.limit(3, time.Duration(i+1)*time.Millisecond)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	decided := 0
	var attempts atomic.Int64
	for w := range workers {
		wg.Go(func() {
			s := stores[w%2]
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := (w + i) % len(keys)
				n := int64(i % 2) // takes and peeks
				d, err := s.Take(t.Context(), admit.Request{Key: keys[k], Limit: limits[k], Cost: n})
				attempts.Add(1)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					decided++
				}
				mu.Unlock()
				if err == nil {
					checkDecision(t, d, limits[k], n)
				}
			}
		})
	}
	for range 400 {
		b.Sleep(t, 250*time.Microsecond)
		// On a fake clock Sleep returns at once: let the workers decide at this instant first.
		for seen := attempts.Load(); attempts.Load() == seen; {
			runtime.Gosched()
		}
	}
	close(stop)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d decisions on windows of 1–5 ms failed; the first: %v", len(errs), len(errs)+decided, errs[0])
	}
	if decided < workers {
		t.Fatalf("only %d decisions were made; want many", decided)
	}
}

func testCost(t *testing.T, b Backend, a *algorithm) {
	if a.unitCost {
		// Every case here is about costs above 1, which the algorithm refuses (Invalid checks it).
		t.Skip("the algorithm's requests cost 0 or 1")
	}
	s := b.Open(t)
	lim := a.perMinute(10)
	run(t, b, s, newKey(), lim, []step{
		{n: 4, allowed: true, remaining: 6, fresh: true},
		{n: 4, allowed: true, remaining: 2},
		{n: 4, allowed: false, remaining: 2},
		{n: 3, allowed: false, remaining: 2},
		{n: 2, allowed: true, remaining: 0},
		{n: 1, allowed: false, remaining: 0},
	})
	// A cost equal to the limit is allowed on a fresh key, and only there.
	run(t, b, s, newKey(), lim, []step{
		{n: 10, allowed: true, remaining: 0, fresh: true},
		{n: 1, allowed: false, remaining: 0},
		{n: 10, allowed: false, remaining: 0},
	})
	run(t, b, s, newKey(), lim, []step{
		{n: 1, allowed: true, remaining: 9, fresh: true},
		{n: 10, allowed: false, remaining: 9},
		{n: 9, allowed: true, remaining: 0},
	})
	one := a.perMinute(1)
	run(t, b, s, newKey(), one, []step{
		{n: 1, allowed: true, remaining: 0, fresh: true},
		{n: 1, allowed: false, remaining: 0},
	})
}

func testPeekMissingKey(t *testing.T, b Backend, a *algorithm) {
	const window = 600 * time.Millisecond
	lim := a.limit(3, window)
	s := b.Open(t)
	key := newKey()
	for i := range 2 {
		d := take(t, s, key, lim, 0)
		if !d.Allowed || d.Remaining != 3 || d.RetryAfter != 0 || d.ResetAfter != 0 {
			t.Fatalf("peek %d of a missing key = %+v; want allowed, remaining 3, RetryAfter 0, ResetAfter 0", i, d)
		}
	}
	// Had the peeks created the key, its window would be half over by now.
	run(t, b, s, key, lim, a.steps([]step{
		{sleep: window / 2, n: 3, allowed: true, remaining: 0, fresh: true},
	}))
}

func testInvalid(t *testing.T, b Backend, a *algorithm) {
	s := b.Open(t)
	valid := a.perMinute(3)
	withRate := func(r int64) admit.Limit { l := valid; l.Rate = r; return l }
	withPeriod := func(p time.Duration) admit.Limit { l := valid; l.Period = p; return l }
	withAlgorithm := func(a admit.Algorithm) admit.Limit { l := valid; l.Algorithm = a; return l }
	long := newKey()
	long += strings.Repeat("x", bound.MaxKeyLen+1-len(long))

	tests := []struct {
		name string
		key  string // "" only for the empty-key case; otherwise a fresh key is used
		lim  admit.Limit
		n    int64
		want error
	}{
		{name: "rate_0", lim: withRate(0), n: 0, want: admit.ErrInvalidLimit},
		{name: "rate_-1", lim: withRate(-1), n: 0, want: admit.ErrInvalidLimit},
		{name: "rate_MaxRate+1", lim: withRate(bound.MaxRate + 1), n: 1, want: admit.ErrInvalidLimit},
		{name: "rate_MinInt64", lim: withRate(math.MinInt64), n: 0, want: admit.ErrInvalidLimit},
		{name: "period_0", lim: withPeriod(0), n: 1, want: admit.ErrInvalidLimit},
		{name: "period_-1m", lim: withPeriod(-time.Minute), n: 1, want: admit.ErrInvalidLimit},
		{name: "period_999µs", lim: withPeriod(999 * time.Microsecond), n: 1, want: admit.ErrInvalidLimit},
		{name: "period_MaxPeriod+1ms", lim: withPeriod(bound.MaxPeriod + time.Millisecond), n: 1, want: admit.ErrInvalidLimit},
		{name: "period_1500µs", lim: withPeriod(1500 * time.Microsecond), n: 1, want: admit.ErrInvalidLimit},
		{name: "algorithm_0", lim: withAlgorithm(0), n: 1, want: admit.ErrInvalidLimit},
		{name: "algorithm_99", lim: withAlgorithm(99), n: 1, want: admit.ErrInvalidLimit},
		{name: "empty_key", key: "", lim: valid, n: 1, want: admit.ErrInvalidRequest},
		{name: "key_of_513_bytes", key: long, lim: valid, n: 1, want: admit.ErrInvalidRequest},
		{name: "cost_-1", lim: valid, n: -1, want: admit.ErrInvalidRequest},
		{name: "cost_MinInt64", lim: valid, n: math.MinInt64, want: admit.ErrInvalidRequest},
		{name: "cost_limit+1", lim: valid, n: valid.Rate + 1, want: admit.ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := tt.key
			if tt.name != "empty_key" && key == "" {
				key = newKey()
			}
			d, err := s.Take(t.Context(), admit.Request{Key: key, Limit: tt.lim, Cost: tt.n})
			switch {
			case err == nil:
				t.Fatalf("Take(n=%d) under %+v = %+v, nil; want an error matching %v", tt.n, tt.lim, d, tt.want)
			case !errors.Is(err, tt.want):
				t.Fatalf("Take(n=%d) under %+v: error %q does not match %v", tt.n, tt.lim, err, tt.want)
			case errors.Is(err, admit.ErrUnavailable):
				t.Fatalf("Take(n=%d) under %+v: error %q matches ErrUnavailable; a caller's mistake is not an outage", tt.n, tt.lim, err)
			case d.Allowed:
				t.Fatalf("Take(n=%d) under %+v: error with an allowed Decision %+v", tt.n, tt.lim, d)
			}
			// Nothing was written: the key (or, for an oversized key, its first MaxKeyLen bytes) still
			// has its whole allowance, and a new window.
			switch {
			case key == "":
				return
			case len(key) > bound.MaxKeyLen:
				key = key[:bound.MaxKeyLen]
			}
			run(t, b, s, key, valid, a.steps([]step{{n: valid.Rate, allowed: true, remaining: 0, fresh: true}}))
		})
	}
}

func testBounds(t *testing.T, b Backend, a *algorithm) {
	s := b.Open(t)
	t.Run("MaxRate", func(t *testing.T) {
		// The algorithm's largest Limit whose keys' state stays a minute: MaxRate per minute for a
		// fixed or sliding window, MaxSlidingLogRate for a sliding log; for GCRA, the biggest bucket
		// that refills nothing in a minute.
		lim, most := a.largest, a.largest.Capacity()
		if a.unitCost {
			fillConcurrently(t, s, newKey(), lim, most)
			return
		}
		run(t, b, s, newKey(), lim, []step{
			{n: most, allowed: true, remaining: 0, fresh: true},
			{n: 1, allowed: false, remaining: 0},
		})
		run(t, b, s, newKey(), lim, []step{
			{n: 1, allowed: true, remaining: most - 1, fresh: true},
			{n: most, allowed: false, remaining: most - 1},
			{n: most - 2, allowed: true, remaining: 1},
			{n: 2, allowed: false, remaining: 1},
			{n: 1, allowed: true, remaining: 0},
		})
		if a.maxRate < bound.MaxRate {
			over := a.perMinute(a.maxRate + 1)
			if _, err := s.Take(t.Context(), admit.Request{Key: newKey(), Limit: over, Cost: 1}); !errors.Is(err, admit.ErrInvalidLimit) {
				t.Fatalf("Take under %v, above the algorithm's largest rate per minute %d: %v; want ErrInvalidLimit", over, a.maxRate, err)
			}
		}
	})
	t.Run("MaxPeriod", func(t *testing.T) {
		lim := a.limit(2, bound.MaxPeriod)
		run(t, b, s, newKey(), lim, []step{
			{n: 1, allowed: true, remaining: 1, fresh: true},
			{n: 0, allowed: true, remaining: 1},
		})
	})
	t.Run("MinPeriod", func(t *testing.T) {
		lim := a.limit(2, bound.MinPeriod)
		run(t, b, s, newKey(), lim, []step{{n: 1, allowed: true, remaining: 1}})
	})
	lim := a.perMinute(3)
	for _, k := range []struct {
		name string
		fill func(i int) byte
	}{
		{"text", func(i int) byte { return 'a' + byte(i%26) }},
		{"binary", func(i int) byte { return byte(255 - i%256) }}, // NUL, 0xFF, invalid UTF-8
		{"braces", func(i int) byte { return "{}{x}"[i%5] }},      // Redis Cluster hash tags
		{"CRLF", func(i int) byte { return "\r\n"[i%2] }},         // the RESP line end
	} {
		t.Run("key_of_512_bytes_"+k.name, func(t *testing.T) {
			key := []byte(newKey() + ":")
			for i := 0; len(key) < bound.MaxKeyLen; i++ {
				key = append(key, k.fill(i))
			}
			// A sibling that differs in the last byte only.
			sibling := []byte(string(key))
			sibling[len(sibling)-1] ^= 1
			run(t, b, s, string(key), lim, []step{
				{n: 1, allowed: true, remaining: 2, fresh: true},
				{n: 1, allowed: true, remaining: 1},
			})
			run(t, b, s, string(sibling), lim, []step{{n: 1, allowed: true, remaining: 2, fresh: true}})
			run(t, b, s, string(key), lim, []step{{n: 0, allowed: true, remaining: 1}})
		})
	}
}

func testRetryAfterSeconds(t *testing.T, b Backend, a *algorithm) {
	s := b.Open(t)
	for _, tt := range []struct {
		window time.Duration
		want   int64
	}{
		{10 * time.Second, 10},
		{1500 * time.Millisecond, 2},
	} {
		lim := a.limit(1, tt.window)
		var ds []admit.Decision
		// The rejection comes within tol of the admission: for an aligned window, in the same
		// window, which has more than twice that left at the admission.
		tol := min(tt.window/8, 200*time.Millisecond)
		timed(t, b, tol, func(tm *timing) {
			if a.aligned {
				if left := tm.windowLeft(lim); left < 3*tol {
					tm.sleep(left)
				}
			}
			ds = tm.run(s, newKey(), lim, []step{
				{n: 1, allowed: true, remaining: 0, fresh: true},
				{n: 1, allowed: false, remaining: 0},
			})
		})
		if a.aligned {
			// An aligned window ends at the next multiple of its period, which the admission reported:
			// the rejection waits for that end, in whole seconds rounded up.
			end, r, got := ds[0].ResetAfter, ds[1].RetryAfter, ratelimitfield.RetryAfter(ds[1])
			if r > end || r < end-slack(tt.window) || time.Duration(got)*time.Second < r || time.Duration(got-1)*time.Second >= r {
				t.Errorf("a rejection just after an admission that reported ResetAfter = %v: RetryAfter = %v, Retry-After = %d; want that end, rounded up to whole seconds",
					end, r, got)
			}
			continue
		}
		got := ratelimitfield.RetryAfter(ds[1])
		if lo, hi := a.refill(lim); lo == hi {
			if got != tt.want {
				t.Errorf("a rejection just after the first admission to a window of %v: RetryAfter = %v, Retry-After = %d; want %d",
					tt.window, ds[1].RetryAfter, got, tt.want)
			}
			continue
		}
		// The wait depends on where the key's window lies: it is what remains of the admission's
		// ResetAfter, which the key takes to refill.
		if ds[1].RetryAfter > ds[0].ResetAfter || ds[1].RetryAfter <= ds[0].ResetAfter-slack(tt.window) {
			t.Errorf("a rejection just after an admission that filled a window of %v: RetryAfter = %v; want what remains of the admission's ResetAfter %v",
				tt.window, ds[1].RetryAfter, ds[0].ResetAfter)
		}
		if want := max(1, int64((ds[1].RetryAfter+time.Second-1)/time.Second)); got != want || got < tt.want {
			t.Errorf("RetryAfter = %v, Retry-After = %d; want %d, at least %d", ds[1].RetryAfter, got, want, tt.want)
		}
	}
}

func testCancelledContext(t *testing.T, b Backend, a *algorithm) {
	s := b.Open(t)
	lim := a.perMinute(3)
	past, cancel := context.WithDeadline(t.Context(), time.Unix(0, 0))
	defer cancel()
	cancelled, cancel2 := context.WithCancel(t.Context())
	cancel2()

	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"cancelled", cancelled}, {"deadline_exceeded", past}} {
		t.Run(c.name, func(t *testing.T) {
			// A full key: whatever the Store does, it must not admit.
			full := newKey()
			run(t, b, s, full, lim, a.steps([]step{{n: 3, allowed: true, remaining: 0, fresh: true}}))
			d, err := s.Take(c.ctx, admit.Request{Key: full, Limit: lim, Cost: 1})
			checkUndecided(t, d, err)
			if err == nil {
				checkDecision(t, d, lim, 1)
			}
			if d.Allowed {
				t.Fatalf("Take with a %s context on a full key: allowed (%+v, %v); want rejected or ErrUnavailable", c.name, d, err)
			}

			// A fresh key: the Store may decide (and admit) or fail, consuming at most the unit asked for.
			fresh := newKey()
			d, err = s.Take(c.ctx, admit.Request{Key: fresh, Limit: lim, Cost: 1})
			checkUndecided(t, d, err)
			if err == nil {
				checkDecision(t, d, lim, 1)
				if !d.Allowed || d.Remaining != 2 {
					t.Fatalf("Take with a %s context on a fresh key decided allowed %v, remaining %d; want allowed, remaining 2", c.name, d.Allowed, d.Remaining)
				}
			}
			p := take(t, s, fresh, lim, 0)
			if p.Remaining != 2 && (err == nil || p.Remaining != 3) {
				t.Fatalf("after a Take with a %s context (error %v): peek reports remaining %d; want 2 if it admitted, 2 or 3 if it failed", c.name, err, p.Remaining)
			}
		})
	}
}

// checkUndecided checks that an error from Take with a done context says the Store could not decide.
func checkUndecided(t *testing.T, d admit.Decision, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if !errors.Is(err, admit.ErrUnavailable) {
		t.Fatalf("Take with a done context: error %q does not match ErrUnavailable", err)
	}
	if errors.Is(err, admit.ErrInvalidLimit) || errors.Is(err, admit.ErrInvalidRequest) {
		t.Fatalf("Take with a done context: error %q matches a caller's-mistake error", err)
	}
	if d.Allowed {
		t.Fatalf("Take with a done context: error %q with an allowed Decision", err)
	}
}
