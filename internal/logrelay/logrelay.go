// Package logrelay relays log lines to a writer that may stall, such as a process's stderr when its
// reader stops reading, without ever blocking the callers that log.
//
// A [Relay] queues each Write and copies it to its destination from one goroutine. When the queue
// is full, lines are dropped and counted, and the count is reported in a line of its own once the
// destination drains. [Relay.Close] flushes the queue, for at most as long as its context allows,
// so a stalled destination can delay the exit of a process but never prevent it.
package logrelay

import (
	"context"
	"fmt"
	"io"
	"sync"
)

// Defaults of Options.
const (
	// DefaultMaxLines is the most lines a Relay queues when Options.MaxLines is 0.
	DefaultMaxLines = 1024
	// DefaultMaxBytes is the most bytes a Relay queues when Options.MaxBytes is 0.
	DefaultMaxBytes = 1 << 20
)

// Options configures a Relay. The zero value uses every default.
type Options struct {
	// MaxLines is the most lines (Writes) queued at once; 0 means DefaultMaxLines.
	MaxLines int
	// MaxBytes is the most bytes queued at once; 0 means DefaultMaxBytes. A Write longer than
	// MaxBytes is always dropped.
	MaxBytes int
	// DroppedLine returns the line that reports n lines dropped, written in their place once
	// the destination drains. Nil means a plain "logrelay: N log lines dropped" line.
	DroppedLine func(n int64) []byte
}

// A Relay is an io.Writer that never blocks: it queues each Write for one goroutine to copy to its
// destination, and drops it, counted, if the queue is full. It is meant for line-oriented writers
// such as slog's handlers, which make one Write per record. It is safe for concurrent use.
// Make one with [New] and stop it with [Relay.Close]; the zero value is not usable.
type Relay struct {
	dst         io.Writer
	maxLines    int
	maxBytes    int
	droppedLine func(n int64) []byte

	wake chan struct{} // capacity 1: there is work, or the Relay is closing
	done chan struct{} // closed when the copying goroutine has returned

	mu      sync.Mutex
	queue   []entry
	bytes   int   // bytes in queue
	pending int64 // lines dropped since the last entry queued
	dropped int64 // lines dropped in all
	closed  bool
}

// An entry is one queued line, and the number of lines dropped just before it.
type entry struct {
	line          []byte
	droppedBefore int64
}

// New returns a Relay that copies to dst, and starts its goroutine.
func New(dst io.Writer, opts Options) *Relay {
	r := &Relay{
		dst:         dst,
		maxLines:    opts.MaxLines,
		maxBytes:    opts.MaxBytes,
		droppedLine: opts.DroppedLine,
		wake:        make(chan struct{}, 1),
		done:        make(chan struct{}),
	}
	if r.maxLines <= 0 {
		r.maxLines = DefaultMaxLines
	}
	if r.maxBytes <= 0 {
		r.maxBytes = DefaultMaxBytes
	}
	if r.droppedLine == nil {
		r.droppedLine = func(n int64) []byte { return fmt.Appendf(nil, "logrelay: %d log lines dropped\n", n) }
	}
	go r.copy()
	return r
}

// Write queues a copy of p to be written to the destination, or drops it if the queue is full or
// the Relay is closed. It never blocks on the destination, and always returns len(p), nil: a
// logger has nothing better to do with an error.
func (r *Relay) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		r.dropped++ // no one is left to report it
		return len(p), nil
	}
	if len(r.queue) >= r.maxLines || r.bytes+len(p) > r.maxBytes {
		r.pending++
		r.dropped++
		return len(p), nil
	}
	r.queue = append(r.queue, entry{line: append([]byte(nil), p...), droppedBefore: r.pending})
	r.bytes += len(p)
	r.pending = 0
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

// Dropped returns the number of lines dropped so far, reported or not.
func (r *Relay) Dropped() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}

// Close stops accepting lines (later Writes are dropped) and waits until those queued, and the report of any dropped, are
// written, or until ctx is done. It returns nil if everything was written, and otherwise an error
// that wraps ctx's and says how many lines were not; the goroutine writing then stays blocked on
// the destination. Close may be called more than once.
func (r *Relay) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		r.mu.Lock()
		queued, dropped := len(r.queue), r.dropped
		r.mu.Unlock()
		return fmt.Errorf("logrelay: destination stalled with %d lines queued (%d dropped in all): %w", queued, dropped, ctx.Err())
	}
}

// copy writes the queued lines to the destination, each preceded by the report of the lines
// dropped before it, until the Relay is closed and everything is written. Write errors are
// ignored: there is nowhere to report them.
func (r *Relay) copy() {
	defer close(r.done)
	r.mu.Lock()
	for {
		switch {
		case len(r.queue) > 0:
			e := r.queue[0]
			r.queue[0] = entry{}
			r.queue = r.queue[1:]
			if len(r.queue) == 0 {
				r.queue = nil // let go of the array
			}
			r.mu.Unlock()
			if e.droppedBefore > 0 {
				r.dst.Write(r.droppedLine(e.droppedBefore))
			}
			r.dst.Write(e.line)
			r.mu.Lock()
			r.bytes -= len(e.line)
		case r.pending > 0:
			// The queue drained after lines were dropped: report them now rather than wait for
			// another line to carry the count.
			n := r.pending
			r.pending = 0
			r.mu.Unlock()
			r.dst.Write(r.droppedLine(n))
			r.mu.Lock()
		case r.closed:
			r.mu.Unlock()
			return
		default:
			r.mu.Unlock()
			<-r.wake
			r.mu.Lock()
		}
	}
}
