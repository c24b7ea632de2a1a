// Package lograte bounds the rate of log records of each kind, so that an outage costs a few log
// lines, not one per request: the first record of a kind is written at once, those that follow
// within an interval are counted, and a timer writes one summary record, with their number and
// the last error, when it ends.
package lograte

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// A Kind is one kind of record: its level and its message.
type Kind struct {
	Level slog.Level
	Msg   string
}

// A Limiter bounds the rate of the records of each of its kinds. Its state is one fixed slot per
// kind: no map, and no goroutine but a timer's, at most one armed per kind. At most one record of a
// kind is being written at any time, so a logger that blocks holds up at most one goroutine per
// kind; the others count and move on. It is safe for concurrent use. Make one with [New].
type Limiter struct {
	logger   *slog.Logger
	interval time.Duration // <= 0: write every record
	kinds    []Kind
	slots    []slot
}

// A slot is the log state of one kind.
type slot struct {
	mu         sync.Mutex
	quietUntil time.Time // records before then are counted, not written
	suppressed int64     // records counted since the last one written
	lastErr    error     // the error of the last record counted
	armed      bool      // a timer will report the records counted
	busy       bool      // a record of this kind is being written
}

// DefaultInterval is the log interval of admit's HTTP middleware, API and proxy, and of Envoy's
// rate limit service, unless configured otherwise: one summary of a kind per 10 seconds.
const DefaultInterval = 10 * time.Second

// New returns a Limiter that writes to logger at most one record of each of kinds per interval,
// the kinds named by their index; an interval of 0 or less writes every record.
func New(logger *slog.Logger, interval time.Duration, kinds ...Kind) *Limiter {
	return &Limiter{logger: logger, interval: interval, kinds: kinds, slots: make([]slot, len(kinds))}
}

// Log writes a record of kind k with the attributes attrs and err (as "error"), unless one of k
// was written less than an interval ago: then it is counted, for the summary.
func (l *Limiter) Log(ctx context.Context, k int, err error, attrs ...slog.Attr) {
	if !l.Start(ctx, k, err) {
		return
	}
	defer l.Done(k)
	l.logger.LogAttrs(ctx, l.kinds[k].Level, l.kinds[k].Msg, append(attrs, slog.Any("error", err))...)
}

// Start reports whether a record of kind k, for err, should be written now; if so, the caller
// writes it with Logger, at k's level and with k's message, and then calls Done(k). Otherwise the
// record is counted, or dropped if the logger does not log k's level. (Log does all three; Start
// lets a caller build the record's attributes only when it is written.)
func (l *Limiter) Start(ctx context.Context, k int, err error) bool {
	if !l.logger.Enabled(ctx, l.kinds[k].Level) {
		return false
	}
	if l.interval <= 0 {
		return true
	}
	s := &l.slots[k]
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
		time.AfterFunc(s.quietUntil.Sub(now), func() { l.flush(k) })
	}
	return false
}

// Done marks the record of kind k that Start let through as written.
func (l *Limiter) Done(k int) {
	if l.interval <= 0 {
		return
	}
	s := &l.slots[k]
	s.mu.Lock()
	s.busy = false
	s.mu.Unlock()
}

// Logger returns the logger the Limiter writes to.
func (l *Limiter) Logger() *slog.Logger { return l.logger }

// Kind returns kind k.
func (l *Limiter) Kind(k int) Kind { return l.kinds[k] }

// flush writes the summary of the records of kind k counted so far, and starts a new interval. If a
// record of k is still being written, it tries again an interval later.
func (l *Limiter) flush(k int) {
	s := &l.slots[k]
	now := time.Now()
	s.mu.Lock()
	if s.busy || now.Before(s.quietUntil) {
		time.AfterFunc(max(s.quietUntil.Sub(now), l.interval), func() { l.flush(k) })
		s.mu.Unlock()
		return
	}
	n, last := s.suppressed, s.lastErr
	s.armed, s.suppressed, s.lastErr = false, 0, nil
	s.busy = true
	s.quietUntil = now.Add(l.interval)
	s.mu.Unlock()

	l.logger.LogAttrs(context.Background(), l.kinds[k].Level, l.kinds[k].Msg,
		slog.Int64("suppressed", n),
		slog.Duration("interval", l.interval),
		slog.Any("error", last))
	l.Done(k)
}
