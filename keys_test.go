package admit_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/slot"
)

func newKeyBuilder(t *testing.T) *admit.KeyBuilder {
	t.Helper()
	kb, err := admit.NewKeyBuilder([]byte("0123456789abcdef-test-secret"))
	if err != nil {
		t.Fatal(err)
	}
	return kb
}

var demo = admit.Limit{Name: "demo", Algorithm: admit.FixedWindow, Rate: 3, Period: 10 * time.Second}

func key(t *testing.T, kb *admit.KeyBuilder, lim admit.Limit, version string, s admit.Subject) string {
	t.Helper()
	k, err := kb.Key(lim, version, s)
	if err != nil {
		t.Fatalf("Key(%v, %q, %.20q): %v", lim, version, s.ID, err)
	}
	return k
}

func TestKeyFormat(t *testing.T) {
	kb := newKeyBuilder(t)
	own := regexp.MustCompile(`^rl:demo:v1-fw10000:\{[0-9a-f]{32}\}$`)
	if k := key(t, kb, demo, "1", admit.Subject{ID: "alice"}); !own.MatchString(k) {
		t.Fatalf("key of alice = %q; want rl:demo:v1-fw10000:{<32 hex>}", k)
	}
	tenant := regexp.MustCompile(`^rl:demo:v2-fw10000:\{[0-9a-f]{32}\}:[0-9a-f]{32}$`)
	if k := key(t, kb, demo, "2", admit.Subject{ID: "alice", Slot: "acme"}); !tenant.MatchString(k) {
		t.Fatalf("key of alice in acme = %q; want rl:demo:v2-fw10000:{<32 hex>}:<32 hex>", k)
	}
	// A slot subject equal to the subject is no slot subject at all.
	if a, b := key(t, kb, demo, "1", admit.Subject{ID: "alice", Slot: "alice"}), key(t, kb, demo, "1", admit.Subject{ID: "alice"}); a != b {
		t.Fatalf("Slot = ID gives %q, no Slot %q; want the same", a, b)
	}
}

// The key format is stored state: these keys, given in docs/keys.md, must never change.
func TestKeyFormatIsStable(t *testing.T) {
	kb := newKeyBuilder(t)
	for _, tc := range []struct {
		lim  admit.Limit
		s    admit.Subject
		want string
	}{
		{demo, admit.Subject{ID: "demo-account"}, "rl:demo:v1-fw10000:{8f30d4fd92e8cddd6479f96bd3a200d5}"},
		{admit.Limit{Name: "per-second", Algorithm: admit.FixedWindow, Rate: 10, Period: time.Second}, admit.Subject{ID: "alice", Slot: "acme"},
			"rl:per-second:v1-fw1000:{4ec7806b9a0066d13055cdfb3dc8b6b4}:d792e2dd2849c327cfb3ef0cff488a2d"},
		{admit.Limit{Name: "per-tenant", Algorithm: admit.FixedWindow, Rate: 100000, Period: time.Minute}, admit.Subject{ID: "acme"},
			"rl:per-tenant:v1-fw60000:{4ec7806b9a0066d13055cdfb3dc8b6b4}"},
		{admit.Limit{Name: "per-minute", Algorithm: admit.SlidingWindow, Rate: 100, Period: time.Minute}, admit.Subject{ID: "alice"},
			"rl:per-minute:v1-sw60000:{d9e6d899cf23189c77c5e86126feed62}"},
		{admit.Limit{Name: "login", Algorithm: admit.SlidingLog, Rate: 5, Period: 15 * time.Minute}, admit.Subject{ID: "alice"},
			"rl:login:v1-sl900000:{d9e6d899cf23189c77c5e86126feed62}"},
		{admit.Limit{Name: "per-minute", Algorithm: admit.FixedWindow, Rate: 60, Period: time.Minute, Aligned: true}, admit.Subject{ID: "alice"},
			"rl:per-minute:v1-fwa60000:{d9e6d899cf23189c77c5e86126feed62}"},
	} {
		if got := key(t, kb, tc.lim, "1", tc.s); got != tc.want {
			t.Errorf("key of %q under %s = %q; want %q", tc.s.ID, tc.lim.Name, got, tc.want)
		}
	}
	doc, err := os.ReadFile("docs/keys.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "rl:demo:v1-fw10000:{8f30d4fd92e8cddd6479f96bd3a200d5}") {
		t.Error("docs/keys.md does not show the demo's key as the builder makes it")
	}
}

// Keys are bounded, free of the subject's bytes, and distinct for distinct subjects, whatever the
// subject: 1 MiB, invalid UTF-8, CR/LF, braces.
func TestKeysOfHostileSubjects(t *testing.T) {
	kb := newKeyBuilder(t)
	subjects := []string{
		strings.Repeat("x", bound.MaxSubjectLen),
		strings.Repeat("x", bound.MaxSubjectLen-1) + "y",
		"\xff\xfe\x00", "a\r\nSET x 1\r\n", "{alice}", "}{", "{", "}", "alice", "alice ", "ALICE",
	}
	seen := map[string]string{}
	for _, s := range subjects {
		for _, slot := range []string{"", "{tenant}"} {
			k := key(t, kb, demo, "1", admit.Subject{ID: s, Slot: slot})
			if len(k) > 200 {
				t.Errorf("key of %.20q is %d bytes; want a bounded key", s, len(k))
			}
			if strings.ContainsAny(k, "\r\n\x00\xff ") || strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 {
				t.Errorf("key of %.20q = %q holds the subject's bytes", s, k)
			}
			if prev, ok := seen[k]; ok {
				t.Errorf("subjects %.20q and %.20q share key %q", prev, s+"/"+slot, k)
			}
			seen[k] = s + "/" + slot
		}
	}
}

// A digest is HMAC-SHA256 under the secret of each field's length (a uvarint) and bytes, whatever
// the subject's length: the digest is computed here independently of the KeyBuilder, for subjects
// shorter and longer than the chunks in which the KeyBuilder feeds the hash.
func TestKeyDigestsAreHMACsOfLengthPrefixedFields(t *testing.T) {
	secret := []byte("0123456789abcdef-test-secret")
	kb := newKeyBuilder(t)
	digest := func(label, value string) string {
		mac := hmac.New(sha256.New, secret)
		for _, f := range []string{label, value} {
			mac.Write(binary.AppendUvarint(nil, uint64(len(f))))
			mac.Write([]byte(f))
		}
		return hex.EncodeToString(mac.Sum(nil))[:bound.DigestLen]
	}
	for _, n := range []int{1, 127, 128, 255, 256, 257, 511, 512, 513, 100_000, bound.MaxSubjectLen} {
		id := strings.Repeat("s", n-1) + "!"
		slot := strings.Repeat("t", n)
		if got, want := key(t, kb, demo, "1", admit.Subject{ID: id}), "rl:demo:v1-fw10000:{"+digest("slot", id)+"}"; got != want {
			t.Errorf("key of a %d-byte subject = %q; want %q", n, got, want)
		}
		want := "rl:demo:v1-fw10000:{" + digest("slot", slot) + "}:" + digest("subject", id)
		if got := key(t, kb, demo, "1", admit.Subject{ID: id, Slot: slot}); got != want {
			t.Errorf("key of a %d-byte subject and slot subject = %q; want %q", n, got, want)
		}
	}
}

func TestKeysSeparatePoliciesAndShapes(t *testing.T) {
	kb := newKeyBuilder(t)
	alice := admit.Subject{ID: "alice"}
	base := key(t, kb, demo, "1", alice)
	other := demo
	other.Name = "other"
	longer := demo
	longer.Period = time.Minute
	higher := demo
	higher.Rate = 100
	if key(t, kb, other, "1", alice) == base {
		t.Error("two policies share a key")
	}
	if key(t, kb, longer, "1", alice) == base {
		t.Error("a new window keeps the key: its state would be read with the wrong shape")
	}
	aligned := demo
	aligned.Aligned = true
	if key(t, kb, aligned, "1", alice) == base {
		t.Error("aligning the windows keeps the key: a first-admission counter can expire after its aligned window, which is corrupt")
	}
	alignedHigher := aligned
	alignedHigher.Rate = 100
	if key(t, kb, alignedHigher, "1", alice) != key(t, kb, aligned, "1", alice) {
		t.Error("a new rate changes an aligned window's key: counters would be lost for nothing")
	}
	if key(t, kb, demo, "2", alice) == base {
		t.Error("a new version keeps the key")
	}
	if key(t, kb, higher, "1", alice) != base {
		t.Error("a new rate changes the key: counters would be lost for nothing")
	}
	// Each algorithm keeps its own shape of state: a change of algorithm changes the key; a change of
	// the rate alone keeps it, for every algorithm.
	seen := map[string]admit.Algorithm{base: admit.FixedWindow}
	for _, alg := range []admit.Algorithm{admit.SlidingWindow, admit.SlidingLog} {
		lim := demo
		lim.Algorithm = alg
		k := key(t, kb, lim, "1", alice)
		if prev, ok := seen[k]; ok {
			t.Errorf("%v and %v share the key %q", prev, alg, k)
		}
		seen[k] = alg
		lim.Rate = 7
		if key(t, kb, lim, "1", alice) != k {
			t.Errorf("%v: a new rate changes the key", alg)
		}
		lim.Period = time.Minute
		if key(t, kb, lim, "1", alice) == k {
			t.Errorf("%v: a new window keeps the key", alg)
		}
	}
	other2, err := admit.NewKeyBuilder([]byte("another secret, 16+ bytes long"))
	if err != nil {
		t.Fatal(err)
	}
	if key(t, other2, demo, "1", alice) == base {
		t.Error("two secrets make the same key")
	}
}

// The keys of every subject with one slot subject share a hash slot; "per user" and "per tenant"
// policies can be decided together.
func TestKeysShareTheSlotSubjectsSlot(t *testing.T) {
	kb := newKeyBuilder(t)
	perTenant := admit.Limit{Name: "per-tenant", Algorithm: admit.FixedWindow, Rate: 100000, Period: time.Minute}
	a := key(t, kb, demo, "1", admit.Subject{ID: "alice", Slot: "acme"})
	b := key(t, kb, demo, "1", admit.Subject{ID: "bob", Slot: "acme"})
	tenant := key(t, kb, perTenant, "1", admit.Subject{ID: "acme"})
	if a == b || slot.Of(a) != slot.Of(b) || slot.Of(a) != slot.Of(tenant) {
		t.Fatalf("alice %q, bob %q and acme %q: want distinct keys in one slot", a, b, tenant)
	}
	if err := admit.ValidateAll([]admit.Request{{Key: a, Limit: demo, Cost: 1}, {Key: tenant, Limit: perTenant, Cost: 1}}, make([]admit.Decision, 2)); err != nil {
		t.Fatalf("per user and per tenant together: %v", err)
	}
}

func TestKeyBuilderRefuses(t *testing.T) {
	if _, err := admit.NewKeyBuilder([]byte("short")); err == nil {
		t.Error("NewKeyBuilder accepted a 5-byte secret")
	}
	kb := newKeyBuilder(t)
	unnamed := demo
	unnamed.Name = ""
	badName := demo
	badName.Name = "Demo!"
	for _, tc := range []struct {
		lim     admit.Limit
		version string
		s       admit.Subject
		want    error
	}{
		{unnamed, "1", admit.Subject{ID: "a"}, admit.ErrInvalidLimit},
		{badName, "1", admit.Subject{ID: "a"}, admit.ErrInvalidLimit},
		{demo, "", admit.Subject{ID: "a"}, admit.ErrInvalidLimit},
		{demo, "v.2", admit.Subject{ID: "a"}, admit.ErrInvalidLimit},
		{demo, strings.Repeat("1", bound.MaxNameLen+1), admit.Subject{ID: "a"}, admit.ErrInvalidLimit},
		{demo, "1", admit.Subject{}, admit.ErrInvalidRequest},
		{demo, "1", admit.Subject{ID: strings.Repeat("x", bound.MaxSubjectLen+1)}, admit.ErrInvalidRequest},
		{demo, "1", admit.Subject{ID: "a", Slot: strings.Repeat("x", bound.MaxSubjectLen+1)}, admit.ErrInvalidRequest},
	} {
		if k, err := kb.Key(tc.lim, tc.version, tc.s); !errors.Is(err, tc.want) {
			t.Errorf("Key(%q, %q, %.10q) = %q, %v; want %v", tc.lim.Name, tc.version, tc.s.ID, k, err, tc.want)
		}
	}
}
