// Package slot is the Redis Cluster hash slot arithmetic of keys: the slot a key hashes to and the
// hash tag it hashes. Keys decided together must share a slot; every Store checks it with [Of], so
// code tested on one process never meets CROSSSLOT in a cluster. It imports only the standard
// library and bound, so the root package may stand on it.
package slot

import (
	"strings"

	"github.com/admit-dev/admit/internal/bound"
)

// Of returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of its hash tag — the part between
// the first '{' and the first '}' after it, when that part is not empty — or of the whole key, modulo
// bound.SlotCount (16384).
func Of(key string) uint16 {
	return crc16(Tag(key)) % bound.SlotCount
}

// Tag returns the part of key that [Of] hashes: its hash tag, or the whole key.
func Tag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	// Tags are short: a byte loop finds the '}' sooner than a second IndexByte call.
	for i := open + 1; i < len(key); i++ {
		if key[i] == '}' {
			if i == open+1 {
				return key // an empty tag: the whole key
			}
			return key[open+1 : i]
		}
	}
	return key
}

// HasTag reports whether key has a hash tag.
func HasTag(key string) bool { return len(Tag(key)) != len(key) }

// CanTagWhole reports whether "{" + key + "}" hashes to key's slot: key has no '}' to end the tag early.
func CanTagWhole(key string) bool { return strings.IndexByte(key, '}') < 0 }

// crc16Tables[k][b] is the CRC16-CCITT (XMODEM, polynomial 0x1021, the one Redis Cluster uses) of
// byte b followed by k zero bytes; crc16Tables[0] is the usual byte-at-a-time table. CRC16 is
// linear, so the CRC of four more bytes is the XOR of four entries (the first two bytes XORed with
// the CRC so far): crc16 takes four bytes a step, about a third of the instructions of one byte a
// step on a 30-byte key (memstore picks a key's shard by its slot on every decision).
var crc16Tables = func() (t [4][256]uint16) {
	for b := range 256 {
		c := uint16(b) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[0][b] = c
	}
	for k := 1; k < len(t); k++ {
		for b := range 256 {
			c := t[k-1][b]
			t[k][b] = c<<8 ^ t[0][c>>8]
		}
	}
	return t
}()

func crc16(s string) uint16 {
	var c uint16
	for ; len(s) >= 4; s = s[4:] {
		x := c ^ (uint16(s[0])<<8 | uint16(s[1]))
		c = crc16Tables[3][x>>8] ^ crc16Tables[2][byte(x)] ^ crc16Tables[1][s[2]] ^ crc16Tables[0][s[3]]
	}
	for i := range len(s) {
		c = c<<8 ^ crc16Tables[0][byte(c>>8)^s[i]]
	}
	return c
}
