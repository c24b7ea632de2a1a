package rls

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/policy/envoyconf"
)

// parseDescriptorKey returns the domain and entries of a DescriptorKey, or false when key is none.
func parseDescriptorKey(key string) (domain string, entries []envoyconf.Entry, ok bool) {
	str := func(s string) (v, rest string, ok bool) { // a string after its length and ':'
		n, rest, found := strings.Cut(s, ":")
		l, err := strconv.Atoi(n)
		if !found || err != nil || l < 0 || l > len(rest) {
			return "", "", false
		}
		return rest[:l], rest[l:], true
	}
	domain, rest, ok := str(key)
	for ok && rest != "" {
		var k, v string
		if ok = rest[0] == '|'; !ok {
			break
		}
		if k, rest, ok = str(rest[1:]); !ok || rest == "" || rest[0] != '=' {
			ok = false
			break
		}
		if v, rest, ok = str(rest[1:]); ok {
			entries = append(entries, envoyconf.Entry{Key: k, Value: v})
		}
	}
	if !ok || subject(domain, entries) != key { // one spelling only: "+5:" is no length
		return "", nil, false
	}
	return domain, entries, true
}

// subject returns the subject of a descriptor of entries in domain: each string length-prefixed,
// so that no two descriptors share one. It is spelt on the stack when it fits: one allocation, the
// string's. A subject longer than a KeyBuilder takes (1 MiB, which a request of 4 MiB may reach)
// is its SHA-256 digest instead, after longDigest: a subject of its own, as no spelt one starts
// with '#', of bounded length, so that such a descriptor is decided as envoyproxy/ratelimit
// decides it rather than refused.
func subject(domain string, entries []envoyconf.Entry) string {
	var buf [256]byte
	b := appendLengthPrefixed(buf[:0], domain)
	for _, e := range entries {
		b = appendLengthPrefixed(append(b, '|'), e.Key)
		b = appendLengthPrefixed(append(b, '='), e.Value)
	}
	if len(b) > bound.MaxSubjectLen {
		sum := sha256.Sum256(b)
		return longDigest + hex.EncodeToString(sum[:])
	}
	return string(b)
}

// longDigest begins the subject of a descriptor whose spelt subject is too long: its SHA-256 digest
// in hex follows.
const longDigest = "#sha256:"

// appendLengthPrefixed appends s's length in decimal, a colon and s to b.
func appendLengthPrefixed(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	return append(append(b, ':'), s...)
}
