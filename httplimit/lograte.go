package httplimit

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// A logLimiter bounds the rate of the records of each kind of failure: the first is written at
// once, those that follow within the interval are counted, and a timer writes one summary record
// when it ends. Its state is one fixed slot per kind: no map, and no goroutine but the timer's, at
// most one armed per kind. At most one record of a kind is being written at any time, so a
// logger that blocks holds up at most one goroutine per kind; the others count and move on.
// It is safe for concurrent use.
type logLimiter struct {
	logger   *slog.Logger
	interval time.Duration // <= 0: write every record
	kinds    [numFailures]logSlot
}

// A logSlot is the log state of one kind of failure.
type logSlot struct {
	mu         sync.Mutex
	quietUntil time.Time // records before then are counted, not written
	suppressed int64     // records counted since the last one written
	lastErr    error     // the error of the last record counted
	armed      bool      // a timer will report the records counted
	busy       bool      // a record of this kind is being written
}

func newLogLimiter(logger *slog.Logger, interval time.Duration) *logLimiter {
	return &logLimiter{logger: logger, interval: interval}
}

// start reports whether a record of f, for err, should be written now; if so, the caller writes
// it with l.logger and then calls done(f). Otherwise the record is counted, or dropped if the
// logger does not log f's level.
func (l *logLimiter) start(ctx context.Context, f failure, err error) bool {
	if !l.logger.Enabled(ctx, f.level()) {
		return false
	}
	if l.interval <= 0 {
		return true
	}
	s := &l.kinds[f]
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.busy && s.suppressed == 0 && !now.Before(s.quietUntil) {
		s.busy = true
		s.quietUntil = now.Add(l.interval)
		return true
	}
	s.suppressed++
	s.lastErr = err
	if !s.armed {
		s.armed = true
		time.AfterFunc(s.quietUntil.Sub(now), func() { l.flush(f) })
	}
	return false
}

// done marks the record of f that start let through as written.
func (l *logLimiter) done(f failure) {
	if l.interval <= 0 {
		return
	}
	s := &l.kinds[f]
	s.mu.Lock()
	s.busy = false
	s.mu.Unlock()
}

// flush writes the summary of the records of f counted so far, and starts a new interval. If a
// record of f is still being written, it tries again an interval later.
func (l *logLimiter) flush(f failure) {
	s := &l.kinds[f]
	now := time.Now()
	s.mu.Lock()
	if s.busy || now.Before(s.quietUntil) {
		time.AfterFunc(max(s.quietUntil.Sub(now), l.interval), func() { l.flush(f) })
		s.mu.Unlock()
		return
	}
	n, last := s.suppressed, s.lastErr
	s.armed, s.suppressed, s.lastErr = false, 0, nil
	s.busy = true
	s.quietUntil = now.Add(l.interval)
	s.mu.Unlock()

	l.logger.LogAttrs(context.Background(), f.level(), f.message(),
		slog.Int64("suppressed", n),
		slog.Duration("interval", l.interval),
		slog.Any("error", last))
	l.done(f)
}
