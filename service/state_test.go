package service_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/internal/validate"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/service"
)

// tieredPolicies has a policy with tiers beside one without.
const tieredPolicies = `
policies:
  - name: per-minute
    algorithm: fixed_window
    limit: 3
    window: 1m
    tiers:
      pro:
        limit: 10
      hourly:
        window: 1h
  - name: per-day
    algorithm: gcra
    limit: 5
    window: 24h
`

// TestStateReadsEveryPolicy checks Service.State without a policy: one State per policy of the
// configuration, in its order, each the numbers in force and the subject's state under them, and a
// read that consumes nothing.
func TestStateReadsEveryPolicy(t *testing.T) {
	s := newService(t, nil, tieredPolicies)
	alice := admit.Subject{ID: "alice"}
	for range 3 {
		if res, err := s.Check(t.Context(), service.Check{Policies: []string{"per-minute", "per-day"}, Subject: alice, Cost: 1}); err != nil || !res.Allowed {
			t.Fatalf("check = %+v, %v; want allowed", res, err)
		}
	}
	for i := range 2 { // twice: the first read consumed nothing
		states, err := s.State(t.Context(), service.StateQuery{Subject: alice})
		if err != nil || len(states) != 2 {
			t.Fatalf("read %d: State = %+v, %v; want 2 states", i, states, err)
		}
		minute, day := states[0], states[1]
		if minute.Decision.Limit.Name != "per-minute" || minute.Source != service.SourcePolicy || minute.Tier != "" ||
			minute.Decision.Limit.Rate != 3 || minute.Decision.Remaining != 0 || !minute.Decision.Allowed ||
			minute.Decision.RetryAfter != 0 || minute.Decision.ResetAfter <= 0 || minute.Decision.ResetAfter > time.Minute {
			t.Errorf("read %d: per-minute %+v; want the policy's 3/min, spent: 0 remaining, not over it, a reset within a minute", i, minute)
		}
		if day.Decision.Limit.Name != "per-day" || day.Source != service.SourcePolicy || day.Decision.Remaining != 2 ||
			!day.Decision.Allowed || day.Decision.RetryAfter != 0 || day.Decision.ResetAfter <= 0 {
			t.Errorf("read %d: per-day %+v; want 2 of 5 remaining, no retry, a reset", i, day)
		}
	}
	// A reload that lowers the limit leaves alice over it: the peek is refused, with a retry.
	s.Swap(mustParse(t, strings.Replace(tieredPolicies, "limit: 3", "limit: 2", 1)))
	states, err := s.State(t.Context(), service.StateQuery{Subject: alice, Policy: "per-minute"})
	if d := states[0].Decision; err != nil || d.Allowed || d.Limit.Rate != 2 || d.Remaining != 0 || d.RetryAfter <= 0 || d.RetryAfter > time.Minute {
		t.Errorf("over a lowered limit: %+v, %v; want refused, 0 remaining, a retry within a minute", states, err)
	}
	// Another subject is untouched.
	states, err = s.State(t.Context(), service.StateQuery{Subject: admit.Subject{ID: "bob"}, Policy: "per-minute"})
	if err != nil || len(states) != 1 || states[0].Decision.Remaining != 2 || !states[0].Decision.Allowed {
		t.Errorf("bob = %+v, %v; want 3 remaining", states, err)
	}
}

// TestStateOfATier checks that a tier's numbers are read with Source tier: a tier of the same shape
// shares the policy's key (its count), one of another shape has a key of its own.
func TestStateOfATier(t *testing.T) {
	s := newService(t, nil, tieredPolicies)
	alice := admit.Subject{ID: "alice"}
	for range 2 {
		if _, err := s.Check(t.Context(), service.Check{Policies: []string{"per-minute"}, Subject: alice, Cost: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		tier      string
		source    string
		rate      int64
		period    time.Duration
		remaining int64
	}{
		{"", service.SourcePolicy, 3, time.Minute, 1},
		{"pro", service.SourceTier, 10, time.Minute, 8}, // the policy's key: 2 counted
		{"hourly", service.SourceTier, 3, time.Hour, 3}, // another window, another key
	} {
		states, err := s.State(t.Context(), service.StateQuery{Subject: alice, Policy: "per-minute", Tier: c.tier})
		if err != nil || len(states) != 1 {
			t.Fatalf("tier %q: State = %+v, %v", c.tier, states, err)
		}
		st := states[0]
		if st.Tier != c.tier || st.Source != c.source || st.Decision.Limit.Name != "per-minute" ||
			st.Decision.Limit.Rate != c.rate || st.Decision.Limit.Period != c.period || st.Decision.Remaining != c.remaining {
			t.Errorf("tier %q: %+v; want source %s, %d per %v, %d remaining", c.tier, st, c.source, c.rate, c.period, c.remaining)
		}
	}
}

// TestStateErrors checks each mistake State refuses before any I/O, by the error it matches.
func TestStateErrors(t *testing.T) {
	s := newService(t, nil, tieredPolicies)
	alice := admit.Subject{ID: "alice"}
	for _, c := range []struct {
		name string
		q    service.StateQuery
		want error
		msg  string
	}{
		{"unknown policy", service.StateQuery{Subject: alice, Policy: "per-hour"}, service.ErrUnknownPolicy, `unknown policy "per-hour"`},
		{"unknown tier", service.StateQuery{Subject: alice, Policy: "per-minute", Tier: "gold"}, policy.ErrUnknownTier, `unknown tier "gold" for policy "per-minute"`},
		{"a tier of a policy without tiers", service.StateQuery{Subject: alice, Policy: "per-day", Tier: "pro"}, policy.ErrUnknownTier, `unknown tier "pro" for policy "per-day"`},
		{"a tier without a policy", service.StateQuery{Subject: alice, Tier: "pro"}, admit.ErrInvalidRequest, `tier "pro" names no policy`},
		{"no subject", service.StateQuery{Policy: "per-minute"}, admit.ErrInvalidRequest, "empty subject"},
		{"an oversized subject", service.StateQuery{Subject: admit.Subject{ID: strings.Repeat("x", 1<<20+1)}}, admit.ErrInvalidRequest, "subject of more than"},
	} {
		_, err := s.State(t.Context(), c.q)
		if !errors.Is(err, c.want) || !strings.Contains(validate.ClientMessage(err), c.msg) {
			t.Errorf("%s: State = %v; want %v saying %q", c.name, err, c.want, c.msg)
		}
	}
}

// TestStateOfManyPolicies checks a configuration of more policies than two TakeAlls decide (16
// each): every one is read, in order.
func TestStateOfManyPolicies(t *testing.T) {
	var b strings.Builder
	b.WriteString("policies:\n")
	n := 33
	for i := range n {
		fmt.Fprintf(&b, "  - name: p%d\n    algorithm: fixed_window\n    limit: %d\n    window: 1m\n", i, i+1)
	}
	s := newService(t, nil, b.String())
	states, err := s.State(t.Context(), service.StateQuery{Subject: admit.Subject{ID: "alice"}})
	if err != nil || len(states) != n {
		t.Fatalf("State = %d states, %v; want %d", len(states), err, n)
	}
	for i, st := range states {
		if st.Decision.Limit.Name != fmt.Sprintf("p%d", i) || st.Decision.Remaining != int64(i+1) {
			t.Errorf("state %d: %+v; want p%d with %d remaining", i, st, i, i+1)
		}
	}
}

// TestStateUnavailable checks that a Store that cannot decide makes State's error match
// admit.ErrUnavailable.
func TestStateUnavailable(t *testing.T) {
	down, err := redisstore.New(redisstore.Config{URL: "redis://" + redistest.ClosedPort(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	s := newService(t, down, tieredPolicies)
	if _, err := s.State(t.Context(), service.StateQuery{Subject: admit.Subject{ID: "alice"}}); !errors.Is(err, admit.ErrUnavailable) {
		t.Errorf("State = %v; want one matching admit.ErrUnavailable", err)
	}
}
