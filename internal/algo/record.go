package algo

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/slot"
)

// The idempotency record (docs/keys.md, "Idempotency records"). An admitted request that carries an ID leaves a record, written
// with the admission itself, that holds the request's fingerprint and its Decisions; a repeat of the
// ID within the record's life returns those Decisions, marked replayed, and consumes nothing. The
// same ID with another fingerprint is an invalid request. A rejection leaves no record.

// RecordKey returns the key of the idempotency record of a request with ID id whose first key is
// key. It lies in key's hash slot: its hash tag is key's own, or, for a key without one, the whole
// key (admit.Request.Validate refuses an ID with a key that allows neither).
func RecordKey(key, id string) string {
	sum := sha256.Sum256([]byte(id))
	tag := slot.Tag(key)
	k := make([]byte, 0, len("rl:id:{}:")+len(tag)+bound.DigestLen)
	k = append(k, "rl:id:{"...)
	k = append(k, tag...)
	k = append(k, "}:"...)
	k = hex.AppendEncode(k, sum[:bound.DigestLen/2])
	return string(k)
}

// Fingerprint returns what identifies rs as one request, for telling a retry from a reuse of its
// ID: a digest of every key, Limit (its name, algorithm, alignment and burst when set, rate and
// period) and cost, in order, DigestLen hex characters long.
func Fingerprint(rs []admit.Request) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	field := func(s string) {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	for i := range rs {
		r := &rs[i]
		field(r.Key)
		field(r.Limit.Name)
		alg := r.Limit.Algorithm.String()
		if r.Limit.Aligned {
			alg += "/aligned" // a request that says nothing of alignment keeps its fingerprint
		}
		field(alg)
		field(strconv.FormatInt(r.Limit.Rate, 10))
		field(strconv.FormatInt(r.Limit.Period.Milliseconds(), 10))
		field(strconv.FormatInt(r.Cost, 10))
		if r.Limit.Burst != 0 { // GCRA's; absent otherwise, so fixed-window fingerprints are as they were
			field("burst " + strconv.FormatInt(r.Limit.Burst, 10))
		}
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:bound.DigestLen/2])
}

// RecordTTL returns how long the record of rs lives: the longest Period among them.
func RecordTTL(rs []admit.Request) time.Duration {
	var ttl time.Duration
	for i := range rs {
		ttl = max(ttl, rs[i].Limit.Period)
	}
	return ttl
}

// Recorded reports whether a request of rs with an ID leaves a record when admitted: it consumes
// something. A peek of every key leaves none.
func Recorded(rs []admit.Request) bool {
	for i := range rs {
		if rs[i].Cost > 0 {
			return true
		}
	}
	return false
}
