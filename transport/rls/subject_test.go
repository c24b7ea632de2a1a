package rls

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/policy/envoyconf"
)

// TestSubjectSpelling holds subject to the spelling keys were made with (a subject is part of every
// Redis key, so a changed byte would start every counter again): each string's length, a colon and
// the string, entries after '|' and values after '='; and parseDescriptorKey reads it back.
func TestSubjectSpelling(t *testing.T) {
	want := func(domain string, entries []envoyconf.Entry) string {
		s := fmt.Sprintf("%d:%s", len(domain), domain)
		for _, e := range entries {
			s += fmt.Sprintf("|%d:%s=%d:%s", len(e.Key), e.Key, len(e.Value), e.Value)
		}
		return s
	}
	if got := subject("rl", []envoyconf.Entry{{Key: "remote_address", Value: "10.0.0.1"}}); got != "2:rl|14:remote_address=8:10.0.0.1" {
		t.Errorf("subject = %q", got)
	}
	if got := subject("", nil); got != "0:" {
		t.Errorf("subject of nothing = %q, want \"0:\"", got)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab:|=9 é\x00")
	str := func() string {
		b := make([]byte, rng.IntN(140)) // lengths of one, two and three digits
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for range 2000 {
		domain := str()
		entries := make([]envoyconf.Entry, rng.IntN(4))
		for i := range entries {
			entries[i] = envoyconf.Entry{Key: str(), Value: str()}
		}
		got := subject(domain, entries)
		if w := want(domain, entries); got != w {
			t.Fatalf("subject(%q, %q) = %q, want %q", domain, entries, got, w)
		}
		d, es, ok := parseDescriptorKey(got)
		if !ok || d != domain || !slices.Equal(es, entries) && len(entries) > 0 {
			t.Fatalf("parseDescriptorKey(%q) = %q, %q, %v; want %q, %q", got, d, es, ok, domain, entries)
		}
	}
}

// TestLongSubject: a subject longer than a KeyBuilder takes is its SHA-256 digest, a spelling no
// other subject has, one per descriptor; one of exactly the bound is spelt.
func TestLongSubject(t *testing.T) {
	const head = len("1:d|1:k=") + len("1048560:") // the spelling before a value of 7 digits' length
	at := strings.Repeat("v", bound.MaxSubjectLen-head)
	if got := subject("d", []envoyconf.Entry{{Key: "k", Value: at}}); len(got) != bound.MaxSubjectLen || !strings.HasPrefix(got, "1:d|1:k=") {
		t.Fatalf("subject of %d bytes: spelt in %d bytes, %q…", bound.MaxSubjectLen, len(got), got[:min(len(got), 16)])
	}
	long := func(v string) string { return subject("d", []envoyconf.Entry{{Key: "k", Value: v}}) }
	a, b := long(at+"a"), long(at+"b")
	for _, s := range []string{a, b} {
		if len(s) != len(longDigest)+64 || !strings.HasPrefix(s, longDigest) {
			t.Fatalf("subject of %d bytes = %q; want %q and 64 hex digits", bound.MaxSubjectLen+1, s, longDigest)
		}
		if _, err := hex.DecodeString(strings.TrimPrefix(s, longDigest)); err != nil {
			t.Fatalf("subject %q: %v", s, err)
		}
		if _, _, ok := parseDescriptorKey(s); ok {
			t.Errorf("parseDescriptorKey(%q) reads a digest as a spelling", s)
		}
	}
	if a == b || long(at+"a") != a {
		t.Errorf("long subjects: %q and %q; want one per descriptor, the same each time", a, b)
	}
}
