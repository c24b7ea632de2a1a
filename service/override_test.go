package service_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/service"
)

// overridePolicies has a policy with a tier, a gcra policy and a sliding log.
const overridePolicies = `
policies:
  - name: api
    algorithm: fixed_window
    limit: 2
    window: 1m
    tiers:
      pro:
        limit: 4
  - name: bursty
    algorithm: gcra
    limit: 10
    window: 1m
    burst: 2
  - name: log
    algorithm: sliding_log
    limit: 5
    window: 1m
`

// setsCounted counts the SetOverride calls that reach the Store.
type setsCounted struct {
	admit.Store
	sets atomic.Int64
}

func (s *setsCounted) SetOverride(ctx context.Context, o admit.Override) error {
	s.sets.Add(1)
	return s.Store.SetOverride(ctx, o)
}

// newStore returns a fresh memstore, closed with the test.
func newStore(t *testing.T) admit.Store {
	mem := memstore.New(memstore.Options{})
	t.Cleanup(func() { mem.Close() })
	return mem
}

// checkOne decides one unit of subject under the policy, in tier, and returns the Decision.
func checkOne(t *testing.T, s *service.Service, policyName, subject, tier string) admit.Decision {
	t.Helper()
	res, err := s.Check(t.Context(), service.Check{Policies: []string{policyName}, Subject: admit.Subject{ID: subject}, Tier: tier, Cost: 1})
	if err != nil {
		t.Fatalf("check of %s under %s: %v", subject, policyName, err)
	}
	return res.Decisions[0]
}

// TestOverrideDecides checks that an override replaces a spent subject's numbers at once, whatever
// its tier (the override replaces the tier's too), through Check, DecideItems and State alike, and
// that deleting it restores the policy's; another subject is untouched.
func TestOverrideDecides(t *testing.T) {
	s := newService(t, nil, overridePolicies)
	for range 2 {
		checkOne(t, s, "api", "alice", "")
	}
	if d := checkOne(t, s, "api", "alice", ""); d.Allowed {
		t.Fatalf("alice's third request of 2/min: %+v; want refused", d)
	}
	info, err := s.SetOverride(t.Context(), service.OverrideSpec{Policy: "api", Subject: admit.Subject{ID: "alice"}, Limit: 5, Reason: "ticket 7"})
	digest, _ := s.SubjectDigest(admit.Subject{ID: "alice"})
	if err != nil || info.Policy != "api" || info.Digest != digest || info.Override.Rate != 5 || !info.Override.Expires.IsZero() || info.Override.Reason != "ticket 7" {
		t.Fatalf("SetOverride = %+v, %v; want api, alice's digest %s, 5, no expiry", info, err, digest)
	}
	d := checkOne(t, s, "api", "alice", "")
	if !d.Allowed || !d.Overridden || d.Limit.Rate != 5 || d.Remaining != 2 {
		t.Errorf("alice under the override of 5: %+v; want allowed, overridden, 5, 2 remaining", d)
	}
	if d := checkOne(t, s, "api", "alice", "pro"); !d.Allowed || !d.Overridden || d.Limit.Rate != 5 {
		t.Errorf("alice in tier pro (4) under the override of 5: %+v; want the override's 5", d)
	}
	if d := checkOne(t, s, "api", "bob", ""); d.Overridden || d.Limit.Rate != 2 {
		t.Errorf("bob: %+v; want the policy's 2, not overridden", d)
	}
	ds := make([]admit.Decision, 1)
	items := []service.Item{{Limit: s.Config().Policies[0].Limit, Version: s.Config().Policies[0].Version, Subject: admit.Subject{ID: "alice"}}}
	for _, g := range []service.Grouping{service.Separately, service.BySlot} {
		if err := s.DecideItems(t.Context(), items, ds, g); err != nil || !ds[0].Overridden || ds[0].Limit.Rate != 5 {
			t.Errorf("DecideItems, grouping %d: %+v, %v; want overridden to 5", g, ds[0], err)
		}
	}
	states, err := s.State(t.Context(), service.StateQuery{Subject: admit.Subject{ID: "alice"}, Policy: "api"})
	if err != nil || states[0].Source != service.SourceOverride || states[0].Override == nil || states[0].Override.Reason != "ticket 7" || states[0].Decision.Limit.Rate != 5 {
		t.Errorf("State = %+v, %v; want source override, its reason, 5", states, err)
	}
	existed, err := s.DeleteOverride(t.Context(), "api", admit.Subject{ID: "alice"})
	if err != nil || !existed {
		t.Fatalf("DeleteOverride = %v, %v; want true", existed, err)
	}
	if d := checkOne(t, s, "api", "alice", ""); d.Allowed || d.Overridden || d.Limit.Rate != 2 {
		t.Errorf("alice after the delete: %+v; want the policy's 2 again, spent", d)
	}
	if existed, err := s.DeleteOverride(t.Context(), "api", admit.Subject{ID: "alice"}); err != nil || existed {
		t.Errorf("a second DeleteOverride = %v, %v; want false", existed, err)
	}
	states, err = s.State(t.Context(), service.StateQuery{Subject: admit.Subject{ID: "alice"}, Policy: "api"})
	if err != nil || states[0].Source != service.SourcePolicy || states[0].Override != nil {
		t.Errorf("State after the delete = %+v, %v; want source policy", states, err)
	}
}

// TestOverrideBurst checks that a gcra policy's burst is replaced by an override's.
func TestOverrideBurst(t *testing.T) {
	s := newService(t, nil, overridePolicies)
	if _, err := s.SetOverride(t.Context(), service.OverrideSpec{Policy: "bursty", Subject: admit.Subject{ID: "carol"}, Limit: 10, Burst: 6}); err != nil {
		t.Fatal(err)
	}
	allowed := 0
	for range 8 {
		if d := checkOne(t, s, "bursty", "carol", ""); d.Allowed {
			allowed++
		}
	}
	if allowed < 6 || allowed > 7 { // 6 at once, and one more if the clock moved on by an emission interval (6 s)
		t.Errorf("carol under a burst of 6: %d of 8 admitted; want 6", allowed)
	}
}

// TestOverrideRefused checks that bad overrides are refused before any I/O, each error naming
// what is wrong, and nothing stored.
func TestOverrideRefused(t *testing.T) {
	counted := &setsCounted{Store: newStore(t)}
	s := newService(t, counted, overridePolicies)
	alice := admit.Subject{ID: "alice"}
	for _, c := range []struct {
		spec service.OverrideSpec
		want string
	}{
		{service.OverrideSpec{Policy: "nope", Subject: alice, Limit: 5}, `unknown policy "nope"`},
		{service.OverrideSpec{Policy: "api", Subject: alice, Limit: 0}, `override limit of policy "api": rate 0 outside`},
		{service.OverrideSpec{Policy: "api", Subject: alice, Limit: bound.MaxRate + 1}, "override limit of policy"},
		{service.OverrideSpec{Policy: "log", Subject: alice, Limit: bound.MaxSlidingLogRate + 1}, "a sliding_log keeps every admission"},
		{service.OverrideSpec{Policy: "api", Subject: alice, Limit: 5, Burst: 3}, `override burst 3: policy "api" is fixed_window, which has no burst`},
		{service.OverrideSpec{Policy: "bursty", Subject: alice, Limit: 10, Burst: -1}, "override limit and burst"},
		{service.OverrideSpec{Policy: "api", Subject: alice, Limit: 5, ExpiresIn: -time.Second}, "override expires_in -1s outside"},
		{service.OverrideSpec{Policy: "api", Subject: alice, Limit: 5, ExpiresIn: service.MaxOverrideExpiry + time.Millisecond}, "override expires_in"},
		{service.OverrideSpec{Policy: "api", Subject: alice, Limit: 5, ExpiresIn: time.Microsecond}, "not a whole number of milliseconds"},
		{service.OverrideSpec{Policy: "api", Subject: alice, Limit: 5, Reason: strings.Repeat("r", 201)}, "override reason of 201 bytes exceeds 200"},
		{service.OverrideSpec{Policy: "api", Subject: admit.Subject{}, Limit: 5}, "empty subject"},
		{service.OverrideSpec{Policy: "api", Subject: admit.Subject{ID: strings.Repeat("k", bound.MaxSubjectLen+1)}, Limit: 5}, "subject of more than"},
	} {
		_, err := s.SetOverride(t.Context(), c.spec)
		if !errors.Is(err, admit.ErrInvalidRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SetOverride(%.80v) = %v; want an invalid request saying %q", c.spec, err, c.want)
		}
	}
	if n := counted.sets.Load(); n != 0 {
		t.Errorf("%d SetOverride calls reached the Store; want none", n)
	}
	if d := checkOne(t, s, "api", "alice", ""); d.Overridden || d.Limit.Rate != 2 {
		t.Errorf("alice after the refusals: %+v; want the policy's numbers", d)
	}
}

// TestOverrideExpires checks that an override with an expiry decides until then and not after,
// measured against the clock rather than assumed from a sleep.
func TestOverrideExpires(t *testing.T) {
	s := newService(t, nil, overridePolicies)
	for range 2 {
		checkOne(t, s, "api", "dave", "")
	}
	const ttl = 300 * time.Millisecond
	info, err := s.SetOverride(t.Context(), service.OverrideSpec{Policy: "api", Subject: admit.Subject{ID: "dave"}, Limit: 50, ExpiresIn: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if left := info.ExpiresIn(time.Now()); left <= 0 || left > ttl {
		t.Errorf("ExpiresIn right after = %v; want within (0, %v]", left, ttl)
	}
	if d := checkOne(t, s, "api", "dave", ""); time.Now().Before(info.Override.Expires) && (!d.Allowed || !d.Overridden) {
		t.Errorf("dave before the expiry: %+v; want allowed under the override", d)
	}
	for time.Now().Before(info.Override.Expires.Add(10 * time.Millisecond)) {
		time.Sleep(time.Until(info.Override.Expires) + 10*time.Millisecond)
	}
	if d := checkOne(t, s, "api", "dave", ""); d.Allowed || d.Overridden {
		t.Errorf("dave after the expiry: %+v; want the policy's 2 again, spent", d)
	}
	page, _, err := s.Overrides(t.Context(), "api", "", 10)
	if err != nil || len(page) != 0 {
		t.Errorf("Overrides after the expiry = %+v, %v; want none", page, err)
	}
}

// TestOverridesListing checks the pages of a listing, by digest, the counts, and a reload that
// removes the policy: its overrides stay, listed Unused, and can be deleted.
func TestOverridesListing(t *testing.T) {
	s := newService(t, nil, overridePolicies)
	want := map[string]bool{}
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		info, err := s.SetOverride(t.Context(), service.OverrideSpec{Policy: "api", Subject: admit.Subject{ID: id}, Limit: 9, Reason: "r-" + id})
		if err != nil {
			t.Fatal(err)
		}
		want[info.Digest] = true
	}
	got := map[string]bool{}
	cursor, pages := "", 0
	for {
		page, next, err := s.Overrides(t.Context(), "api", cursor, 2)
		if err != nil || len(page) > 2 {
			t.Fatalf("page %d: %d overrides, %v; want at most 2", pages, len(page), err)
		}
		for _, o := range page {
			if got[o.Digest] || o.Unused || o.Override.Rate != 9 || !strings.HasPrefix(o.Override.Reason, "r-") {
				t.Errorf("page %d: %+v; want a new digest, used, 9", pages, o)
			}
			got[o.Digest] = true
		}
		pages++
		if cursor = next; cursor == "" || pages > 5 {
			break
		}
	}
	if len(got) != len(want) || pages != 3 {
		t.Errorf("listed %d digests in %d pages; want the 5 set, in 3 pages", len(got), pages)
	}
	for d := range want {
		if !got[d] {
			t.Errorf("digest %s set, not listed", d)
		}
	}
	counts, err := s.OverrideCounts(t.Context())
	if err != nil || len(counts) != 3 || counts[0] != (service.PolicyCount{Policy: "api", Count: 5}) || counts[1].Count != 0 {
		t.Errorf("OverrideCounts = %+v, %v; want api 5, the others 0", counts, err)
	}
	s.Swap(mustParse(t, overridePolicies[:strings.Index(overridePolicies, "  - name: bursty")]+"  - name: other\n    algorithm: fixed_window\n    limit: 1\n    window: 1s\n"))
	page, _, err := s.Overrides(t.Context(), "api", "", 10)
	if err != nil || len(page) != 5 || page[0].Unused {
		t.Errorf("after a reload that keeps api: %d overrides, %v; want the 5, used", len(page), err)
	}
	s.Swap(mustParse(t, "policies:\n  - name: other\n    algorithm: fixed_window\n    limit: 1\n    window: 1s\n"))
	page, _, err = s.Overrides(t.Context(), "api", "", 10)
	if err != nil || len(page) != 5 || !page[0].Unused {
		t.Errorf("after a reload without api: %d overrides, %v; want the 5, unused", len(page), err)
	}
	if _, err := s.SetOverride(t.Context(), service.OverrideSpec{Policy: "api", Subject: admit.Subject{ID: "a"}, Limit: 9}); !errors.Is(err, service.ErrUnknownPolicy) {
		t.Errorf("SetOverride of the removed policy = %v; want ErrUnknownPolicy", err)
	}
	if existed, err := s.DeleteOverride(t.Context(), "api", admit.Subject{ID: "a"}); err != nil || !existed {
		t.Errorf("DeleteOverride of an unused override = %v, %v; want true", existed, err)
	}
	for _, c := range []struct {
		policy, cursor string
		n              int
	}{{"", "", 10}, {"api", "", 0}, {"api", "", 1001}, {"api", "rl:other:o:{x}", 10}} {
		if _, _, err := s.Overrides(t.Context(), c.policy, c.cursor, c.n); !errors.Is(err, admit.ErrInvalidRequest) {
			t.Errorf("Overrides(%q, %q, %d) = %v; want an invalid request", c.policy, c.cursor, c.n, err)
		}
	}
}
