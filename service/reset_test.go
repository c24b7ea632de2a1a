package service_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/service"
)

const resetPolicies = `
policies:
  - name: api
    algorithm: fixed_window
    limit: 2
    window: 1m
    tiers:
      pro: {limit: 5}
      hourly: {limit: 5, window: 1h}
  - name: daily
    algorithm: gcra
    limit: 2
    window: 24h
`

// resets records the keys of every Reset that reaches the Store.
type resets struct {
	admit.Store
	calls [][]string
}

func (r *resets) Reset(ctx context.Context, keys []string) error {
	r.calls = append(r.calls, append([]string(nil), keys...))
	return r.Store.Reset(ctx, keys)
}

// Reset under one policy deletes the subject's keys of that policy, its own Limit's and each tier's
// (a tier of the policy's shape shares its key: reset once), and nothing of other policies or
// subjects; "" resets every policy.
func TestReset(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	t.Cleanup(func() { mem.Close() })
	store := &resets{Store: mem}
	s := newService(t, store, resetPolicies)
	ctx := t.Context()
	alice, bob := admit.Subject{ID: "alice"}, admit.Subject{ID: "bob"}
	check := func(name string, who admit.Subject) bool {
		t.Helper()
		res, err := s.Check(ctx, service.Check{Policies: []string{name}, Subject: who, Cost: 1})
		if err != nil {
			t.Fatalf("Check %s for %s: %v", name, who.ID, err)
		}
		return res.Allowed
	}
	for _, who := range []admit.Subject{alice, bob} {
		for _, name := range []string{"api", "daily"} {
			for check(name, who) {
			}
		}
	}
	api, _ := s.Config().Policy("api")
	pro := api.Tiers["hourly"]
	keys, err := admit.NewKeyBuilder([]byte("service test secret of 32 bytes"))
	if err != nil {
		t.Fatal(err)
	}
	hourlyKey, err := keys.Key(pro, api.Version, alice)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := mem.Take(ctx, admit.Request{Key: hourlyKey, Limit: pro, Cost: pro.Rate}); err != nil || !d.Allowed {
		t.Fatalf("filling alice's hourly tier: %+v, %v", d, err)
	}

	if n, err := s.Reset(ctx, alice, "api"); err != nil || n != 2 {
		t.Fatalf("Reset(alice, api) = %d, %v; want 2 keys", n, err)
	}
	if len(store.calls) != 1 || len(store.calls[0]) != 2 {
		t.Errorf("Reset(alice, api) reset %q; want one call of 2 keys: the policy's and the hourly tier's (pro, of the policy's shape, shares its key)", store.calls)
	}
	if !check("api", alice) {
		t.Error("alice under api after her reset: rejected")
	}
	if d, err := mem.Take(ctx, admit.Request{Key: hourlyKey, Limit: pro}); err != nil || d.Remaining != pro.Rate {
		t.Errorf("alice's hourly tier after the reset: %+v, %v; want the whole allowance", d, err)
	}
	if check("daily", alice) || check("api", bob) {
		t.Error("a reset of alice under api admitted alice under daily, or bob under api")
	}
	if n, err := s.Reset(ctx, alice, ""); err != nil || n != 3 {
		t.Fatalf("Reset(alice, every policy) = %d, %v; want 3 keys", n, err)
	}
	if !check("daily", alice) || check("daily", bob) {
		t.Error("after a reset of alice under every policy: alice under daily rejected, or bob admitted")
	}
}

// A caller's mistake is reported before any I/O: an unknown policy, an empty subject.
func TestResetInvalid(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	t.Cleanup(func() { mem.Close() })
	store := &resets{Store: mem}
	s := newService(t, store, resetPolicies)
	if _, err := s.Reset(t.Context(), admit.Subject{ID: "alice"}, "nope"); !errors.Is(err, service.ErrUnknownPolicy) {
		t.Errorf("Reset under an unknown policy: %v; want ErrUnknownPolicy", err)
	}
	if _, err := s.Reset(t.Context(), admit.Subject{}, ""); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Errorf("Reset of an empty subject: %v; want ErrInvalidRequest", err)
	}
	if len(store.calls) != 0 {
		t.Errorf("invalid resets reached the Store: %q", store.calls)
	}
}

// More keys than one Store.Reset takes are reset in calls of at most bound.MaxResetKeys.
func TestResetInChunks(t *testing.T) {
	var src strings.Builder
	src.WriteString("policies:\n")
	for p := range 17 {
		fmt.Fprintf(&src, "  - name: p%d\n    algorithm: fixed_window\n    limit: 1000\n    window: 1m\n    tiers:\n", p)
		for tier := range 64 {
			fmt.Fprintf(&src, "      t%d: {window: %ds}\n", tier, 61+tier) // a shape of its own: a key of its own
		}
	}
	mem := memstore.New(memstore.Options{})
	t.Cleanup(func() { mem.Close() })
	store := &resets{Store: mem}
	s := newService(t, store, src.String())
	if n, err := s.Reset(t.Context(), admit.Subject{ID: "alice"}, ""); err != nil || n != 17*65 {
		t.Fatalf("Reset of 17 x 65 keys = %d, %v", n, err)
	}
	seen, total := map[string]bool{}, 0
	for _, c := range store.calls {
		if len(c) > bound.MaxResetKeys {
			t.Errorf("a Store.Reset of %d keys; want at most %d", len(c), bound.MaxResetKeys)
		}
		for _, k := range c {
			seen[k] = true
			total++
		}
	}
	if len(store.calls) != 2 || total != 17*65 || len(seen) != total {
		t.Errorf("%d calls of %d keys (%d distinct); want 2 calls of %d distinct keys in all", len(store.calls), total, len(seen), 17*65)
	}
}

// A subject's digest is the hash tag of each of its keys: 32 hex characters of the Service's
// KeyBuilder, one per subject, telling nothing of it; an empty subject is refused.
func TestSubjectDigest(t *testing.T) {
	s := newService(t, nil, resetPolicies)
	keys, err := admit.NewKeyBuilder([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	api, _ := s.Config().Policy("api")
	seen := map[string]string{}
	for _, id := range []string{"alice", "bob", "x{y}z", strings.Repeat("long", 1000)} {
		d, err := s.SubjectDigest(admit.Subject{ID: id})
		if err != nil {
			t.Fatalf("SubjectDigest(%.20q): %v", id, err)
		}
		k, err := keys.Key(api.Limit, api.Version, admit.Subject{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if len(d) != bound.DigestLen || strings.Trim(d, "0123456789abcdef") != "" || !strings.HasSuffix(k, ":{"+d+"}") || strings.Contains(d, id) {
			t.Errorf("SubjectDigest(%.20q) = %q; want the %d hex characters between the braces of its key %q", id, d, bound.DigestLen, k)
		}
		if other, dup := seen[d]; dup {
			t.Errorf("%.20q and %.20q have one digest %q", id, other, d)
		}
		seen[d] = id
	}
	if d, err := s.SubjectDigest(admit.Subject{}); !errors.Is(err, admit.ErrInvalidRequest) || d != "" {
		t.Errorf("SubjectDigest of an empty subject = %q, %v; want ErrInvalidRequest", d, err)
	}
}
