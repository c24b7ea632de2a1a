package service_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/service"
)

// topPolicies are the policies of the top tests: one that admits one unit per subject, one in
// shadow mode as tight, and one that admits everything.
const topPolicies = `
server:
  top: {size: 4, reveal_subjects: %s}
policies:
  - {name: tight, algorithm: fixed_window, limit: 1, window: 1h}
  - {name: watched, algorithm: fixed_window, limit: 1, window: 1h, mode: shadow}
  - {name: roomy, algorithm: fixed_window, limit: 1000, window: 1h}
`

func topService(t *testing.T, reveal bool) *service.Service {
	t.Helper()
	r := "false"
	if reveal {
		r = "true"
	}
	return newService(t, nil, strings.Replace(topPolicies, "%s", r, 1))
}

// top returns the report of policy, failing the test on an error.
func top(t *testing.T, s *service.Service, policy string) service.TopReport {
	t.Helper()
	r, err := s.Top(policy, 4)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// check decides c, failing the test on an error, and returns whether it was allowed.
func check(t *testing.T, s *service.Service, c service.Check) bool {
	t.Helper()
	res, err := s.Check(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return res.Allowed
}

// A rejection is counted under its policy, by the digest its key ends with; an admission, a peek,
// a replay and a rejection in shadow mode are not, nor is a policy's neighbour in the check.
func TestTopCountsRejections(t *testing.T) {
	s := topService(t, false)
	alice := admit.Subject{ID: "alice"}
	c := service.Check{Policies: []string{"tight", "roomy"}, Subject: alice, Cost: 1}
	if !check(t, s, c) {
		t.Fatal("the first check was refused")
	}
	if r := top(t, s, "tight"); len(r.Entries) != 0 {
		t.Fatalf("an admission was counted: %+v", r.Entries)
	}
	if check(t, s, c) || check(t, s, service.Check{Policies: []string{"tight"}, Subject: alice, Cost: 1}) {
		t.Fatal("a check over the limit was admitted")
	}
	check(t, s, service.Check{Policies: []string{"tight"}, Subject: alice}) // a peek: limited, not a rejection
	r := top(t, s, "tight")
	if len(r.Entries) != 1 || r.Entries[0].Rejected != 2 || r.Entries[0].Error != 0 || r.Bound != 0 {
		t.Fatalf("tight: %+v; want alice rejected 2 times, exactly", r)
	}
	e := r.Entries[0]
	key := keyOf(t, s, "tight", alice)
	if want := strings.TrimSuffix(key, "}"); !strings.HasSuffix(want, e.Digest) || len(e.Digest) != 32 {
		t.Errorf("digest %q; want the last 32 characters of the key %q", e.Digest, key)
	}
	if e.Key != "" || r.Revealed {
		t.Errorf("key %q revealed %v; want none without reveal_subjects", e.Key, r.Revealed)
	}
	if e.FirstSeen.IsZero() || e.LastSeen.Before(e.FirstSeen) {
		t.Errorf("seen %v … %v", e.FirstSeen, e.LastSeen)
	}
	if r := top(t, s, "roomy"); len(r.Entries) != 0 {
		t.Errorf("roomy, which admitted every time, counts %+v", r.Entries)
	}

	// A replay is the recorded Decision of an admission: nothing to count. A rejected retry is
	// no replay (only admissions are recorded): it is refused again, and counted again.
	bob := admit.Subject{ID: "bob"}
	admitted := service.Check{Policies: []string{"tight"}, Subject: bob, Cost: 1, RequestID: "first"}
	check(t, s, admitted)
	if res, err := s.Check(context.Background(), admitted); err != nil || !res.Replayed {
		t.Fatalf("the retry of an admission: %+v, %v; want a replay", res, err)
	}
	if r := top(t, s, "tight"); len(r.Entries) != 1 {
		t.Fatalf("a replay was counted: %+v", r.Entries)
	}
	rejected := service.Check{Policies: []string{"tight"}, Subject: bob, Cost: 1, RequestID: "retry"}
	check(t, s, rejected)
	check(t, s, rejected)
	if r := top(t, s, "tight"); len(r.Entries) != 2 || r.Entries[0].Rejected != 2 || r.Entries[1].Rejected != 2 {
		t.Fatalf("alice rejected twice, bob's retry refused twice: %+v", r.Entries)
	}

	// Shadow mode rejects nothing: nothing counted.
	shadow := service.Check{Policies: []string{"watched"}, Subject: alice, Cost: 1}
	check(t, s, shadow)
	if res, err := s.Check(context.Background(), shadow); err != nil || res.Decisions[0].Allowed {
		t.Fatalf("shadow over its limit: %+v, %v; want would-have-limited", res, err)
	}
	if r := top(t, s, "watched"); len(r.Entries) != 0 {
		t.Errorf("a shadow policy counts %+v", r.Entries)
	}
}

// keyOf returns the key of subject under the policy name of s's configuration.
func keyOf(t *testing.T, s *service.Service, name string, subject admit.Subject) string {
	t.Helper()
	p, _ := s.Config().Policy(name)
	keys, err := admit.NewKeyBuilder([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	key, err := keys.Key(p.Limit, p.Version, subject)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// Admit counts its rejections as Check does; DecideItems, whose Items are no policies, does not.
func TestTopCountsAdmitNotItems(t *testing.T) {
	s := topService(t, true)
	subject := admit.Subject{ID: "carol", Slot: "tenant-1"}
	c := service.Check{Policies: []string{"tight"}, Subject: subject, Cost: 1}
	for range 3 {
		_, release, err := s.Admit(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	p, _ := s.Config().Policy("tight")
	items := []service.Item{{Limit: p.Limit, Version: p.Version, Subject: subject, Cost: 1}}
	ds := make([]admit.Decision, 1)
	if err := s.DecideItems(context.Background(), items, ds, service.Separately); err != nil || ds[0].Allowed {
		t.Fatalf("DecideItems: %+v, %v; want a rejection", ds[0], err)
	}
	r := top(t, s, "tight")
	if len(r.Entries) != 1 || r.Entries[0].Rejected != 2 {
		t.Fatalf("%+v; want carol rejected 2 times by Admit", r.Entries)
	}
	e := r.Entries[0]
	if key := keyOf(t, s, "tight", subject); !strings.HasSuffix(key, ":"+e.Digest) {
		t.Errorf("digest %q; want the subject digest the key %q ends with", e.Digest, key)
	}
	if e.Key != "carol" || !r.Revealed {
		t.Errorf("key %q revealed %v; want carol with reveal_subjects", e.Key, r.Revealed)
	}
}

func TestTopErrors(t *testing.T) {
	s := topService(t, false)
	for _, c := range []struct {
		policy string
		n      int
		want   error
	}{
		{"nope", 1, service.ErrUnknownPolicy},
		{"tight", 0, admit.ErrInvalidRequest},
		{"tight", 5, admit.ErrInvalidRequest},
		{"tight", -1, admit.ErrInvalidRequest},
	} {
		if _, err := s.Top(c.policy, c.n); !errors.Is(err, c.want) {
			t.Errorf("Top(%q, %d): %v; want %v", c.policy, c.n, err, c.want)
		}
	}
	off := newService(t, nil, "server: {top: {size: 0}}\npolicies:\n  - {name: tight, algorithm: fixed_window, limit: 1, window: 1h}\n")
	check(t, off, service.Check{Policies: []string{"tight"}, Subject: admit.Subject{ID: "a"}, Cost: 1})
	check(t, off, service.Check{Policies: []string{"tight"}, Subject: admit.Subject{ID: "a"}, Cost: 1})
	if _, err := off.Top("tight", 1); !errors.Is(err, service.ErrTopOff) {
		t.Errorf("Top under size 0: %v; want ErrTopOff", err)
	}
	n := 0
	off.TopEntries(func(string, int) { n++ })
	if n != 0 {
		t.Errorf("TopEntries under size 0 yields %d policies", n)
	}
}

// A reload keeps the counts of the policies it keeps, drops those it removes, and starts afresh
// when it changes server.top.
func TestTopAcrossSwap(t *testing.T) {
	s := topService(t, false)
	a := admit.Subject{ID: "a"}
	for range 3 {
		check(t, s, service.Check{Policies: []string{"tight"}, Subject: a, Cost: 1})
	}
	s.Swap(mustParse(t, strings.Replace(topPolicies, "%s", "false", 1)+"  - {name: extra, algorithm: fixed_window, limit: 1, window: 1h}\n"))
	if r := top(t, s, "tight"); len(r.Entries) != 1 || r.Entries[0].Rejected != 2 {
		t.Fatalf("after a reload that keeps tight: %+v; want a's 2 rejections", r.Entries)
	}
	got := map[string]int{}
	s.TopEntries(func(p string, n int) { got[p] = n })
	if len(got) != 4 || got["tight"] != 1 || got["extra"] != 0 {
		t.Errorf("TopEntries = %v; want tight 1 and the three others 0", got)
	}
	s.Swap(mustParse(t, strings.Replace(topPolicies, "%s", "true", 1)))
	if r := top(t, s, "tight"); len(r.Entries) != 0 || !r.Revealed {
		t.Fatalf("after a reload that reveals subjects: %+v; want a fresh sketch", r)
	}
	if _, err := s.Top("extra", 1); !errors.Is(err, service.ErrUnknownPolicy) {
		t.Errorf("a removed policy: %v; want ErrUnknownPolicy", err)
	}
}

// Counting a rejection adds no allocation: a limited Check allocates as often with the sketches
// as without.
func TestTopCountingAllocatesNothing(t *testing.T) {
	allocs := func(src string) float64 {
		s := newService(t, nil, src)
		c := service.Check{Policies: []string{"tight"}, Subject: admit.Subject{ID: "a"}, Cost: 1}
		check(t, s, c)
		ctx := context.Background()
		return testing.AllocsPerRun(1000, func() {
			if res, err := s.Check(ctx, c); err != nil || res.Allowed {
				t.Fatalf("%+v, %v; want limited", res, err)
			}
		})
	}
	const policies = "policies:\n  - {name: tight, algorithm: fixed_window, limit: 1, window: 1h}\n"
	on := allocs("server: {top: {size: 100, reveal_subjects: true}}\n" + policies)
	off := allocs("server: {top: {size: 0}}\n" + policies)
	if on != off {
		t.Errorf("a limited Check allocates %v times with the sketches, %v without", on, off)
	}
}
