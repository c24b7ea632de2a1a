// Package jsonanswer writes the JSON answers of admit's HTTP APIs (package transport/httpapi's and
// package transport/admin's) with the same header fields: JSON, not to be cached, not sniffed.
package jsonanswer

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
)

// buffers are the answers' bodies, reused: an answer is encoded into one and written from it, which
// costs no allocation of its own (io.Writer promises not to keep what it is given).
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// The values of the three header fields of every answer, shared rather than allocated by
// Header.Set per answer (the keys are canonical already). Each slice is full (its capacity its
// length), so a later Header.Add appends to a copy and never to the shared array.
var (
	contentType = []string{"application/json"}[:1:1]
	noStore     = []string{"no-store"}[:1:1]
	noSniff     = []string{"nosniff"}[:1:1]
)

// maxPooled is the largest buffer put back into buffers: an unusually large answer (a long
// list of the admin API) is left to the collector rather than kept for every small one.
const maxPooled = 64 << 10

// Write answers status with v as JSON and a newline, with Content-Type application/json,
// Cache-Control no-store and X-Content-Type-Options nosniff. v must marshal: it panics otherwise,
// as a caller's own answer types always do.
func Write(w http.ResponseWriter, status int, v any) {
	buf := buffers.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= maxPooled {
			buffers.Put(buf)
		}
	}()
	// Encode writes what json.Marshal returns and a newline, HTML escaped alike, and nothing on
	// an error.
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		panic(err)
	}
	WriteEncoded(w, status, buf.Bytes())
}

// WriteEncoded answers status with body, JSON its caller encoded as Write would (a newline after
// it), with Write's header fields: for an answer on a hot path encoded without reflection.
func WriteEncoded(w http.ResponseWriter, status int, body []byte) {
	hdr := w.Header()
	hdr["Content-Type"] = contentType
	hdr["Cache-Control"] = noStore
	hdr["X-Content-Type-Options"] = noSniff
	w.WriteHeader(status)
	w.Write(body)
}
