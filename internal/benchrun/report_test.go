package benchrun

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/loadgen"
)

// TestBenchProgressLine checks the progress line's formatter: requests a second since the last
// line, the counts so far and the p99 so far.
func TestBenchProgressLine(t *testing.T) {
	stats := func(allowed, limited, errs, dropped int, latency time.Duration) *loadgen.Stats {
		s := &loadgen.Stats{Outcomes: map[string]int{outcomeAllowed: allowed, outcomeLimited: limited, "error: timeout": errs}, Dropped: dropped}
		for range allowed + limited + errs {
			s.Latency.Record(latency)
		}
		s.Scheduled = allowed + limited + errs + dropped
		return s
	}
	var p progressLine
	first := p.format(time.Second, stats(100, 900, 0, 0, 250*time.Microsecond))
	want := regexp.MustCompile(`^ +1\.0s +1000 req/s  allowed 100  limited 900  errors 0  dropped 0  p99 250µs$`)
	if !want.MatchString(first) {
		t.Errorf("first line %q; want %v", first, want)
	}
	// 3000 more in the next half second: 6000 a second.
	second := p.format(1500*time.Millisecond, stats(100, 3890, 10, 7, 3*time.Millisecond))
	want = regexp.MustCompile(`^ +1\.5s +6000 req/s  allowed 100  limited 3890  errors 10  dropped 7  p99 3ms$`)
	if !want.MatchString(second) {
		t.Errorf("second line %q; want %v", second, want)
	}
	if strings.ContainsAny(first+second, "\r\n\033") {
		t.Error("the formatter writes control characters; the terminal handling is the caller's")
	}
}

// TestBenchReportText checks the text report: every count and quantile, and the error kinds.
func TestBenchReportText(t *testing.T) {
	res := &loadgen.Result{Elapsed: 2 * time.Second, Total: loadgen.Stats{Scheduled: 1010, Dropped: 5,
		Outcomes: map[string]int{outcomeAllowed: 50, outcomeLimited: 950, "error: unavailable": 5}}}
	for range 1005 {
		res.Total.Latency.Record(100 * time.Microsecond)
	}
	cfg := Config{Target: "redis://:hunter2@10.0.0.1:6379", Kind: "redis", Concurrency: 4, Keys: 1, HotKey: true, KeyPrefix: "p-", Policies: []string{"fifty"}, Duration: 2 * time.Second}
	text := newReport(cfg, res).Text()
	t.Log(text)
	for _, want := range []string{"redis://xxxxx@10.0.0.1:6379", "policy fifty", "one hot key", "closed loop, 4 workers", "decisions/s  500.0",
		"scheduled    1010", "allowed      50", "limited      950", "errors       5", "5          error: unavailable", "dropped      5",
		"p50 100µs  p90 100µs  p99 100µs  p99.9 100µs  max 100µs"} {
		if !strings.Contains(text, want) {
			t.Errorf("the report has no %q", want)
		}
	}
	if strings.Contains(text, "hunter2") {
		t.Error("the report shows the password")
	}
}

// TestBenchReportNote: a report of mostly rejections says what it measured — the over-limit
// cache's answers when the target counted them — and a report of mostly admissions says nothing.
func TestBenchReportNote(t *testing.T) {
	hits := func(n uint64) *uint64 { return &n }
	for _, c := range []struct {
		r      Report
		cached bool
		want   string // "" for no note
	}{
		{Report{Allowed: 90, Limited: 10}, true, ""},
		{Report{Allowed: 10, Limited: 90, CacheHits: hits(80)}, true, "80 of them (80% of the decisions) were answered by the target's over-limit cache"},
		{Report{Allowed: 10, Limited: 90, CacheHits: hits(30)}, true, "partly the cache's"},
		{Report{Allowed: 10, Limited: 90}, true, "may be mostly the cache's"},
		{Report{Allowed: 10, Limited: 90}, false, "90% of the decisions were rejections, which write nothing"},
	} {
		got := c.r.note(c.cached)
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%+v, cached %v: note %q; want %q", c.r, c.cached, got, c.want)
		}
		c.r.Note = got
		if text := c.r.Text(); got != "" && !strings.Contains(text, "note: "+got) {
			t.Errorf("the text report has no note:\n%s", text)
		}
	}
}
