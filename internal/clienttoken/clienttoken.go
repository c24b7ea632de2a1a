// Package clienttoken guards admit serve's data plane with client tokens: a file of tokens, one a
// line (server.client_tokens_file), and a request that must bear one, `Authorization: Bearer
// TOKEN` over HTTP and the `authorization` metadata of gRPC. A [Set] keeps only the tokens'
// SHA-256 digests, compares a presented token's digest with every one of them in constant time,
// with no early exit, so that neither a token's bytes nor its length leak through timing, and
// [Set.Reload] reads the file again when its modification time or size changed: a file that does
// not load keeps the last good tokens. How it is used: docs/security.md#client-tokens.
package clienttoken

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/admit-dev/admit/internal/boundedread"

	"github.com/admit-dev/admit/internal/filestamp"
)

// Bounds of a tokens file.
const (
	// MinLen is the shortest token, in bytes.
	MinLen = 16
	// MaxFileSize is the largest tokens file read.
	MaxFileSize = 1 << 20
)

// field names the file in errors, as the configuration does.
const field = "server.client_tokens_file"

// A Set is the tokens of one file. It is safe for concurrent use; make one with [Load].
type Set struct {
	path    string
	digests atomic.Pointer[[][sha256.Size]byte]
	mu      sync.Mutex // serialises Reload
	stamp   filestamp.Stamp
	refused atomic.Pointer[func(ctx context.Context, via, client string)]
}

// OnRefused sets f to be called for every request refused for want of a token, with via "http"
// or "grpc" and the client's address (host:port), never what it sent; nil calls nothing. Set it
// before serving; f must not block.
func (s *Set) OnRefused(f func(ctx context.Context, via, client string)) {
	if f == nil {
		s.refused.Store(nil)
		return
	}
	s.refused.Store(&f)
}

// refuse reports a refused request to the OnRefused function, if any.
func (s *Set) refuse(ctx context.Context, via, client string) {
	if f := s.refused.Load(); f != nil {
		(*f)(ctx, via, client)
	}
}

// Load reads the tokens file at path and returns its Set, or an error that names the field, the
// file and the line, never a token.
func Load(path string) (*Set, error) {
	stamp := filestamp.Of(path)
	d, err := read(path)
	if err != nil {
		return nil, err
	}
	s := &Set{path: path, stamp: stamp}
	s.digests.Store(&d)
	return s, nil
}

// Check reports the first error in the tokens file at path, as Load would.
func Check(path string) error {
	_, err := read(path)
	return err
}

// Parse returns the digests of the tokens in data: one token a line, less the spaces around it;
// blank lines and lines starting with # are skipped. A token shorter than MinLen, or holding a
// byte that is not printable ASCII (or is a space), is an error naming its line; so is a file of
// no token.
func Parse(data []byte) ([][sha256.Size]byte, error) {
	var digests [][sha256.Size]byte
	for i, line := range bytes.Split(data, []byte("\n")) {
		tok := bytes.TrimSpace(line)
		if len(tok) == 0 || tok[0] == '#' {
			continue
		}
		if len(tok) < MinLen {
			return nil, fmt.Errorf("line %d: the token is %d bytes; want at least %d", i+1, len(tok), MinLen)
		}
		if bytes.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r > '~' }) {
			return nil, fmt.Errorf("line %d: the token holds a space or a byte that is not printable ASCII", i+1)
		}
		digests = append(digests, sha256.Sum256(tok))
	}
	if len(digests) == 0 {
		return nil, errors.New("holds no token")
	}
	return digests, nil
}

// read reads the tokens file at path into digests.
func read(path string) ([][sha256.Size]byte, error) {
	if path == "" {
		return nil, errors.New(field + ": want a file name")
	}
	data, err := boundedread.File(field, path, MaxFileSize)
	if err != nil {
		return nil, err
	}
	d, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %v", field, path, err)
	}
	return d, nil
}

// Len returns the number of tokens loaded.
func (s *Set) Len() int { return len(*s.digests.Load()) }

// Valid reports whether token is one of the Set's: its digest is compared with every token's, in
// constant time, with no early exit.
func (s *Set) Valid(token string) bool {
	given := sha256.Sum256([]byte(token))
	match := 0
	for _, d := range *s.digests.Load() {
		match |= subtle.ConstantTimeCompare(given[:], d[:])
	}
	return match == 1
}

// Bearer reports whether the values of the Authorization field of a request (HTTP header fields
// or gRPC metadata) are one `Bearer TOKEN` (the scheme in any case) with a token of the Set.
func (s *Set) Bearer(values []string) bool {
	if len(values) != 1 {
		return false
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	return ok && strings.EqualFold(scheme, "Bearer") && s.Valid(strings.TrimLeft(token, " "))
}

// Reload reads the file again when its modification time or size changed since the last look, or
// always when force is set. It reports whether it replaced the tokens; on an error the last good
// tokens stay, and the same error of a file that does not change again is reported once.
func (s *Set) Reload(force bool) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stamp := filestamp.Of(s.path)
	if stamp == s.stamp && !force {
		return false, nil
	}
	s.stamp = stamp
	d, err := read(s.path)
	if err != nil {
		return false, err
	}
	s.digests.Store(&d)
	return true, nil
}
