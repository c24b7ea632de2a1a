package slot_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/slot"
)

// Slots as Redis Cluster computes them (CLUSTER KEYSLOT; redisstore's tests compare with a real
// server on random keys).
func TestOf(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want uint16
	}{
		{"foo", 12182},
		{"bar", 5061},
		{"123456789", 12739}, // CRC16/XMODEM's check value 0x31C3, modulo 16384
		{"{foo}bar", 12182},
		{"x{foo}y{bar}", 12182},
		{"foo{}{bar}", slot.Of("foo{}{bar}")}, // an empty tag: the whole key
		{"{}", slot.Of("{}")},
	} {
		if got := slot.Of(tc.key); got != tc.want {
			t.Errorf("Of(%q) = %d, want %d", tc.key, got, tc.want)
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
		if got := slot.Tag(tc.key); got != tc.tag {
			t.Errorf("Tag(%q) = %q, want %q", tc.key, got, tc.tag)
		}
	}
}

// Of's CRC, four bytes a step, is the CRC16 (XMODEM) computed bit by bit, on keys of every length up
// to 100 bytes, of any bytes, with and without hash tags.
func TestOfIsBitwiseCRC16(t *testing.T) {
	bitwise := func(s string) uint16 {
		var c uint16
		for i := range len(s) {
			c ^= uint16(s[i]) << 8
			for range 8 {
				if c&0x8000 != 0 {
					c = c<<1 ^ 0x1021
				} else {
					c <<= 1
				}
			}
		}
		return c
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 101 {
		for range 20 {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rng.IntN(256))
				if rng.IntN(8) == 0 {
					b[i] = "{}"[rng.IntN(2)]
				}
			}
			key := string(b)
			tag := key
			if open := strings.IndexByte(key, '{'); open >= 0 {
				if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
					tag = key[open+1 : open+1+end]
				}
			}
			if got := slot.Tag(key); got != tag {
				t.Fatalf("Tag(%q) = %q; want %q", key, got, tag)
			}
			if got, want := slot.Of(key), bitwise(tag)%bound.SlotCount; got != want {
				t.Fatalf("Of(%q) = %d; want %d", key, got, want)
			}
		}
	}
}

// ExampleOf shows that keys with the same hash tag share a slot, and so may be decided together.
func ExampleOf() {
	fmt.Println(slot.Of("rl:a:v1-fw1000:{tenant}"), slot.Of("rl:b:v1-fw1000:{tenant}:x"), slot.Tag("rl:a:{tenant}"))
	// Output: 14419 14419 tenant
}
