package rlqs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Bounds on what one stream may send, beyond which the stream ends with a gRPC error.
const (
	// MaxEntries is the most entries of one bucket id.
	MaxEntries = 32
	// MaxEntryLen is the longest name or value of a bucket id's entry, in bytes.
	MaxEntryLen = 1024
	// MaxRequests is the most requests (allowed plus denied) one report may count for one bucket.
	MaxRequests = 1 << 40
)

// canonical returns the bucket id as one string, its entries sorted (a bucket id is a map: the
// order Envoy sends them in means nothing), or an error saying what is malformed.
func canonical(id map[string]string) (string, error) {
	switch {
	case len(id) == 0:
		return "", fmt.Errorf("empty bucket id")
	case len(id) > MaxEntries:
		return "", fmt.Errorf("bucket id of %d entries, more than %d", len(id), MaxEntries)
	}
	var b strings.Builder
	for _, k := range sortedKeys(id) {
		v := id[k]
		switch {
		case k == "":
			return "", fmt.Errorf("bucket id with an empty entry name")
		case len(k) > MaxEntryLen || len(v) > MaxEntryLen:
			return "", fmt.Errorf("bucket id entry %.40q longer than %d bytes", k, MaxEntryLen)
		case !utf8.ValidString(k) || !utf8.ValidString(v):
			return "", fmt.Errorf("bucket id entry that is not UTF-8")
		}
		fmt.Fprintf(&b, "%d:%s%d:%s", len(k), k, len(v), v)
	}
	return b.String(), nil
}

// ledgerKey returns the name of a bucket's demand records: the digest of its domain and
// canonical id, so that its length is bounded whatever the id.
func ledgerKey(domain, id string) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%d:%s%s", len(domain), domain, id)))
	return hex.EncodeToString(sum[:16])
}
