package memstore

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
)

// TestTakeValidatesAsRequestValidate checks that Take refuses every invalid Request with the error
// Request.Validate gives, whether its Limit is remembered as valid or not, and decides the valid ones.
func TestTakeValidatesAsRequestValidate(t *testing.T) {
	gcra := admit.Limit{Name: "api", Algorithm: admit.GCRA, Rate: 10, Period: time.Second, Burst: 20}
	fixed := admit.Limit{Name: "day", Algorithm: admit.FixedWindow, Rate: 5, Period: time.Hour}
	lease := admit.Limit{Algorithm: admit.Concurrency, Rate: 3, Period: time.Minute}
	with := func(lim admit.Limit, change func(*admit.Limit)) admit.Limit {
		change(&lim)
		return lim
	}
	reqs := []admit.Request{
		{Key: "k", Limit: gcra, Cost: 1},
		{Key: "k2", Limit: fixed, Cost: 5},
		{Key: "k3", Limit: lease, Cost: 0},
		{Key: "", Limit: gcra, Cost: 1},                                     // empty key
		{Key: strings.Repeat("k", bound.MaxKeyLen+1), Limit: gcra, Cost: 1}, // long key
		{Key: "k", Limit: gcra, Cost: -1},
		{Key: "k", Limit: gcra, Cost: 21},                                                 // above the burst
		{Key: "k2", Limit: fixed, Cost: 6},                                                // above the rate
		{Key: "k3", Limit: lease, Cost: 2},                                                // a lease is one unit
		{Key: "", Limit: with(gcra, func(l *admit.Limit) { l.Rate = 700_000 }), Cost: 1},  // both: the Limit is reported
		{Key: "k", Limit: with(gcra, func(l *admit.Limit) { l.Rate = 700_000 }), Cost: 1}, // 1.43 µs rounds up to 2: 40% slower
		{Key: "k", Limit: with(gcra, func(l *admit.Limit) { l.Burst = -1 }), Cost: 1},     // negative burst
		{Key: "k", Limit: with(gcra, func(l *admit.Limit) { l.Name = "API" }), Cost: 1},   // a bad name
		{Key: "k", Limit: with(fixed, func(l *admit.Limit) { l.Period = time.Microsecond }), Cost: 1},
		{Key: "k", Limit: with(fixed, func(l *admit.Limit) { l.Burst = 2 }), Cost: 1},      // only GCRA has a burst
		{Key: "k", Limit: with(gcra, func(l *admit.Limit) { l.Aligned = true }), Cost: 1},  // only fixed windows align
		{Key: "k", Limit: with(fixed, func(l *admit.Limit) { l.Algorithm = 99 }), Cost: 1}, // unknown algorithm
		{Key: "k", Limit: with(fixed, func(l *admit.Limit) { l.Rate = bound.MaxRate + 1 }), Cost: 1},
	}
	s := New(Options{SweepInterval: -1})
	defer s.Close()
	for round := range 2 { // the second round finds the valid Limits remembered
		for i, r := range reqs {
			want := r.Validate()
			_, err := s.Take(context.Background(), r)
			switch {
			case want == nil && err != nil:
				t.Errorf("round %d, request %d (%+v): Take: %v; want a decision", round, i, r, err)
			case want != nil && (err == nil || err.Error() != "memstore: "+want.Error()):
				t.Errorf("round %d, request %d (%+v): Take: %v; want memstore: %v", round, i, r, err, want)
			}
		}
	}
}

// A replicated Limit (admit.Limit.Replicas) is refused by Take, TakeAll and Settle with an error
// matching admit.ErrInvalidLimit that says why, and nothing is consumed: not its key, nor the other
// keys of its call.
func TestReplicatedRefused(t *testing.T) {
	s := New(Options{SweepInterval: -1})
	defer s.Close()
	ctx := context.Background()
	async := admit.Limit{Name: "api", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Hour}
	repl := async
	repl.Name, repl.Replicas = "pay", 1
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, admit.ErrInvalidLimit) || !strings.Contains(err.Error(), "durability replicated needs Redis replicas") ||
			!strings.Contains(err.Error(), "state lives in this process") {
			t.Errorf("%s under a replicated Limit: %v; want ErrInvalidLimit saying why", what, err)
		}
	}
	for round := range 2 { // the second round: the async Limit remembered, the replicated one never
		_, err := s.Take(ctx, admit.Request{Key: "{a}:pay", Limit: repl, Cost: 1})
		refused("Take", err)
		_, err = s.Take(ctx, admit.Request{Key: "{a}:pay", Limit: repl, Cost: 1, ID: "req-" + strconv.Itoa(round)})
		refused("Take with an ID", err)
		ds := make([]admit.Decision, 2)
		_, err = s.TakeAll(ctx, []admit.Request{{Key: "{a}:api", Limit: async, Cost: 1}, {Key: "{a}:pay", Limit: repl, Cost: 1}}, ds)
		refused("TakeAll", err)
		if ds[0].Allowed || ds[1].Allowed {
			t.Errorf("TakeAll under a replicated Limit: %+v; want nothing admitted", ds)
		}
		_, err = s.Settle(ctx, admit.Reservation{Request: admit.Request{Key: "{a}:pay", Limit: repl, Cost: 1}, Token: 1}, 0)
		refused("Settle", err)
		if _, err := s.Take(ctx, admit.Request{Key: "{a}:warm", Limit: async, Cost: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []string{"{a}:api", "{a}:pay"} {
		lim := async
		if d, err := s.Take(ctx, admit.Request{Key: key, Limit: lim, Cost: 0}); err != nil || d.Remaining != 2 {
			t.Errorf("%s after the refusals: %+v, %v; want nothing consumed, 2 remaining", key, d, err)
		}
	}
}

// TestTakeRevalidatesAChangedLimit checks that a Limit changed after a Take under it is validated
// anew: remembering it valid must not let an invalid Limit of the same policy through.
func TestTakeRevalidatesAChangedLimit(t *testing.T) {
	s := New(Options{SweepInterval: -1})
	defer s.Close()
	r := admit.Request{Key: "k", Limit: admit.Limit{Name: "api", Algorithm: admit.GCRA, Rate: 10, Period: time.Second}, Cost: 1}
	for range 2 {
		if _, err := s.Take(context.Background(), r); err != nil {
			t.Fatalf("Take under a valid Limit: %v", err)
		}
	}
	for _, change := range []func(*admit.Limit){
		func(l *admit.Limit) { l.Rate = 700_000 },  // its emission interval rounds up by 40%
		func(l *admit.Limit) { l.Burst = -5 },      // another field
		func(l *admit.Limit) { l.Name = "API" },    // the name alone
		func(l *admit.Limit) { l.Aligned = true },  // a flag alone
		func(l *admit.Limit) { l.Period = 999999 }, // not whole milliseconds
	} {
		changed := r
		change(&changed.Limit)
		want := changed.Validate()
		if want == nil {
			t.Fatalf("%+v is valid: the test means to change the Limit into an invalid one", changed.Limit)
		}
		if _, err := s.Take(context.Background(), changed); err == nil || err.Error() != "memstore: "+want.Error() {
			t.Errorf("Take under %+v after Takes under %+v: %v; want memstore: %v", changed.Limit, r.Limit, err, want)
		}
	}
}

// TestTakeRemembersNoCallerBytes checks that a remembered Limit owns its name: the cache compares
// names by value, so it must not keep a caller's bytes.
func TestTakeRemembersNoCallerBytes(t *testing.T) {
	s := New(Options{SweepInterval: -1})
	defer s.Close()
	lim := admit.Limit{Name: "api", Algorithm: admit.FixedWindow, Rate: 10, Period: time.Second}
	if _, err := s.Take(context.Background(), admit.Request{Key: "k", Limit: lim, Cost: 1}); err != nil {
		t.Fatal(err)
	}
	known := s.valid.slots[limitSlot(&lim)].Load()
	if known == nil || known.Limit != lim {
		t.Fatalf("the Store remembers %v for %v; want it", known, lim)
	}
	if unsafe.StringData(known.Name) == unsafe.StringData(lim.Name) {
		t.Fatalf("the remembered Limit shares its name's bytes with the caller's")
	}
}

// TestSameLimitComparesEveryField checks that sameLimit tells apart two Limits that differ in any one
// field, as == does.
func TestSameLimitComparesEveryField(t *testing.T) {
	base := admit.Limit{Name: "a", Algorithm: admit.GCRA, Rate: 1, Period: time.Second, Burst: 1}
	if !sameLimit(&base, &base) {
		t.Fatal("sameLimit(l, l) = false")
	}
	v := reflect.ValueOf(base)
	for i := range v.NumField() {
		other := base
		f := reflect.ValueOf(&other).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("b")
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Int64, reflect.Int:
			f.SetInt(f.Int() + 1)
		case reflect.Uint8:
			f.SetUint(f.Uint() + 1)
		default:
			t.Fatalf("admit.Limit.%s is a %v: teach this test and sameLimit about it", v.Type().Field(i).Name, f.Kind())
		}
		if sameLimit(&base, &other) {
			t.Errorf("sameLimit misses a change of admit.Limit.%s", v.Type().Field(i).Name)
		}
	}
}
