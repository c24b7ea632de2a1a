// Package loadgen is a load generator. Its open loop starts requests at a constant arrival rate, on
// a schedule that does not wait for responses, so a slow server cannot slow the load down and hide
// its own slowness (no coordinated omission). Its closed loop (Config.Workers) runs a fixed number
// of workers, each starting a request as soon as its last one ended: it measures how many requests
// a server can answer, and each latency is then from the request's start.
//
// Each request's latency is measured from the time it was scheduled to start, not from the time it
// did start: a request the generator could only start late is charged for the wait. The number of
// requests in flight is bounded; a request due while the bound is reached is not started, and is
// counted as dropped. Results are counts of outcomes (such as "200" or "error: connection refused")
// and latency quantiles from a log-linear histogram, over the whole run and per time window.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/bits"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultMaxOutstanding is the bound on requests in flight when Config.MaxOutstanding is 0.
const DefaultMaxOutstanding = 1000

// DefaultProgressInterval is how often Config.Progress is called when Config.ProgressInterval is 0.
const DefaultProgressInterval = time.Second

// Config configures a run: Duration, and either Rate (open loop) or Workers (closed loop).
type Config struct {
	// Rate is the arrival rate of the open loop, in requests per second; 0 with Workers.
	Rate float64
	// Workers, if not 0, makes the run a closed loop: Workers goroutines each call the Func back to
	// back until Duration has passed, then wait for their last call. Each call is scheduled when it
	// starts; none is dropped. Rate and MaxOutstanding must then be 0.
	Workers int
	// Duration is how long requests are scheduled for: the run schedules the requests due at
	// 0, 1/Rate, 2/Rate, … before Duration, then waits for those in flight.
	Duration time.Duration
	// MaxOutstanding bounds the requests in flight; 0 means DefaultMaxOutstanding.
	MaxOutstanding int
	// Window is the length of the time windows the results are split into, by scheduled time;
	// 0 means one window for the whole run.
	Window time.Duration
	// Progress, if not nil, is called every ProgressInterval during the run with the results so far,
	// of the requests that ended; from one goroutine, never after Run returns.
	Progress func(elapsed time.Duration, sofar *Stats)
	// ProgressInterval is how often Progress is called; 0 means DefaultProgressInterval.
	ProgressInterval time.Duration
}

// A Func performs one request and names its outcome, such as "200" or "error: timeout". It must
// return once ctx is done. It is called from many goroutines at once.
type Func func(ctx context.Context) string

// Stats are the results of the requests scheduled within a span of time.
type Stats struct {
	// Start is when the span starts, from the start of the run.
	Start time.Duration
	// Scheduled counts the requests due within the span; each was either started or dropped.
	Scheduled int
	// Dropped counts the requests not started because MaxOutstanding were in flight.
	Dropped int
	// Outcomes counts the started requests by the outcome their Func named.
	Outcomes map[string]int
	// Latency holds the started requests' latencies, each from its scheduled start to its end.
	Latency Histogram
}

// Errors counts the outcomes that are not an HTTP status code: the requests that got no answer.
func (s *Stats) Errors() int {
	n := 0
	for o, c := range s.Outcomes {
		if _, err := strconv.Atoi(o); err != nil {
			n += c
		}
	}
	return n
}

// String summarizes s on one line: counts, outcomes in order, and p50/p99/p99.9/max.
func (s *Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "t=%v scheduled=%d dropped=%d", s.Start, s.Scheduled, s.Dropped)
	for _, o := range slices.Sorted(maps.Keys(s.Outcomes)) {
		fmt.Fprintf(&b, " %q=%d", o, s.Outcomes[o])
	}
	h := &s.Latency
	fmt.Fprintf(&b, " p50=%v p99=%v p99.9=%v max=%v", h.Quantile(0.5), h.Quantile(0.99), h.Quantile(0.999), h.Max())
	return b.String()
}

func (s *Stats) merge(o *Stats) {
	s.Scheduled += o.Scheduled
	s.Dropped += o.Dropped
	if s.Outcomes == nil {
		s.Outcomes = map[string]int{}
	}
	for k, v := range o.Outcomes {
		s.Outcomes[k] += v
	}
	s.Latency.Merge(&o.Latency)
}

// Result is what a run measured.
type Result struct {
	// Total is the whole run.
	Total Stats
	// Windows splits the run into Config.Window-long spans, by scheduled time, in order.
	Windows []Stats
	// Elapsed is the run's length: from its start until its last request ended.
	Elapsed time.Duration
}

// Run schedules requests by cfg, calls do for each started one with ctx, and returns once every
// started request has ended. It stops scheduling early if ctx is done. It reports an error only for
// an invalid cfg.
func Run(ctx context.Context, cfg Config, do Func) (*Result, error) {
	switch {
	case cfg.Duration <= 0 || cfg.MaxOutstanding < 0 || cfg.Window < 0 || cfg.ProgressInterval < 0 || cfg.Workers < 0:
		return nil, fmt.Errorf("loadgen: invalid config %+v", cfg)
	case cfg.Workers > 0 && (cfg.Rate != 0 || cfg.MaxOutstanding != 0):
		return nil, fmt.Errorf("loadgen: a closed loop (Workers %d) has no Rate nor MaxOutstanding", cfg.Workers)
	case cfg.Workers == 0 && !(cfg.Rate > 0):
		return nil, fmt.Errorf("loadgen: want a positive Rate, or Workers; got %+v", cfg)
	}
	window := cfg.Window
	if window == 0 {
		window = cfg.Duration
	}
	if cfg.Workers == 0 && time.Duration(float64(time.Second)/cfg.Rate) <= 0 {
		return nil, fmt.Errorf("loadgen: rate %v too high", cfg.Rate)
	}
	// Each worker of a closed loop records into its own tally, so that workers never wait for one
	// another; an open loop has one.
	tallies := make([]*tally, max(cfg.Workers, 1))
	for i := range tallies {
		tallies[i] = newTally(cfg.Duration, window)
	}
	start := time.Now()
	stopProgress := progress(cfg, start, tallies)
	if cfg.Workers > 0 {
		closedLoop(ctx, cfg, start, tallies, do)
	} else {
		openLoop(ctx, cfg, start, tallies[0], do)
	}
	elapsed := time.Since(start)
	stopProgress()
	res := &Result{Windows: tallies[0].windows, Total: Stats{Outcomes: map[string]int{}}, Elapsed: elapsed}
	for _, t := range tallies[1:] {
		for i := range t.windows {
			res.Windows[i].merge(&t.windows[i])
		}
	}
	for i := range res.Windows {
		res.Total.merge(&res.Windows[i])
	}
	return res, nil
}

// A tally is the results of one loop: per window, guarded by mu.
type tally struct {
	mu      sync.Mutex
	window  time.Duration
	windows []Stats
}

func newTally(duration, window time.Duration) *tally {
	t := &tally{window: window, windows: make([]Stats, (duration+window-1)/window)}
	for i := range t.windows {
		t.windows[i] = Stats{Start: time.Duration(i) * window, Outcomes: map[string]int{}}
	}
	return t
}

// record counts a request scheduled at offset from the run's start: dropped, or with its outcome
// and latency.
func (t *tally) record(offset time.Duration, dropped bool, outcome string, latency time.Duration) {
	t.mu.Lock()
	w := &t.windows[min(offset/t.window, time.Duration(len(t.windows)-1))]
	w.Scheduled++
	if dropped {
		w.Dropped++
	} else {
		w.Outcomes[outcome]++
		w.Latency.Record(latency)
	}
	t.mu.Unlock()
}

// addTo merges t's windows into s.
func (t *tally) addTo(s *Stats) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.windows {
		s.merge(&t.windows[i])
	}
}

// progress calls cfg.Progress, if set, every cfg.ProgressInterval with the tallies so far, until
// the function it returns is called; that function returns after the last call ended.
func progress(cfg Config, start time.Time, tallies []*tally) (stop func()) {
	if cfg.Progress == nil {
		return func() {}
	}
	every := cfg.ProgressInterval
	if every == 0 {
		every = DefaultProgressInterval
	}
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			sofar := Stats{Outcomes: map[string]int{}}
			for _, t := range tallies {
				t.addTo(&sofar)
			}
			cfg.Progress(time.Since(start), &sofar)
		}
	}()
	return func() { close(done); <-ended }
}

// openLoop starts a request every 1/cfg.Rate seconds from start until cfg.Duration, each in its
// own goroutine, unless cfg.MaxOutstanding are in flight, and waits for them. The i-th is due at
// i/cfg.Rate seconds, rounded to the nanosecond: a run schedules exactly Rate × Duration requests
// when that is whole.
func openLoop(ctx context.Context, cfg Config, start time.Time, t *tally, do Func) {
	slots := make(chan struct{}, cmp(cfg.MaxOutstanding, DefaultMaxOutstanding))
	var wg sync.WaitGroup
	for i := 0; ; i++ {
		offset := time.Duration(math.Round(float64(i) * float64(time.Second) / cfg.Rate))
		if offset >= cfg.Duration {
			break
		}
		due := start.Add(offset)
		if wait := time.Until(due); wait > 0 {
			tm := time.NewTimer(wait)
			select {
			case <-tm.C:
			case <-ctx.Done():
				tm.Stop()
			}
		}
		if ctx.Err() != nil {
			break
		}
		select {
		case slots <- struct{}{}:
		default:
			t.record(offset, true, "", 0)
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			outcome := do(ctx)
			t.record(offset, false, outcome, time.Since(due))
		})
	}
	wg.Wait()
}

// closedLoop runs cfg.Workers workers, each calling do back to back until cfg.Duration has passed
// since start or ctx is done, and waits for them.
func closedLoop(ctx context.Context, cfg Config, start time.Time, tallies []*tally, do Func) {
	var wg sync.WaitGroup
	for _, t := range tallies {
		wg.Go(func() {
			for ctx.Err() == nil {
				began := time.Now()
				offset := began.Sub(start)
				if offset >= cfg.Duration {
					return
				}
				outcome := do(ctx)
				t.record(offset, false, outcome, time.Since(began))
			}
		})
	}
	wg.Wait()
}

// cmp returns n, or def if n is 0.
func cmp(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

// HTTP returns a Func that sends the request newRequest makes with client and names its outcome:
// the status code ("200"), or "error: " and the kind of failure (see ErrorKind). It reads and
// closes the body, so a response cut short mid-body is an error too.
func HTTP(client *http.Client, newRequest func(ctx context.Context) (*http.Request, error)) Func {
	return func(ctx context.Context) string {
		req, err := newRequest(ctx)
		if err != nil {
			return "error: " + err.Error()
		}
		resp, err := client.Do(req)
		if err != nil {
			return "error: " + ErrorKind(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return "error: body: " + ErrorKind(err)
		}
		return strconv.Itoa(resp.StatusCode)
	}
}

// ErrorKind names the kind of a request's failure, without addresses or ports: "connection
// refused", "connection reset", "EOF" (the connection closed before a whole response),
// "timeout", "canceled", or "other: " and the error.
func ErrorKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "EOF"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "other: " + err.Error()
}

// subBuckets is how many buckets a Histogram has per power of two above 2·subBuckets µs: each
// bucket's width is at most 1/subBuckets of its values, so a quantile is within 1.6% above the
// truth.
const subBuckets = 64

// Histogram counts durations in log-linear buckets of microseconds, as an HDR histogram does:
// exact below 128µs, then 64 buckets per power of two. Its memory grows with the logarithm of the
// largest duration, not with the number recorded. The zero value is an empty Histogram ready to
// use; it is not safe for concurrent use.
type Histogram struct {
	counts []uint64
	n      uint64
	max    time.Duration
}

// bucket returns the index of the bucket of v microseconds.
func bucket(v uint64) int {
	if v < 2*subBuckets {
		return int(v)
	}
	shift := bits.Len64(v) - bits.Len64(2*subBuckets-1)
	return shift*subBuckets + int(v>>shift)
}

// upper returns the largest value, in microseconds, of bucket i.
func upper(i int) uint64 {
	if i < 2*subBuckets {
		return uint64(i)
	}
	shift := i/subBuckets - 1
	return (uint64(i-shift*subBuckets)+1)<<shift - 1
}

// Record adds one duration; a negative one counts as 0.
func (h *Histogram) Record(d time.Duration) {
	d = max(d, 0)
	i := bucket(uint64(d / time.Microsecond))
	if i >= len(h.counts) {
		h.counts = append(h.counts, make([]uint64, i+1-len(h.counts))...)
	}
	h.counts[i]++
	h.n++
	h.max = max(h.max, d)
}

// Count returns how many durations were recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Max returns the largest duration recorded, exactly; 0 if none.
func (h *Histogram) Max() time.Duration { return h.max }

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of the durations recorded: the upper bound of the
// bucket that holds it, but never more than Max. It returns 0 if none were recorded.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(time.Duration(upper(i)+1)*time.Microsecond-1, h.max)
		}
	}
	return h.max
}

// Merge adds the durations recorded in o to h.
func (h *Histogram) Merge(o *Histogram) {
	if len(o.counts) > len(h.counts) {
		h.counts = append(h.counts, make([]uint64, len(o.counts)-len(h.counts))...)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}
