package main

import (
	"bytes"
	"os"
	"testing"
	"time"
)

// The checked-in picture is what the generator draws today: it can never go stale.
func TestPictureIsCurrent(t *testing.T) {
	const path = "../../../docs/algorithms.svg"
	var b bytes.Buffer
	render(&b, replay(scenario()))
	have, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the checked-in picture: %v (run make pictures)", err)
	}
	if !bytes.Equal(have, b.Bytes()) {
		t.Fatalf("docs/algorithms.svg is not what internal/tools/algopicture draws now: run make pictures and commit it")
	}
}

// The generator's output depends on nothing but its code.
func TestPictureIsDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	render(&a, replay(scenario()))
	render(&b, replay(scenario()))
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two renderings differ")
	}
}

// The picture shows what it says: each fixed window admits more than its limit within one window's
// length somewhere — the boundary burst — and never more than twice it; and the two fixed windows
// decide the same burst differently.
func TestFixedWindowsShowTheBoundaryBurst(t *testing.T) {
	rows := replay(scenario())
	byName := map[string]row{}
	for _, r := range rows {
		byName[r.alg.name] = r
	}
	for _, name := range []string{"fixed window", "fixed window, aligned"} {
		r, ok := byName[name]
		if !ok {
			t.Fatalf("no row %q", name)
		}
		if r.peak.count <= limit || r.peak.count > 2*limit || r.peak.to-r.peak.from >= window/2 {
			t.Errorf("%s: peak %+v; want more than %d and at most %d admitted within less than half a window", name, r.peak, limit, 2*limit)
		}
		admitted, rejected := 0, 0
		for _, q := range r.requests {
			if q.admitted {
				admitted++
			} else {
				rejected++
			}
		}
		if admitted == 0 || rejected == 0 {
			t.Errorf("%s: %d admitted, %d rejected; want both", name, admitted, rejected)
		}
	}
	if a, b := byName["fixed window"].peak, byName["fixed window, aligned"].peak; a.from == b.from {
		t.Errorf("both fixed windows burst at %v; want the first-admission window's burst at its own boundary", a.from)
	}
}

// peakOf counts within a half-open window's length, and prefers the tightest span.
func TestPeakOf(t *testing.T) {
	ms := time.Millisecond
	rs := []request{
		{0, true}, {500 * ms, true}, {900 * ms, true}, // 3 within 900 ms
		{1900 * ms, false},
		{2000 * ms, true}, {2100 * ms, true}, {2200 * ms, true}, // 3 within 200 ms: the tightest
		{3200 * ms, true}, // a window after 2200: not with them (half-open)
	}
	if got, want := peakOf(rs), (peak{count: 3, from: 2000 * ms, to: 2200 * ms}); got != want {
		t.Errorf("peakOf = %+v; want %+v (the tightest of the spans holding 3)", got, want)
	}
	if got := peakOf(nil); got != (peak{}) {
		t.Errorf("peakOf(nil) = %+v; want none", got)
	}
}

// The sliding rows show what their labels say: neither admits more than the limit within any
// window's length of this client's traffic (a sliding log never does; a sliding window's estimate
// keeps it there here), and both reject some of its bursts.
func TestSlidingRowsHoldTheLimit(t *testing.T) {
	for _, r := range replay(scenario()) {
		if r.alg.name != "sliding window" && r.alg.name != "sliding log" {
			continue
		}
		if r.peak.count > limit {
			t.Errorf("%s: peak %+v; want at most %d within a window's length", r.alg.name, r.peak, limit)
		}
		rejected := 0
		for _, q := range r.requests {
			if !q.admitted {
				rejected++
			}
		}
		if rejected == 0 {
			t.Errorf("%s: nothing rejected; want the bursts cut to the limit", r.alg.name)
		}
	}
}
