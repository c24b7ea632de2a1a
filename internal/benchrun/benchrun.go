// Package benchrun is the load engine of `admit bench`: the targets it drives (admit serve's
// POST /v1/check, Envoy's rate limit service, a service.Service in this process), the run over
// internal/loadgen's open or closed loop with its progress line, and the report. The command
// parses the flags, builds the target and prints the report; everything between is here.
package benchrun

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/admit-dev/admit/internal/loadgen"
)

// KeyPlaceholder, in a value of a grpc target's descriptor, stands for the bench's key.
const KeyPlaceholder = "{key}"

// ProgressPlainInterval is how often the progress line is written when it goes to a log (CI, a
// file): a line at a time. On a terminal it is rewritten in place every progressTTYInterval.
const ProgressPlainInterval = 5 * time.Second

// progressTTYInterval is how often the progress line is rewritten in place on a terminal.
const progressTTYInterval = 500 * time.Millisecond

// cacheHitsTimeout bounds one read of a target's over-limit cache hits.
const cacheHitsTimeout = 5 * time.Second

// The outcomes of one request to the target, as loadgen counts them; anything else is an error,
// named "error: " and its kind.
const (
	outcomeAllowed = "allowed"
	outcomeLimited = "limited"
)

// Config describes a run: what is loaded, how, on which keys. It is the checked command line of
// admit bench.
type Config struct {
	Target         string        // the target as given: shown in the report, its password hidden
	Kind           string        // http, grpc, redis or memory
	GRPCAddr       string        // HOST:PORT of a grpc target
	Rate           float64       // open loop: requests a second; 0 for a closed loop
	Concurrency    int           // closed loop: the workers
	MaxOutstanding int           // open loop: the bound on requests in flight; 0 for loadgen's default
	Duration       time.Duration // how long requests are sent for
	Keys           int           // the requests go to Keys keys in turn
	HotKey         bool          // every request goes to one key
	KeyPrefix      string        // the keys' prefix
	Policies       []string      // the policies checked (http and store targets)
	Domain         string        // grpc target: the rate limit domain
	Descriptor     []Entry       // grpc target: the descriptor's entries
	Timeout        time.Duration // the most one request may take
	Token          string        // http and grpc targets: a client token, sent as Authorization: Bearer TOKEN; "" for none
	TLS            *tls.Config   // http and grpc targets: the TLS of an https:// or grpcs:// target; nil for plain
}

// An Entry is one entry of a grpc target's descriptor; KeyPlaceholder in Value stands for the key.
type Entry struct{ Key, Value string }

// A Target is what admit bench loads. Its methods are safe for concurrent use.
type Target interface {
	// Probe checks that the target answers, without consuming anything where it can: nil, or a
	// UsageError, or an error that makes it unreachable.
	Probe(ctx context.Context) error
	// Do makes one decision on key, and names its outcome: allowed, limited or an error
	// ("error: ..."), as loadgen counts outcomes.
	Do(ctx context.Context, key string) string
	// Close releases the target's connections.
	Close()
}

// A UsageError is a probe's answer that the command line is wrong, such as an unknown policy.
type UsageError struct{ Err error }

// Error returns the error's message.
func (e UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the error the target answered.
func (e UsageError) Unwrap() error { return e.Err }

// A cacheCounter is a target that tells how many decisions its over-limit cache has answered.
type cacheCounter interface {
	// cacheHits returns the hits of the target's over-limit caches so far, and whether it has one;
	// an error if it cannot tell.
	cacheHits(ctx context.Context) (uint64, bool, error)
}

// cacheHits returns the hits of target's over-limit caches so far, and whether it has one; an
// error if it cannot tell.
func cacheHits(ctx context.Context, target Target) (uint64, bool, error) {
	c, ok := target.(cacheCounter)
	if !ok {
		return 0, false, errors.New("the target does not tell")
	}
	ctx, cancel := context.WithTimeout(ctx, cacheHitsTimeout)
	defer cancel()
	return c.cacheHits(ctx)
}

// Run drives target by cfg until cfg.Duration has passed or ctx is done, writing the progress line
// to progress (rewritten in place when progress is a terminal), and returns the report of what
// ran: when ctx is done early, of the part that ran. Its error is only for a cfg loadgen refuses.
func Run(ctx context.Context, cfg Config, target Target, progress io.Writer) (*Report, error) {
	hitsBefore, cached, hitsErr := cacheHits(ctx, target)
	var next atomic.Uint64 // the requests so far: request i is on key i mod cfg.Keys
	do := func(ctx context.Context) string {
		return target.Do(ctx, cfg.KeyPrefix+strconv.FormatUint((next.Add(1)-1)%uint64(cfg.Keys), 10))
	}
	if cfg.HotKey {
		hot := cfg.KeyPrefix + "hot"
		do = func(ctx context.Context) string { return target.Do(ctx, hot) }
	}
	run := loadgen.Config{Rate: cfg.Rate, Workers: cfg.Concurrency, MaxOutstanding: cfg.MaxOutstanding, Duration: cfg.Duration}
	p := &progressLine{}
	tty := isTerminal(progress)
	run.ProgressInterval = ProgressPlainInterval
	if tty {
		run.ProgressInterval = progressTTYInterval
	}
	run.Progress = func(elapsed time.Duration, sofar *loadgen.Stats) {
		line := p.format(elapsed, sofar)
		if tty {
			fmt.Fprintf(progress, "\r\033[K%s", line)
		} else {
			fmt.Fprintln(progress, line)
		}
	}
	res, err := loadgen.Run(ctx, run, do)
	if err != nil {
		return nil, err
	}
	if tty && p.lines > 0 {
		fmt.Fprint(progress, "\r\033[K")
	}
	report := newReport(cfg, res)
	hitsAfter, cachedAfter, errAfter := cacheHits(context.WithoutCancel(ctx), target)
	switch {
	case hitsErr != nil || errAfter != nil || cached != cachedAfter || hitsAfter < hitsBefore:
		cached = cfg.Kind == "http" || cfg.Kind == "grpc" // unknown: a service may have one
	case cached:
		hits := hitsAfter - hitsBefore
		report.CacheHits = &hits
	}
	report.Note = report.note(cached)
	return report, nil
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
