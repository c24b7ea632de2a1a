package algo

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"sync/atomic"

	"github.com/admit-dev/admit"
)

// Tokens name leases (admit.Decision.Token). A Store makes them before deciding, and passes the
// token of each Request that may acquire a lease to the decision, which keeps it with the lease if
// it is admitted.

// A TokenSource makes lease tokens: a random 64-bit base, read from crypto/rand when the source is
// made, plus a counter, so that tokens of one source never repeat (before 2^64 of them) and tokens of
// two sources, in one process or in many, collide with a chance of about one in 2^64 / tokens made.
// It is safe for concurrent use. Make one with [NewTokenSource]; the zero value makes tokens from a
// base of 0.
type TokenSource struct {
	base uint64
	n    atomic.Uint64
}

// NewTokenSource returns a TokenSource with a random base.
func NewTokenSource() *TokenSource {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return &TokenSource{base: binary.LittleEndian.Uint64(b[:])}
}

// Next returns a new token, never 0.
func (s *TokenSource) Next() uint64 {
	for {
		if t := s.base + s.n.Add(1); t != 0 {
			return t
		}
	}
}

// RequestToken returns the token of the i-th Request of an all-or-nothing request with ID id and
// fingerprint fp ([Fingerprint]), never 0: a retry of the request, with the same ID and fingerprint,
// gets the same token, so that a replayed Decision names the lease the first one acquired. The ID
// is part of it: two requests with different IDs and one fingerprint hold two leases.
func RequestToken(id, fp string, i int) uint64 {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, s := range []string{"lease", id, fp} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	h.Write(n[:binary.PutUvarint(n[:], uint64(i))])
	var sum [sha256.Size]byte
	if t := binary.LittleEndian.Uint64(h.Sum(sum[:0])); t != 0 {
		return t
	}
	return 1
}

// Leases reports whether r acquires a lease when admitted: a Request of cost 1 under a Concurrency
// Limit.
func Leases(r *admit.Request) bool {
	return r.Limit.Algorithm == admit.Concurrency && r.Cost > 0
}

// LeaseTokens fills tokens, of len(rs) elements, with the token each Request of rs acquires when
// admitted, and 0 for one that acquires no lease: from src, or, for a request with an ID, from its
// ID and fingerprint fp, so that a retry acquires the same. It reports whether any acquires one.
func LeaseTokens(src *TokenSource, rs []admit.Request, fp string, tokens []uint64) bool {
	any := false
	for i := range rs {
		tokens[i] = 0
		if !Leases(&rs[i]) {
			continue
		}
		any = true
		if id := rs[i].ID; id != "" {
			tokens[i] = RequestToken(id, fp, i)
		} else {
			tokens[i] = src.Next()
		}
	}
	return any
}
