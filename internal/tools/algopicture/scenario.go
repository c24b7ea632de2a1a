package main

import "time"

// The picture's numbers: a limit of 5 per second, over 4 seconds that start at a whole minute of
// Unix time (so the aligned windows start at every whole second of the picture).
const (
	limit    = 5
	window   = time.Second
	duration = 4 * time.Second
)

// origin is the picture's time 0, in Unix microseconds: 2026-01-01 00:00:00 UTC.
var origin = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

// A burst is count requests from at on, one every gap.
type burst struct {
	at, gap time.Duration
	count   int
}

// bursts is the client's traffic, two episodes of the same burst — 11 requests within a third of a
// second — once across a whole second, where aligned windows end, and once across the end of the
// window that a lone request started a second before.
var bursts = []burst{
	{at: 850 * time.Millisecond, gap: 30 * time.Millisecond, count: 11},
	{at: 2170 * time.Millisecond, count: 1},
	{at: 3020 * time.Millisecond, gap: 30 * time.Millisecond, count: 11},
}

// scenario returns the times of the client's requests, since origin, in order.
func scenario() []time.Duration {
	var ts []time.Duration
	for _, b := range bursts {
		for i := range b.count {
			ts = append(ts, b.at+time.Duration(i)*b.gap)
		}
	}
	return ts
}
