// Package syncbuf is a bytes.Buffer that is safe for concurrent use, for tests that read a log while
// something else, such as a server or a timer, writes it.
package syncbuf

import (
	"bytes"
	"strings"
	"sync"
)

// A Buffer keeps everything written to it. It is safe for concurrent use. The zero value is an
// empty Buffer ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p to the buffer. It always returns len(p), nil.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns the lines written so far, without their line feeds and without leading or trailing
// blank lines; nil if nothing but white space was written.
func (b *Buffer) Lines() []string {
	s := strings.TrimSpace(b.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
