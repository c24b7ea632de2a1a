package main

import (
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
)

// An algorithm is one row of the picture: its name, a few words on how it counts, and how to make a
// simulator of it for limit units per window.
type algorithm struct {
	name string
	note string
	new  func(limit int64, window time.Duration) simulator
}

// algorithms are the picture's rows, top to bottom: one small entry each.
var algorithms = []algorithm{
	{"fixed window", "starts at the first admission", newFixedWindow},
	{"fixed window, aligned", "aligned to Unix time", newAlignedWindow},
	{"GCRA", "a steady rate, with bursts", newGCRA},
	{"sliding window", "the previous window weighs in", newSlidingWindow},
	{"sliding log", "every admission, exactly", newSlidingLog},
}

// A simulator replays one key's requests through an algorithm's transition in internal/algo, as a
// store does: it keeps the key's state, asks the transition what to do, and makes the write it names.
type simulator interface {
	// take decides one unit at now, in Unix microseconds (never before the last take's), and reports
	// whether it was admitted.
	take(now int64) bool
	// windows returns the windows to shade between from and to (Unix microseconds), in order; none for
	// an algorithm without windows.
	windows(from, to int64) []span
}

// A span is an interval of time [from, to), in Unix microseconds.
type span struct{ from, to int64 }

// fixedWindow simulates algo.FixedWindow, or, aligned, algo.AlignedWindow.
type fixedWindow struct {
	limit   int64
	window  time.Duration
	aligned bool
	count   int64 // in the key's window, which ends at end; 0 for a missing key
	end     int64
	started []span // the windows the key has had
}

func newFixedWindow(limit int64, window time.Duration) simulator {
	return &fixedWindow{limit: limit, window: window}
}

func newAlignedWindow(limit int64, window time.Duration) simulator {
	return &fixedWindow{limit: limit, window: window, aligned: true}
}

func (f *fixedWindow) take(now int64) bool {
	var st *algo.FixedWindowState
	if f.count > 0 && now < f.end {
		st = &algo.FixedWindowState{Count: f.count, TTL: time.Duration(f.end-now) * time.Microsecond}
	}
	var r algo.FixedWindowResult
	if f.aligned {
		r = algo.AlignedWindow(st, f.limit, f.window, now, 1)
	} else {
		r = algo.FixedWindow(st, f.limit, f.window, 1)
	}
	switch r.Write {
	case algo.WriteCreate:
		f.count, f.end = 1, now+r.ResetAfter.Microseconds()
		f.started = append(f.started, span{now, f.end})
	case algo.WriteIncrement:
		f.count++
	}
	return r.Allowed
}

// windows returns, aligned, every window of the clock; otherwise the windows the key has had, each
// from its first admission.
func (f *fixedWindow) windows(from, to int64) []span {
	if !f.aligned {
		return f.started
	}
	return clockWindows(f.window, from, to)
}

// clockWindows returns the windows of Unix time, multiples of window, that overlap [from, to).
func clockWindows(window time.Duration, from, to int64) []span {
	w := window.Microseconds()
	var ws []span
	for t := from - from%w; t < to; t += w {
		ws = append(ws, span{t, t + w})
	}
	return ws
}

// gcra simulates algo.GCRA with a burst of limit: the key's state is its theoretical arrival time.
type gcra struct {
	lim admit.Limit
	tat int64 // 0 for a missing key
}

func newGCRA(limit int64, window time.Duration) simulator {
	return &gcra{lim: admit.Limit{Algorithm: admit.GCRA, Rate: limit, Period: window}}
}

func (g *gcra) take(now int64) bool {
	r := algo.GCRA(g.tat, now, g.lim, 1)
	if r.Write {
		g.tat = r.TAT
	}
	return r.Allowed
}

// windows returns none: GCRA has no windows.
func (g *gcra) windows(from, to int64) []span { return nil }

// slidingWindow simulates algo.SlidingWindow: the key's state is the start of its window, that
// window's count and the count of the one before, on windows aligned to Unix time.
type slidingWindow struct {
	limit  int64
	window time.Duration
	st     *algo.SlidingWindowState // nil for a missing key
	expiry int64                    // when the key expires, in Unix microseconds
}

func newSlidingWindow(limit int64, window time.Duration) simulator {
	return &slidingWindow{limit: limit, window: window}
}

func (s *slidingWindow) take(now int64) bool {
	if s.st != nil && now >= s.expiry {
		s.st = nil
	}
	r := algo.SlidingWindow(s.st, now, s.limit, s.window, 1)
	switch r.Write {
	case algo.WriteCreate:
		st := r.State
		s.st, s.expiry = &st, r.Expiry
	case algo.WriteIncrement:
		s.st.Curr++
	}
	return r.Allowed
}

// windows returns every window of the clock: a sliding window's windows are aligned to Unix time.
func (s *slidingWindow) windows(from, to int64) []span { return clockWindows(s.window, from, to) }

// slidingLog simulates algo.SlidingLog: the key's state is the time of every admitted unit still in
// the window, oldest first.
type slidingLog struct {
	limit  int64
	window time.Duration
	log    []int64
}

func newSlidingLog(limit int64, window time.Duration) simulator {
	return &slidingLog{limit: limit, window: window}
}

func (l *slidingLog) take(now int64) bool {
	r := algo.SlidingLog(l.log, now, l.limit, l.window, 1)
	switch r.Write {
	case algo.WriteCreate:
		l.log = []int64{now}
	case algo.WriteIncrement:
		l.log = append(l.log[r.Trim:], now)
	}
	return r.Allowed
}

// windows returns none: a sliding log's window moves with every request.
func (l *slidingLog) windows(from, to int64) []span { return nil }
