package main

import "time"

// A row is one algorithm's replay of the scenario: what it decided, its windows, and its peak.
type row struct {
	alg      algorithm
	requests []request
	windows  []span // since origin, in microseconds, clipped to the picture
	peak     peak
}

// A request is one of the client's requests and what the algorithm decided.
type request struct {
	at       time.Duration // since origin
	admitted bool
}

// A peak is the most admissions within any one window's length: how many, and the first and last of
// them. A fixed window's peak is up to twice its limit, around a window's end.
type peak struct {
	count    int
	from, to time.Duration
}

// replay decides the requests at ts under every algorithm.
func replay(ts []time.Duration) []row {
	rows := make([]row, len(algorithms))
	for i, alg := range algorithms {
		sim := alg.new(limit, window)
		r := row{alg: alg}
		for _, at := range ts {
			r.requests = append(r.requests, request{at: at, admitted: sim.take(origin + at.Microseconds())})
		}
		end := origin + duration.Microseconds()
		for _, w := range sim.windows(origin, end) {
			if w.to > origin && w.from < end {
				r.windows = append(r.windows, span{max(w.from, origin) - origin, min(w.to, end) - origin})
			}
		}
		r.peak = peakOf(r.requests)
		rows[i] = r
	}
	return rows
}

// peakOf returns the most admissions among rs (in order of time) within any interval as long as a
// window: the tightest such, then the earliest.
func peakOf(rs []request) peak {
	var admitted []time.Duration
	for _, r := range rs {
		if r.admitted {
			admitted = append(admitted, r.at)
		}
	}
	var p peak
	for i, from := range admitted {
		j := i
		for j+1 < len(admitted) && admitted[j+1] < from+window {
			j++
		}
		if n := j - i + 1; n > p.count || n == p.count && admitted[j]-from < p.to-p.from {
			p = peak{count: n, from: from, to: admitted[j]}
		}
	}
	return p
}
