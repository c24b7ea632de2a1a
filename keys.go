package admit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"strconv"
	"sync"

	"github.com/admit-dev/admit/internal/bound"
)

// A Subject is who a request is limited as: a principal the server authenticated, or a client IP
// resolved through trusted proxies — never a value the client chose (docs/keys.md).
type Subject struct {
	// ID is the subject: any bytes, 1 byte to 1 MiB. It is digested, never stored.
	ID string
	// Slot is the slot subject, such as the subject's tenant: the keys of every subject with the same
	// Slot share one Redis Cluster hash slot, so "10/s per user AND 100k/min per tenant" can be
	// decided together. Empty means ID.
	Slot string
	// Tier is the tier the subject is in, such as "pro", or "" for none: a [Limiter] decides it
	// under each policy's Limit of that Tier (see [NewLimiter]). It is not in the key.
	Tier string
}

// A KeyBuilder makes the keys of policies' subjects: the one way the middleware, the service and
// Envoy make keys (docs/keys.md). It is safe for concurrent use. Make one with [NewKeyBuilder]; the zero
// value is not usable.
//
// A key is
//
//	rl:<policy>:v<version>-<shape>:{<slot digest>}
//	rl:<policy>:v<version>-<shape>:{<slot digest>}:<subject digest>   when Subject.Slot is set and differs from ID
//
// where policy is Limit.Name; version is the caller's version of the policy (bump it to start every
// subject afresh); shape (docs/keys.md) changes with the algorithm or the window, so that a reshaped
// policy starts on fresh keys rather than finding state it must call corrupt, while a change of the
// rate alone keeps the counters; and a digest is HMAC-SHA256 under the secret of the
// length-prefixed subject, truncated to 32 hex characters. Keys are at most about 250 bytes
// whatever the subject, hold no personal data, and two policies never share one.
type KeyBuilder struct {
	digesters sync.Pool // of *digester: HMAC-SHA256 under the secret
}

// A digester is an HMAC-SHA256 under a KeyBuilder's secret with the scratch space that feeding it
// needs. The hash is called through an interface, so a buffer on the caller's stack that it is
// given escapes to the heap; the digester's own buffers, pooled with it, cost no allocation.
type digester struct {
	mac     hash.Hash
	scratch [256]byte // a field's length, then its bytes, copied in chunks: Write takes []byte
	sum     [sha256.Size]byte
}

// NewKeyBuilder returns a KeyBuilder that digests subjects with secret, which must be at least
// 16 bytes. Every process that shares limits must use the same secret: keys made with
// different secrets never meet.
func NewKeyBuilder(secret []byte) (*KeyBuilder, error) {
	if len(secret) < bound.MinSecretLen {
		return nil, fmt.Errorf("admit: HMAC secret of %d bytes; want at least %d", len(secret), bound.MinSecretLen)
	}
	key := append([]byte(nil), secret...)
	b := &KeyBuilder{}
	b.digesters.New = func() any { return &digester{mac: hmac.New(sha256.New, key)} }
	return b, nil
}

// Key returns the key of subject s under lim, in version of the policy lim.Name. It reports an
// error matching ErrInvalidLimit for an invalid lim, an empty lim.Name or an invalid version (1 to
// 64 characters of a-z, 0-9, '_' and '-'), and ErrInvalidRequest for an empty or oversized
// subject.
func (b *KeyBuilder) Key(lim Limit, version string, s Subject) (string, error) {
	if err := checkKey(lim, version, s); err != nil {
		return "", err
	}
	var buf [keyBufLen]byte // the key is built on the stack: string(k) is its one allocation
	return string(b.appendSubject(appendKeyHead(buf[:0], lim, version), s)), nil
}

// appendKeyHead appends to k what a key of lim in version holds before its subject:
// rl:<policy>:v<version>-<shape>.
func appendKeyHead(k []byte, lim Limit, version string) []byte {
	k = append(k, "rl:"...)
	k = append(k, lim.Name...)
	k = append(k, ":v"...)
	k = append(k, version...)
	k = append(k, '-')
	return lim.appendShape(k)
}

// keys returns the Key of subject s under lim in version, and the OverrideKey of s under lim's
// policy, with Key's checks and errors: the two built into one string, sliced, so that they cost one
// allocation and each digest is computed once.
func (b *KeyBuilder) keys(lim Limit, version string, s Subject) (key, overrideKey string, err error) {
	if err := checkKey(lim, version, s); err != nil {
		return "", "", err
	}
	var buf [2 * keyBufLen]byte // both keys on the stack: string(k) is their one allocation
	k := appendKeyHead(buf[:0], lim, version)
	at := len(k)
	k = b.appendSubject(k, s)
	subject := len(k) - at // the subject part, the same in both keys: copied, not digested again
	n := len(k)
	k = append(k, "rl:"...)
	k = append(k, lim.Name...)
	k = append(k, ":o"...)
	k = append(k, k[at:at+subject]...)
	both := string(k)
	return both[:n], both[n:], nil
}

// OverrideKey returns the key of subject s's [Override] under the policy named policy:
//
//	rl:<policy>:o:{<slot digest>}
//	rl:<policy>:o:{<slot digest>}:<subject digest>   when Subject.Slot is set and differs from ID
//
// in the hash slot of every key of s, so that a Store reads it with the subject's state in one
// call. It holds neither a version nor a shape: an Override outlives a new version or shape of its
// policy. It reports an error matching ErrInvalidLimit for an invalid policy name, and
// ErrInvalidRequest for an empty or oversized subject.
func (b *KeyBuilder) OverrideKey(policy string, s Subject) (string, error) {
	if !validName(policy) {
		return "", fmt.Errorf("%w: policy name %q: want 1-%d characters of a-z, 0-9, '_' and '-'", ErrInvalidLimit, policy, bound.MaxNameLen)
	}
	if err := checkSubject(s); err != nil {
		return "", err
	}
	var buf [keyBufLen]byte
	k := append(buf[:0], "rl:"...)
	k = append(k, policy...)
	k = append(k, ":o"...)
	return string(b.appendSubject(k, s)), nil
}

// checkKey reports why no key of subject s under lim in version can be made, with Key's errors, or
// nil.
func checkKey(lim Limit, version string, s Subject) error {
	if err := lim.Validate(); err != nil {
		return err
	}
	switch {
	case lim.Name == "":
		return fmt.Errorf("%w: a key needs a policy name", ErrInvalidLimit)
	case !validName(version):
		return fmt.Errorf("%w: key version %q: want 1-%d characters of a-z, 0-9, '_' and '-'", ErrInvalidLimit, version, bound.MaxNameLen)
	}
	return checkSubject(s)
}

// checkSubject reports why s cannot be in a key, as an error matching ErrInvalidRequest, or nil.
func checkSubject(s Subject) error {
	switch {
	case s.ID == "":
		return fmt.Errorf("%w: empty subject", ErrInvalidRequest)
	case len(s.ID) > bound.MaxSubjectLen || len(s.Slot) > bound.MaxSubjectLen:
		return fmt.Errorf("%w: subject of more than %d bytes", ErrInvalidRequest, bound.MaxSubjectLen)
	}
	return nil
}

// appendSubject appends the subject part of every key of s: ":{<slot digest>}", then
// ":<subject digest>" when s.Slot is set and differs from s.ID.
func (b *KeyBuilder) appendSubject(k []byte, s Subject) []byte {
	slot := s.Slot
	if slot == "" {
		slot = s.ID
	}
	k = append(k, ":{"...)
	k = b.appendDigest(k, "slot", slot)
	k = append(k, '}')
	if slot != s.ID {
		k = append(k, ':')
		k = b.appendDigest(k, "subject", s.ID)
	}
	return k
}

// keyBufLen is the room Key reserves on the stack for a key: enough for every key of a policy name
// and version of bound.MaxNameLen characters and the longest shape.
const keyBufLen = 256

// appendDigest appends the digest of the fields label and value: hex of HMAC-SHA256 over each
// field's length (a uvarint) and bytes, truncated to bound.DigestLen characters.
func (b *KeyBuilder) appendDigest(dst []byte, label, value string) []byte {
	d := b.digesters.Get().(*digester)
	d.mac.Reset()
	for _, f := range [2]string{label, value} {
		d.mac.Write(d.scratch[:binary.PutUvarint(d.scratch[:], uint64(len(f)))])
		for len(f) > 0 {
			n := copy(d.scratch[:], f)
			d.mac.Write(d.scratch[:n])
			f = f[n:]
		}
	}
	sum := d.mac.Sum(d.sum[:0])
	dst = hex.AppendEncode(dst, sum[:bound.DigestLen/2])
	b.digesters.Put(d)
	return dst
}

// appendShape appends to dst the part of a key's version segment that changes when the shape of
// the state l keeps changes: its algorithm and its window, such as "fw10000" for a fixed window of
// 10 s from the first admission, "fwa10000" for one aligned to Unix time, "sw10000" for a sliding window and
// "sl10000" for a sliding log of 10 s. The rate is not part of these, so a change of the rate alone
// keeps the counters (a sliding window's counts and a sliding log's timestamps are units admitted,
// as meaningful under any rate).
//
// GCRA's shape is its emission interval in microseconds and its capacity, such as "gcra100000b20" for
// 10 per second with a burst of 20: its state is a time, which means a number of units only at one
// emission interval, so a new rate (or burst) starts on fresh keys, while 10 per second and 600 per
// minute, the same bucket, share them (docs/keys.md).
//
// Concurrency's shape is "cc" whatever its numbers: each lease stores its own expiry, so a new rate or
// lease TTL keeps counting the leases in flight.
//
// Key appends it to the key it builds, which costs no allocation of its own.
func (l Limit) appendShape(dst []byte) []byte {
	period := l.Period.Milliseconds()
	switch l.Algorithm {
	case FixedWindow:
		if l.Aligned {
			return strconv.AppendInt(append(dst, "fwa"...), period, 10)
		}
		return strconv.AppendInt(append(dst, "fw"...), period, 10)
	case SlidingWindow:
		return strconv.AppendInt(append(dst, "sw"...), period, 10)
	case SlidingLog:
		return strconv.AppendInt(append(dst, "sl"...), period, 10)
	case GCRA:
		dst = strconv.AppendInt(append(dst, "gcra"...), l.EmissionInterval().Microseconds(), 10)
		return strconv.AppendInt(append(dst, 'b'), l.Capacity(), 10)
	case Concurrency:
		return append(dst, "cc"...) // a lease stores its own expiry: a new TTL or rate keeps the leases in flight
	}
	dst = strconv.AppendInt(append(dst, 'x'), int64(l.Algorithm), 10)
	return strconv.AppendInt(append(dst, '-'), period, 10)
}
