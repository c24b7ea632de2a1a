package rls_test

import (
	"strings"
	"testing"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/policy/envoyconf"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/rls"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// overrideServer returns a Server of testConfig on store, the service.Rules of its Service, and
// the Service.
func overrideServer(t *testing.T, store admit.Store) (*rls.Server, *service.Service) {
	t.Helper()
	keys, err := admit.NewKeyBuilder([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(store, keys, &policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := rls.New(rls.Options{Service: svc, Config: testConfig(t)})
	if err != nil {
		t.Fatal(err)
	}
	svc.SetRules(s)
	return s, svc
}

// askServer asks s, in process, of one descriptor d in domain.
func askServer(t *testing.T, s *rls.Server, domain string, d *ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := s.ShouldRateLimit(t.Context(), &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{d}})
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

// TestOverrideOfADescriptor checks that an override addressed as the admin API addresses it — the
// rule's name (envoyconf.DefaultName for a rule without one) and the descriptor's DescriptorKey —
// changes the next decision of a spent descriptor, in a domain decided separately and in an atomic
// one (whose keys share the first entry's slot), and that deleting it restores the rule's.
func TestOverrideOfADescriptor(t *testing.T) {
	for _, c := range []struct {
		domain  string
		entries []string
		rule    uint32 // the rule's requests per unit
	}{
		{"messaging", []string{"message_type", "marketing", "to_number", "2061111111"}, 5},
		{"atomic", []string{"client", "a"}, 10},
	} {
		t.Run(c.domain, func(t *testing.T) {
			s, svc := overrideServer(t, memStore(t))
			d := desc(c.entries...)
			for range c.rule {
				wantCodes(t, "within the rule", askServer(t, s, c.domain, d), "OK", "OK")
			}
			wantCodes(t, "over the rule", askServer(t, s, c.domain, d), "OVER_LIMIT", "OVER_LIMIT")
			var entries []envoyconf.Entry
			for i := 0; i+1 < len(c.entries); i += 2 {
				entries = append(entries, envoyconf.Entry{Key: c.entries[i], Value: c.entries[i+1]})
			}
			key := rls.DescriptorKey(c.domain, entries...)
			info, err := svc.SetOverride(t.Context(), service.OverrideSpec{Policy: envoyconf.DefaultName, Subject: admit.Subject{ID: key}, Limit: int64(c.rule) + 3})
			if err != nil {
				t.Fatal(err)
			}
			// The audit records' digest is the listing's.
			if d, err := svc.OverrideDigest(envoyconf.DefaultName, admit.Subject{ID: key}); err != nil || d != info.Digest {
				t.Errorf("OverrideDigest = %q, %v; want the stored override's %q", d, err, info.Digest)
			}
			r := askServer(t, s, c.domain, d)
			wantCodes(t, "under the override", r, "OK", "OK")
			if st := r.Statuses[0]; st.CurrentLimit.GetRequestsPerUnit() != c.rule+3 || st.LimitRemaining != 2 {
				t.Errorf("under the override: %v; want %d per unit, 2 remaining (the rejected hit was not counted)", st, c.rule+3)
			}
			if existed, err := svc.DeleteOverride(t.Context(), envoyconf.DefaultName, admit.Subject{ID: key}); err != nil || !existed {
				t.Fatalf("DeleteOverride = %v, %v", existed, err)
			}
			wantCodes(t, "after the delete", askServer(t, s, c.domain, d), "OVER_LIMIT", "OVER_LIMIT")
		})
	}
}

// TestOverrideRefusedByTheRules checks that an override of a rule name is checked against every
// rule of that name: a sliding or gcra number a fixed window has not is refused, and a name no
// rule has is an unknown policy.
func TestOverrideRefusedByTheRules(t *testing.T) {
	_, svc := overrideServer(t, memStore(t))
	sub := admit.Subject{ID: rls.DescriptorKey("messaging", envoyconf.Entry{Key: "to_number", Value: "1"})}
	if _, err := svc.SetOverride(t.Context(), service.OverrideSpec{Policy: envoyconf.DefaultName, Subject: sub, Limit: 5, Burst: 2}); err == nil {
		t.Error("a burst on fixed-window rules was stored")
	}
	if _, err := svc.SetOverride(t.Context(), service.OverrideSpec{Policy: "no-such-rule", Subject: sub, Limit: 5}); err == nil {
		t.Error("an override of a name no rule has was stored")
	}
}

// TestDescriptorKey checks the spelling of a DescriptorKey, and that RuleSubject gives a key of
// an atomic domain the slot of its first entry, and any other key none.
func TestDescriptorKey(t *testing.T) {
	s, svc := overrideServer(t, memStore(t))
	key := rls.DescriptorKey("mongo_cps", envoyconf.Entry{Key: "database", Value: "users"})
	if key != "9:mongo_cps|8:database=5:users" {
		t.Errorf("DescriptorKey = %q", key)
	}
	atomicKey := rls.DescriptorKey("atomic", envoyconf.Entry{Key: "client", Value: "a|b=1:c"}, envoyconf.Entry{Key: "path", Value: "/x"})
	want := rls.DescriptorKey("atomic", envoyconf.Entry{Key: "client", Value: "a|b=1:c"})
	if sub := s.RuleSubject("envoy", atomicKey); sub.ID != atomicKey || sub.Slot != want {
		t.Errorf("RuleSubject of an atomic domain's key = %+v; want the slot %q", sub, want)
	}
	if d, err := svc.OverrideDigest("envoy", admit.Subject{ID: atomicKey}); err != nil || strings.Count(d, ":") != 1 {
		t.Errorf("OverrideDigest of a two-entry descriptor of an atomic domain = %q, %v; want the slot's and its own", d, err)
	}
	for _, k := range []string{key, "customer-1", "6:atomic|", "6:atomic|6:client", "+6:atomic", "7:atomic", ""} {
		if sub := s.RuleSubject("envoy", k); sub != (admit.Subject{ID: k}) {
			t.Errorf("RuleSubject(%q) = %+v; want the key alone", k, sub)
		}
	}
}
