package admit

import "strings"

// SlotCount is the number of Redis Cluster hash slots.
const SlotCount = 16384

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of its hash tag — the part between
// the first '{' and the first '}' after it, when that part is not empty — or of the whole key, modulo
// SlotCount. Keys decided together must share a slot; every Store checks it, so code tested on one
// process never meets CROSSSLOT in a cluster.
func Slot(key string) uint16 {
	return crc16(SlotTag(key)) % SlotCount
}

// SlotTag returns the part of key that [Slot] hashes: its hash tag, or the whole key.
func SlotTag(key string) string {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			return key[open+1 : open+1+n]
		}
	}
	return key
}

// hasSlotTag reports whether key has a hash tag.
func hasSlotTag(key string) bool { return len(SlotTag(key)) != len(key) }

// canTagWhole reports whether "{" + key + "}" hashes to key's slot: key has no '}' to end the tag early.
func canTagWhole(key string) bool { return strings.IndexByte(key, '}') < 0 }

// crc16Table is the CRC16-CCITT (XMODEM) table, polynomial 0x1021, that Redis Cluster uses.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

func crc16(s string) uint16 {
	var c uint16
	for i := range len(s) {
		c = c<<8 ^ crc16Table[byte(c>>8)^s[i]]
	}
	return c
}
