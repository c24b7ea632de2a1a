package admit_test

import (
	"testing"

	"github.com/admit-dev/admit"
)

// Slots as Redis Cluster computes them (CLUSTER KEYSLOT; redisstore's tests compare with a real
// server on random keys).
func TestSlot(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want uint16
	}{
		{"foo", 12182},
		{"bar", 5061},
		{"123456789", 12739}, // CRC16/XMODEM's check value 0x31C3, modulo 16384
		{"{foo}bar", 12182},
		{"x{foo}y{bar}", 12182},
		{"foo{}{bar}", admit.Slot("foo{}{bar}")}, // an empty tag: the whole key
		{"{}", admit.Slot("{}")},
	} {
		if got := admit.Slot(tc.key); got != tc.want {
			t.Errorf("Slot(%q) = %d, want %d", tc.key, got, tc.want)
		}
	}
	for _, tc := range []struct{ key, tag string }{
		{"foo", "foo"},
		{"{foo}bar", "foo"},
		{"foo{}{bar}", "foo{}{bar}"},
		{"foo{{bar}}zap", "{bar"},
		{"foo{bar}{zap}", "bar"},
		{"a{b", "a{b"},
		{"a}b{", "a}b{"},
	} {
		if got := admit.SlotTag(tc.key); got != tc.tag {
			t.Errorf("SlotTag(%q) = %q, want %q", tc.key, got, tc.tag)
		}
	}
}
