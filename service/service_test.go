package service_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
)

const twoPolicies = `
policies:
  - name: per-second
    algorithm: fixed_window
    limit: 3
    window: 1s
  - name: per-day
    algorithm: gcra
    limit: 5
    window: 24h
`

func mustParse(t *testing.T, src string) *policy.Config {
	t.Helper()
	cfg, err := policy.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// testSecret is the HMAC secret of newService's KeyBuilder.
const testSecret = "service test secret of 32 bytes"

// newService returns a Service over a fresh memstore under the configuration src, and the store.
func newService(t *testing.T, store admit.Store, src string) *service.Service {
	t.Helper()
	if store == nil {
		mem := memstore.New(memstore.Options{})
		t.Cleanup(func() { mem.Close() })
		store = mem
	}
	keys, err := admit.NewKeyBuilder([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	s, err := service.New(store, keys, mustParse(t, src))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAllOrNothing(t *testing.T) {
	s := newService(t, nil, twoPolicies)
	ctx := t.Context()
	both := service.Check{Policies: []string{"per-second", "per-day"}, Subject: admit.Subject{ID: "alice"}, Cost: 1}
	for i := range 3 {
		res, err := s.Check(ctx, both)
		if err != nil || !res.Allowed {
			t.Fatalf("check %d = %+v, %v; want allowed", i, res, err)
		}
		if len(res.Decisions) != 2 || res.Decisions[0].Limit.Name != "per-second" || res.Decisions[1].Limit.Name != "per-day" {
			t.Fatalf("decisions %+v; want per-second then per-day", res.Decisions)
		}
		if got, want := res.Decisions[0].Remaining, int64(2-i); got != want {
			t.Errorf("check %d: per-second remaining %d; want %d", i, got, want)
		}
	}
	res, err := s.Check(ctx, both)
	if err != nil || res.Allowed || res.Decisions[res.Deciding].Limit.Name != "per-second" {
		t.Fatalf("fourth check = %+v, %v; want limited by per-second", res, err)
	}
	// The rejection by per-second consumed nothing of per-day: 2 of its 5 are left.
	day, err := s.Check(ctx, service.Check{Policies: []string{"per-day"}, Subject: admit.Subject{ID: "alice"}, Cost: 0})
	if err != nil || day.Decisions[0].Remaining != 2 {
		t.Errorf("per-day peek = %+v, %v; want 2 remaining", day, err)
	}
	// Another subject has its own allowance.
	if res, err := s.Check(ctx, both); err != nil || res.Allowed {
		t.Fatalf("alice again = %+v, %v; want limited", res, err)
	}
	bob := both
	bob.Subject = admit.Subject{ID: "bob"}
	if res, err := s.Check(ctx, bob); err != nil || !res.Allowed {
		t.Errorf("bob = %+v, %v; want allowed", res, err)
	}
}

func TestInvalidChecks(t *testing.T) {
	s := newService(t, nil, twoPolicies)
	alice := admit.Subject{ID: "alice"}
	for _, c := range []struct {
		name  string
		check service.Check
		want  error
	}{
		{"unknown policy", service.Check{Policies: []string{"per-hour"}, Subject: alice, Cost: 1}, service.ErrUnknownPolicy},
		{"no policy", service.Check{Subject: alice, Cost: 1}, admit.ErrInvalidRequest},
		{"a policy twice", service.Check{Policies: []string{"per-day", "per-day"}, Subject: alice, Cost: 1}, admit.ErrInvalidRequest},
		{"cost above the limit", service.Check{Policies: []string{"per-second"}, Subject: alice, Cost: 4}, admit.ErrInvalidRequest},
		{"negative cost", service.Check{Policies: []string{"per-second"}, Subject: alice, Cost: -1}, admit.ErrInvalidRequest},
		{"empty subject", service.Check{Policies: []string{"per-second"}, Cost: 1}, admit.ErrInvalidRequest},
		{"oversized request ID", service.Check{Policies: []string{"per-second"}, Subject: alice, Cost: 1, RequestID: strings.Repeat("x", bound.MaxIDLen+1)}, admit.ErrInvalidRequest},
	} {
		if _, err := s.Check(t.Context(), c.check); !errors.Is(err, c.want) {
			t.Errorf("%s: Check = %v; want %v", c.name, err, c.want)
		}
	}
	// None of them consumed anything.
	res, err := s.Check(t.Context(), service.Check{Policies: []string{"per-second"}, Subject: alice, Cost: 0})
	if err != nil || res.Decisions[0].Remaining != 3 {
		t.Errorf("peek = %+v, %v; want 3 remaining", res, err)
	}
}

func TestReplay(t *testing.T) {
	s := newService(t, nil, twoPolicies)
	c := service.Check{Policies: []string{"per-second", "per-day"}, Subject: admit.Subject{ID: "alice"}, Cost: 2, RequestID: "req-1"}
	first, err := s.Check(t.Context(), c)
	if err != nil || !first.Allowed || first.Replayed {
		t.Fatalf("first = %+v, %v", first, err)
	}
	again, err := s.Check(t.Context(), c)
	if err != nil || !again.Allowed || !again.Replayed || again.Decisions[0].Remaining != first.Decisions[0].Remaining {
		t.Fatalf("retry = %+v, %v; want the first decisions, replayed", again, err)
	}
}

// TestConcurrencyPolicyCost: under a concurrency policy a Check costs 0 (a peek) or 1 (one lease);
// any other cost — above the limit or not, alone or beside a policy it would fit — is an invalid
// request that consumes nothing from any policy.
func TestConcurrencyPolicyCost(t *testing.T) {
	s := newService(t, nil, `
policies:
  - name: tokens
    algorithm: fixed_window
    limit: 1000
    window: 1m
  - name: in-flight
    algorithm: concurrency
    limit: 2
    lease_ttl: 30s
`)
	alice := admit.Subject{ID: "alice"}
	for _, c := range []service.Check{
		{Policies: []string{"in-flight"}, Subject: alice, Cost: 3},
		{Policies: []string{"in-flight"}, Subject: alice, Cost: 2},
		{Policies: []string{"in-flight"}, Subject: alice, Cost: -1},
		{Policies: []string{"tokens", "in-flight"}, Subject: alice, Cost: 100},
	} {
		if res, err := s.Check(t.Context(), c); !errors.Is(err, admit.ErrInvalidRequest) || !strings.Contains(err.Error(), `cost `) || !strings.Contains(err.Error(), `"in-flight"`) {
			t.Errorf("%v at cost %d = %+v, %v; want an invalid request naming the cost and the policy", c.Policies, c.Cost, res, err)
		}
	}
	c := service.Check{Policies: []string{"tokens", "in-flight"}, Subject: alice, Cost: 1}
	for i := range 2 {
		res, err := s.Check(t.Context(), c)
		if err != nil || !res.Allowed || res.Decisions[0].Remaining != int64(999-i) {
			t.Fatalf("check %d = %+v, %v; want allowed, %d tokens left (the invalid checks consumed nothing)", i, res, err, 999-i)
		}
	}
	res, err := s.Check(t.Context(), c)
	if err != nil || res.Allowed || res.Decisions[res.Deciding].Limit.Name != "in-flight" {
		t.Fatalf("third = %+v, %v; want limited by in-flight: each check holds one lease", res, err)
	}
	peek := service.Check{Policies: []string{"in-flight"}, Subject: alice, Cost: 0}
	if res, err := s.Check(t.Context(), peek); err != nil || !res.Allowed || res.Decisions[0].Remaining != 0 || res.Decisions[0].Token != 0 {
		t.Errorf("a peek = %+v, %v; want allowed, 0 remaining, no lease", res, err)
	}
}

// blockingStore is a memstore that holds each TakeAll until release is closed, and reports the
// Requests it was given on seen.
type blockingStore struct {
	*memstore.Store
	seen    chan []admit.Request
	release chan struct{}
}

func (b *blockingStore) TakeAll(ctx context.Context, rs []admit.Request, ds []admit.Decision) (bool, error) {
	b.seen <- append([]admit.Request(nil), rs...)
	<-b.release
	return b.Store.TakeAll(ctx, rs, ds)
}

// TestSwapLeavesChecksInFlight swaps the configuration while a check is in the Store: the check
// finishes under the policy it started with, and the next one sees the new policy.
func TestSwapLeavesChecksInFlight(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	t.Cleanup(func() { mem.Close() })
	store := &blockingStore{Store: mem, seen: make(chan []admit.Request, 2), release: make(chan struct{})}
	s := newService(t, store, twoPolicies)
	c := service.Check{Policies: []string{"per-second"}, Subject: admit.Subject{ID: "alice"}, Cost: 1}
	done := make(chan service.Result)
	go func() {
		res, err := s.Check(context.Background(), c)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	inFlight := <-store.seen
	old := s.Swap(mustParse(t, strings.Replace(twoPolicies, "limit: 3", "limit: 7", 1)))
	if p, _ := old.Policy("per-second"); p.Limit.Rate != 3 {
		t.Errorf("Swap returned a configuration with per-second %v; want the old one", p.Limit)
	}
	close(store.release)
	if res := <-done; res.Decisions[0].Limit.Rate != 3 || inFlight[0].Limit.Rate != 3 {
		t.Errorf("the check in flight ran under %v; want the policy it started with, rate 3", res.Decisions[0].Limit)
	}
	res, err := s.Check(t.Context(), c)
	if err != nil || res.Decisions[0].Limit.Rate != 7 || res.Decisions[0].Remaining != 5 {
		t.Errorf("after the swap: %+v, %v; want rate 7 with 5 remaining (the count kept)", res, err)
	}
	<-store.seen
}

func TestNewNeedsEverything(t *testing.T) {
	if _, err := service.New(nil, nil, nil); err == nil {
		t.Error("New(nil, nil, nil) succeeded")
	}
}

const leases = `
policies:
  - name: in-flight
    algorithm: concurrency
    limit: 2
    lease_ttl: 1h
  - name: per-hour
    algorithm: fixed_window
    limit: 100
    window: 1h
`

// TestAdmitReleases checks that Admit holds a concurrency policy's lease until release, that
// release ends it once only, and that it works after the context is done.
func TestAdmitReleases(t *testing.T) {
	s := newService(t, nil, leases)
	c := service.Check{Policies: []string{"in-flight", "per-hour"}, Subject: admit.Subject{ID: "alice"}, Cost: 1}
	var releases []func()
	for i := range 2 {
		res, release, err := s.Admit(t.Context(), c)
		if err != nil || !res.Allowed || release == nil {
			t.Fatalf("admit %d = %+v, %v; want allowed", i, res, err)
		}
		releases = append(releases, release)
	}
	res, release, err := s.Admit(t.Context(), c)
	if err != nil || res.Allowed || res.Decisions[res.Deciding].Limit.Name != "in-flight" {
		t.Fatalf("third admit = %+v, %v; want limited by in-flight", res, err)
	}
	release() // a rejected Check holds nothing: a no-op
	ctx, cancel := context.WithCancel(t.Context())
	res, _, err = s.Admit(ctx, service.Check{Policies: []string{"in-flight"}, Subject: admit.Subject{ID: "bob"}, Cost: 1})
	if err != nil || !res.Allowed {
		t.Fatalf("bob = %+v, %v; want allowed", res, err)
	}
	cancel()
	releases[0]()
	releases[0]() // again: releases nothing more
	res, release, err = s.Admit(t.Context(), c)
	if err != nil || !res.Allowed {
		t.Fatalf("after one release = %+v, %v; want allowed", res, err)
	}
	defer release()
	if res, _, err := s.Admit(t.Context(), c); err != nil || res.Allowed {
		t.Fatalf("after a second release of the same lease = %+v, %v; want limited: release works once", res, err)
	}
	// The per-hour policy is not concurrency: releasing gives none of it back (3 admitted).
	peek, err := s.Check(t.Context(), service.Check{Policies: []string{"per-hour"}, Subject: admit.Subject{ID: "alice"}, Cost: 0})
	if err != nil || peek.Decisions[0].Remaining != 97 {
		t.Errorf("per-hour peek = %+v, %v; want 97 remaining", peek, err)
	}
}

// TestAdmitReleaseAfterCancel checks that a release whose Admit's context is done still releases.
func TestAdmitReleaseAfterCancel(t *testing.T) {
	s := newService(t, nil, leases)
	c := service.Check{Policies: []string{"in-flight"}, Subject: admit.Subject{ID: "carol"}, Cost: 1}
	ctx, cancel := context.WithCancel(t.Context())
	var releases []func()
	for range 2 {
		_, release, err := s.Admit(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	cancel()
	for _, release := range releases {
		release()
	}
	for i := range 2 {
		if res, _, err := s.Admit(t.Context(), c); err != nil || !res.Allowed {
			t.Fatalf("admit %d after releases with a done context = %+v, %v; want allowed", i, res, err)
		}
	}
}

// TestAdmitErrors checks that an Admit that decides nothing returns a release that does nothing.
func TestAdmitErrors(t *testing.T) {
	s := newService(t, nil, leases)
	_, release, err := s.Admit(t.Context(), service.Check{Policies: []string{"nope"}, Subject: admit.Subject{ID: "x"}, Cost: 1})
	if !errors.Is(err, service.ErrUnknownPolicy) || release == nil {
		t.Fatalf("Admit(unknown policy) = %v, release nil %v; want ErrUnknownPolicy and a release", err, release == nil)
	}
	release()
}
