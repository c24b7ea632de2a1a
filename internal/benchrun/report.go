package benchrun

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/admit-dev/admit/internal/loadgen"
	"github.com/admit-dev/admit/redisstore"
)

// progressLine formats the progress of a run, one line per call.
type progressLine struct {
	lines   int           // lines formatted
	ended   uint64        // requests ended at the last line
	elapsed time.Duration // at the last line
}

// format returns the line of the results so far, sofar, after elapsed: the requests a second
// since the last line, the counts so far, and the p99 so far.
func (p *progressLine) format(elapsed time.Duration, sofar *loadgen.Stats) string {
	ended := sofar.Latency.Count()
	perSecond := 0.0
	if span := elapsed - p.elapsed; span > 0 {
		perSecond = float64(ended-p.ended) / span.Seconds()
	}
	p.lines++
	p.ended, p.elapsed = ended, elapsed
	c := countOutcomes(sofar)
	return fmt.Sprintf("%6.1fs  %9.0f req/s  allowed %d  limited %d  errors %d  dropped %d  p99 %v",
		elapsed.Seconds(), perSecond, c.allowed, c.limited, c.errors, sofar.Dropped, roundLatency(sofar.Latency.Quantile(0.99)))
}

// outcomeCounts are a run's requests by outcome.
type outcomeCounts struct {
	allowed, limited, errors int
	errorKinds               map[string]int // the errors by kind
}

// countOutcomes returns the requests of s by outcome.
func countOutcomes(s *loadgen.Stats) outcomeCounts {
	c := outcomeCounts{errorKinds: map[string]int{}}
	for o, n := range s.Outcomes {
		switch o {
		case outcomeAllowed:
			c.allowed += n
		case outcomeLimited:
			c.limited += n
		default:
			c.errors += n
			c.errorKinds[o] += n
		}
	}
	return c
}

// roundLatency rounds d for display: to 3 significant digits, at least 1ns.
func roundLatency(d time.Duration) time.Duration {
	for unit := time.Duration(1000); unit <= time.Hour; unit *= 10 {
		if d < unit {
			return d.Round(unit / 1000)
		}
	}
	return d.Round(time.Second)
}

// Report is admit bench's report; its JSON is the output of admit bench --json.
type Report struct {
	Target      string  `json:"target"`
	Mode        string  `json:"mode"` // open or closed
	Rate        float64 `json:"rate,omitempty"`
	Concurrency int     `json:"concurrency,omitempty"`
	// Policies, or Domain and Descriptor for a grpc target.
	Policies   []string `json:"policies,omitempty"`
	Domain     string   `json:"domain,omitempty"`
	Descriptor string   `json:"descriptor,omitempty"`
	Keys       int      `json:"keys"`
	HotKey     bool     `json:"hot_key"`
	KeyPrefix  string   `json:"key_prefix"`
	DurationS  float64  `json:"duration_s"`
	ElapsedS   float64  `json:"elapsed_s"`
	// Scheduled = Allowed + Limited + Errors + Dropped.
	Scheduled          int            `json:"scheduled"`
	Allowed            int            `json:"allowed"`
	Limited            int            `json:"limited"`
	Errors             int            `json:"errors"`
	Dropped            int            `json:"dropped"`
	ErrorKinds         map[string]int `json:"error_kinds"`
	DecisionsPerSecond float64        `json:"decisions_per_second"`
	LatencyUS          Latency        `json:"latency_us"`
	// CacheHits is how many of the Limited the target answered from its over-limit cache, without
	// its backend (an http target on Redis, read from its /metrics); absent when not known.
	CacheHits *uint64 `json:"cache_hits,omitempty"`
	// Note says what the figures measure when that is not what they seem: a run of mostly
	// rejections.
	Note string `json:"note,omitempty"`
}

// note returns the report's Note, cached telling whether the target may have an over-limit cache:
// empty unless most decisions were rejections.
func (r *Report) note(cached bool) string {
	decided := r.Allowed + r.Limited
	if decided == 0 || r.Limited <= r.Allowed {
		return ""
	}
	share := 100 * float64(r.Limited) / float64(decided)
	switch {
	case r.CacheHits != nil && *r.CacheHits > 0:
		much := "partly"
		if *r.CacheHits*2 > uint64(decided) {
			much = "mostly"
		}
		return fmt.Sprintf("%.0f%% of the decisions were rejections, and %d of them (%.0f%% of the decisions) were answered by the target's over-limit cache, without its backend: "+
			"these figures are %s the cache's, not the backend's; give --policy one that admits the load to measure the backend",
			share, *r.CacheHits, 100*float64(*r.CacheHits)/float64(decided), much)
	case cached && r.CacheHits == nil:
		return fmt.Sprintf("%.0f%% of the decisions were rejections: admit serve on Redis answers a full key's rejections from its over-limit cache, without Redis, for up to server.local_cache_max_age, "+
			"so these figures may be mostly the cache's; give a policy that admits the load to measure the backend", share)
	}
	return fmt.Sprintf("%.0f%% of the decisions were rejections, which write nothing: give --policy one that admits the load to measure admissions", share)
}

// Latency is the latency quantiles of a report, in microseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

// newReport returns the report of the run res of cfg, without its CacheHits and Note.
func newReport(cfg Config, res *loadgen.Result) *Report {
	c := countOutcomes(&res.Total)
	r := &Report{
		Target: redisstore.RedactURL(cfg.Target), Mode: "closed", Concurrency: cfg.Concurrency,
		Keys: cfg.Keys, HotKey: cfg.HotKey, KeyPrefix: cfg.KeyPrefix,
		DurationS: cfg.Duration.Seconds(), ElapsedS: res.Elapsed.Seconds(),
		Scheduled: res.Total.Scheduled, Allowed: c.allowed, Limited: c.limited, Errors: c.errors,
		Dropped: res.Total.Dropped, ErrorKinds: c.errorKinds,
	}
	if cfg.Rate > 0 {
		r.Mode, r.Rate, r.Concurrency = "open", cfg.Rate, 0
	}
	if cfg.Kind == "grpc" {
		r.Domain = cfg.Domain
		var parts []string
		for _, e := range cfg.Descriptor {
			parts = append(parts, e.Key+"="+e.Value)
		}
		r.Descriptor = strings.Join(parts, ",")
	} else {
		r.Policies = cfg.Policies
	}
	if res.Elapsed > 0 {
		r.DecisionsPerSecond = float64(c.allowed+c.limited) / res.Elapsed.Seconds()
	}
	h := &res.Total.Latency
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	r.LatencyUS = Latency{P50: us(h.Quantile(0.5)), P90: us(h.Quantile(0.9)), P99: us(h.Quantile(0.99)), P999: us(h.Quantile(0.999)), Max: us(h.Max())}
	return r
}

// Text returns r as the text admit bench writes without --json.
func (r *Report) Text() string {
	var b strings.Builder
	what := "policy " + strings.Join(r.Policies, ",")
	if r.Domain != "" {
		what = "domain " + r.Domain + ", descriptor " + r.Descriptor
	}
	keys := fmt.Sprintf("%d keys", r.Keys)
	if r.HotKey {
		keys = "one hot key"
	}
	load := fmt.Sprintf("closed loop, %d workers", r.Concurrency)
	if r.Mode == "open" {
		load = fmt.Sprintf("open loop, %g/s", r.Rate)
	}
	fmt.Fprintf(&b, "admit bench %s: %s, %s (%s…), %s, for %v\n\n", r.Target, what, keys, r.KeyPrefix, load, time.Duration(r.DurationS*float64(time.Second)))
	fmt.Fprintf(&b, "  decisions/s  %.1f  (allowed + limited, over %.2fs)\n\n", r.DecisionsPerSecond, r.ElapsedS)
	fmt.Fprintf(&b, "  scheduled    %d\n", r.Scheduled)
	fmt.Fprintf(&b, "  allowed      %d\n", r.Allowed)
	fmt.Fprintf(&b, "  limited      %d\n", r.Limited)
	if r.CacheHits != nil {
		fmt.Fprintf(&b, "    %-10d answered by the over-limit cache, without the backend\n", *r.CacheHits)
	}
	fmt.Fprintf(&b, "  errors       %d\n", r.Errors)
	for _, k := range slices.Sorted(maps.Keys(r.ErrorKinds)) {
		fmt.Fprintf(&b, "    %-10d %s\n", r.ErrorKinds[k], k)
	}
	fmt.Fprintf(&b, "  dropped      %d\n\n", r.Dropped)
	d := func(us float64) time.Duration { return roundLatency(time.Duration(us * float64(time.Microsecond))) }
	l := r.LatencyUS
	fmt.Fprintf(&b, "  latency      p50 %v  p90 %v  p99 %v  p99.9 %v  max %v\n", d(l.P50), d(l.P90), d(l.P99), d(l.P999), d(l.Max))
	if r.Note != "" {
		fmt.Fprintf(&b, "\n  note: %s\n", r.Note)
	}
	return b.String()
}
