package rls

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

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
