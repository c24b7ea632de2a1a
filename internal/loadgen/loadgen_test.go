package loadgen_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/loadgen"
	"github.com/admit-dev/admit/internal/redistest"
)

// get returns a Func of GET url with a client that gives up after 5s.
func get(url string) loadgen.Func {
	client := &http.Client{Timeout: 5 * time.Second}
	return loadgen.HTTP(client, func(ctx context.Context) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	})
}

func run(t *testing.T, cfg loadgen.Config, do loadgen.Func) *loadgen.Result {
	t.Helper()
	res, err := loadgen.Run(context.Background(), cfg, do)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("total: %v", &res.Total)
	return res
}

// Every request due within the duration is scheduled, in windows by its due time.
func TestRunCountsAndWindows(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1)%4 == 0 {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	res := run(t, loadgen.Config{Rate: 200, Duration: time.Second, Window: 250 * time.Millisecond}, get(srv.URL))
	if res.Total.Scheduled != 200 || res.Total.Dropped != 0 || res.Total.Errors() != 0 {
		t.Fatalf("total %v; want 200 scheduled, none dropped nor failed", &res.Total)
	}
	if got := res.Total.Outcomes["200"] + res.Total.Outcomes["429"]; got != 200 || res.Total.Outcomes["429"] != 50 {
		t.Fatalf("outcomes %v; want 150×200 and 50×429", res.Total.Outcomes)
	}
	if res.Total.Latency.Count() != 200 || hits.Load() != 200 {
		t.Fatalf("%d latencies, %d requests served; want 200", res.Total.Latency.Count(), hits.Load())
	}
	if len(res.Windows) != 4 {
		t.Fatalf("%d windows, want 4", len(res.Windows))
	}
	for i, w := range res.Windows {
		if w.Start != time.Duration(i)*250*time.Millisecond || w.Scheduled != 50 {
			t.Errorf("window %d: %v; want start %v, 50 scheduled", i, &w, time.Duration(i)*250*time.Millisecond)
		}
	}
}

// The schedule is exact: a rate whose interval is not a whole number of nanoseconds still
// schedules the requests due at 0, 1/Rate, … before Duration — Rate × Duration rounded up — not one
// more.
func TestRunScheduleIsExact(t *testing.T) {
	for rate, want := range map[float64]int{300: 150, 30: 15, 7: 4} {
		res := run(t, loadgen.Config{Rate: rate, Duration: 500 * time.Millisecond}, func(context.Context) string { return "ok" })
		if res.Total.Scheduled != want {
			t.Errorf("rate %v for 500ms: %d scheduled; want %d", rate, res.Total.Scheduled, want)
		}
	}
}

// A server that stalls does not slow the schedule (open loop), and each request's latency counts
// from its due time: requests due before the stall ends are charged the stall.
func TestRunOpenLoop(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer srv.Close()
	const stall = 300 * time.Millisecond
	time.AfterFunc(stall, func() { close(release) })
	res := run(t, loadgen.Config{Rate: 100, Duration: 200 * time.Millisecond}, get(srv.URL))
	if res.Total.Scheduled != 20 || res.Total.Outcomes["200"] != 20 {
		t.Fatalf("total %v; want 20 scheduled and answered despite the stall", &res.Total)
	}
	// The last request was due at 190ms and could not end before 300ms.
	if min := res.Total.Latency.Quantile(0); min < stall-190*time.Millisecond {
		t.Fatalf("the shortest latency %v is less than the stall left after the last request was due", min)
	}
	if res.Total.Latency.Max() < stall {
		t.Fatalf("max latency %v: the first request, due at 0, waited out the %v stall", res.Total.Latency.Max(), stall)
	}
}

// Requests due while MaxOutstanding are in flight are dropped, not queued.
func TestRunDropsAboveMaxOutstanding(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer srv.Close()
	time.AfterFunc(time.Second, func() { close(release) })
	res := run(t, loadgen.Config{Rate: 100, Duration: 300 * time.Millisecond, MaxOutstanding: 2}, get(srv.URL))
	if res.Total.Scheduled != 30 || res.Total.Dropped != 28 || res.Total.Outcomes["200"] != 2 {
		t.Fatalf("total %v; want 30 scheduled: 2 started, 28 dropped", &res.Total)
	}
}

// Failures are named by kind, without addresses.
func TestRunErrors(t *testing.T) {
	addr := redistest.ClosedPort(t)
	res := run(t, loadgen.Config{Rate: 100, Duration: 100 * time.Millisecond}, get("http://"+addr+"/"))
	if res.Total.Outcomes["error: connection refused"] != 10 || res.Total.Errors() != 10 {
		t.Fatalf("outcomes %v; want 10× error: connection refused", res.Total.Outcomes)
	}
	// A connection closed mid-response.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.Write([]byte("short"))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	defer srv.Close()
	res = run(t, loadgen.Config{Rate: 100, Duration: 50 * time.Millisecond}, get(srv.URL))
	if res.Total.Outcomes["error: body: EOF"] != 5 {
		t.Fatalf("outcomes %v; want 5× error: body: EOF", res.Total.Outcomes)
	}
}

func TestRunStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	res, err := loadgen.Run(ctx, loadgen.Config{Rate: 100, Duration: time.Hour, Window: time.Minute},
		func(context.Context) string { return "ok" })
	if err != nil {
		t.Fatal(err)
	}
	if n := res.Total.Scheduled; n == 0 || n > 100 {
		t.Fatalf("%d scheduled in a run canceled after 100ms of a 100/s schedule", n)
	}
}

func TestRunInvalidConfig(t *testing.T) {
	for _, cfg := range []loadgen.Config{
		{Duration: time.Second},
		{Rate: 1},
		{Rate: 1, Duration: time.Second, MaxOutstanding: -1},
		{Rate: 1, Duration: time.Second, Window: -1},
		{Rate: 1e12, Duration: time.Second},
		{Workers: -1, Duration: time.Second},
		{Workers: 2, Rate: 1, Duration: time.Second},
		{Workers: 2, Duration: time.Second, MaxOutstanding: 10},
		{Workers: 2},
		{Rate: 1, Duration: time.Second, ProgressInterval: -1},
	} {
		if _, err := loadgen.Run(context.Background(), cfg, nil); err == nil {
			t.Errorf("Run(%+v) = nil error", cfg)
		}
	}
}

// A closed loop runs Workers calls at a time, back to back, never more, and counts every call it
// started; none is dropped.
func TestRunClosedLoop(t *testing.T) {
	var calls, inFlight, most atomic.Int64
	do := func(context.Context) string {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if calls.Add(1) <= 4 { // the first calls wait for one another: all 4 workers are busy at once
			for deadline := time.Now().Add(5 * time.Second); most.Load() < 4 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
		}
		inFlight.Add(-1)
		return "ok"
	}
	res := run(t, loadgen.Config{Workers: 4, Duration: 200 * time.Millisecond, Window: 100 * time.Millisecond}, do)
	if n := int(calls.Load()); res.Total.Scheduled != n || res.Total.Outcomes["ok"] != n || int(res.Total.Latency.Count()) != n || res.Total.Dropped != 0 {
		t.Fatalf("total %v; want %d scheduled and ok, none dropped", &res.Total, n)
	}
	if most.Load() != 4 {
		t.Fatalf("%d calls at once; want the 4 workers'", most.Load())
	}
	if len(res.Windows) != 2 || res.Windows[0].Scheduled+res.Windows[1].Scheduled != res.Total.Scheduled || res.Windows[1].Start != 100*time.Millisecond {
		t.Fatalf("windows %v; want 2 that add up to the total", res.Windows)
	}
	if res.Elapsed < 200*time.Millisecond {
		t.Fatalf("Elapsed %v; the run schedules calls for 200ms", res.Elapsed)
	}
}

// Progress sees the requests that ended so far, growing, and is never called after Run returns.
func TestRunProgress(t *testing.T) {
	var mu sync.Mutex
	var seen []int
	var returned atomic.Bool
	late := false
	cfg := loadgen.Config{Rate: 200, Duration: 300 * time.Millisecond, ProgressInterval: 50 * time.Millisecond,
		Progress: func(elapsed time.Duration, sofar *loadgen.Stats) {
			mu.Lock()
			defer mu.Unlock()
			late = late || returned.Load()
			seen = append(seen, sofar.Scheduled)
			if sofar.Scheduled != int(sofar.Latency.Count())+sofar.Dropped {
				t.Errorf("progress %v: scheduled is not started plus dropped", sofar)
			}
		}}
	// The first request ends once Progress has been called twice, so the run lasts that long.
	var first sync.Once
	res := run(t, cfg, func(context.Context) string {
		first.Do(func() {
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				mu.Lock()
				n := len(seen)
				mu.Unlock()
				if n >= 2 {
					break
				}
			}
		})
		return "ok"
	})
	returned.Store(true)
	time.Sleep(120 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if late {
		t.Fatal("Progress called after Run returned")
	}
	if len(seen) < 2 || !slices.IsSorted(seen) || seen[len(seen)-1] > res.Total.Scheduled {
		t.Fatalf("progress saw %v of %d; want at least 2 calls, growing, at most the total", seen, res.Total.Scheduled)
	}
}

// Quantiles are within the buckets' 1/64 precision of the exact ones, never below them; Max is exact;
// Merge is recording both.
func TestHistogram(t *testing.T) {
	var h, a, b loadgen.Histogram
	if h.Quantile(0.5) != 0 || h.Max() != 0 || h.Count() != 0 {
		t.Fatal("an empty Histogram is not empty")
	}
	var all []time.Duration
	for i := range 20000 {
		d := time.Duration(rand.Int64N(int64(2*time.Second))) + time.Duration(i%50)*time.Microsecond
		all = append(all, d)
		h.Record(d)
		if i%2 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	slices.Sort(all)
	a.Merge(&b)
	for _, q := range []float64{0, 0.01, 0.5, 0.9, 0.99, 0.999, 1} {
		exact := all[max(0, int(q*float64(len(all))+0.5)-1)]
		got := h.Quantile(q)
		if got < exact-time.Microsecond || float64(got) > float64(exact)*(1+1.0/64)+float64(time.Microsecond) {
			t.Errorf("Quantile(%v) = %v, exact %v", q, got, exact)
		}
		if a.Quantile(q) != got {
			t.Errorf("merged Quantile(%v) = %v, want %v", q, a.Quantile(q), got)
		}
	}
	if h.Max() != all[len(all)-1] || h.Count() != 20000 || a.Max() != h.Max() || a.Count() != h.Count() {
		t.Errorf("Max %v Count %d, merged %v %d; want %v 20000", h.Max(), h.Count(), a.Max(), a.Count(), all[len(all)-1])
	}
	var small loadgen.Histogram
	small.Record(-time.Second)
	small.Record(3 * time.Microsecond)
	if small.Quantile(0) >= time.Microsecond || small.Quantile(1) != 3*time.Microsecond {
		t.Errorf("small: Quantile(0) %v, Quantile(1) %v; want under 1µs and 3µs", small.Quantile(0), small.Quantile(1))
	}
}
