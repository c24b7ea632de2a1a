// Package jsonanswer writes the JSON answers of admit's HTTP APIs (package transport/httpapi's and
// package transport/admin's) with the same header fields: JSON, not to be cached, not sniffed.
package jsonanswer

import (
	"encoding/json"
	"net/http"
)

// Write answers status with v as JSON and a newline, with Content-Type application/json,
// Cache-Control no-store and X-Content-Type-Options nosniff. v must marshal: it panics otherwise,
// as a caller's own answer types always do.
func Write(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}
